"""The bounded in-memory cache of compiled programs: least recently used entries go first.

Each process keeps the native programs it compiled so a second ``compile`` of
the same program is free. Every entry holds machine code (an LLVM execution
engine), its tables, and for diagnostics its loop module and LLVM IR, about
0.1 to 1 MB, so a long-running service that compiles many distinct programs
must not keep them all: the cache holds at most ``$FUSE_CACHE_MAX`` entries
(default :data:`DEFAULT_MAX_ENTRIES`; ``0`` keeps none) and drops the least
recently used. A dropped entry is freed as soon as no runner uses it (runners
hold their program directly, so dropping never breaks one). The disk cache
(:mod:`fuse_mlir.backends.llvm.diskcache`) is separate and unbounded here.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

from fuse_mlir.diagnostics import FuseError

DEFAULT_MAX_ENTRIES = 128
"""Entries kept when ``$FUSE_CACHE_MAX`` is unset: a few tens of MB at most."""

ENV = "FUSE_CACHE_MAX"

V = TypeVar("V")


def max_entries() -> int:
    """The bound from ``$FUSE_CACHE_MAX`` (a whole number >= 0), else the default; a bad value is a FuseError."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_MAX_ENTRIES
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if value < 0 or len(text) > 12:
        raise FuseError(f"{ENV} must be a whole number of cache entries >= 0 (0 disables the cache), got {text!r}")
    return value


class BoundedCache(Generic[V]):
    """A thread-safe LRU map from keys to compiled programs, bounded by :func:`max_entries` (read on each insert,
    so a changed environment applies at once). It offers the ``dict`` methods the backends use."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        """The entry for ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def setdefault(self, key: str, value: V) -> V:
        """The entry already stored for ``key`` (another thread may have compiled it meanwhile), else ``value``,
        now stored; the least recently used entries beyond the bound are dropped."""
        limit = max_entries()
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._items.move_to_end(key)
                return old
            if limit > 0:
                self._items[key] = value
            while len(self._items) > limit:
                self._items.popitem(last=False)
            return value

    def __setitem__(self, key: str, value: V) -> None:
        self.setdefault(key, value)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._items.clear()
