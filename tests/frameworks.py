"""Which backends this environment can run: the hand-off backends need their framework importable.

``pip install '.[test]'`` installs torch, jax and numba; without one of them, the suite skips (rather than fails)
the cases on its backend: tests/conftest.py skips backend-parametrised cases at collection, and tests that loop
over backends themselves take :func:`available_backends` (or test :func:`missing_framework`).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterable

# Backend name (as Program.compile takes it, plus the suite's own torch_compile mode) -> the module it imports.
FRAMEWORK_OF = {"numba": "numba", "torch": "torch", "torch_compile": "torch", "jax": "jax"}


@functools.cache
def missing_framework(backend: str) -> str | None:
    """Why ``backend`` cannot run here (a skip reason naming the package and the extra to install), or None."""
    module = FRAMEWORK_OF.get(backend)
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return (
        f"the {backend} backend needs {module}, which is not installed: "
        f"pip install '.[test]' (or '.[{module}]') to run this case"
    )


def available_backends(backends: Iterable[str]) -> list[str]:
    """``backends`` without those whose framework is not installed (order kept)."""
    return [b for b in backends if missing_framework(b) is None]
