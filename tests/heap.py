"""Garbage collection in tests that free objects in a loop, at a cost independent of the rest of the session."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collecting_only_new_objects() -> Iterator[None]:
    """Within the block, ``gc.collect()`` scans only the objects made in it: everything alive before is frozen
    (``gc.freeze``) until the block ends. A full collection scans every tracked object of the process, which late
    in an xdist worker (hundreds of tests' caches) took about two seconds each: 40 of them made one test 80 s."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
