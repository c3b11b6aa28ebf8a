"""Suite-wide fixtures: the persistent compile cache goes to a temporary folder, never the user's home cache."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _fuse_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point ``FUSE_CACHE_DIR`` (read on every compile, inherited by subprocesses) at a session temp folder."""
    old = os.environ.get("FUSE_CACHE_DIR")
    os.environ["FUSE_CACHE_DIR"] = str(tmp_path_factory.mktemp("fuse_cache"))
    yield
    if old is None:
        os.environ.pop("FUSE_CACHE_DIR", None)
    else:
        os.environ["FUSE_CACHE_DIR"] = old
