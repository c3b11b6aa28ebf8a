"""Recycled result buffers: fresh output arrays without the page-fault tax.

A result handed to the caller is a new array (not aliased with any later
call's), but a brand-new large buffer costs the kernel a page fault and a
zero-fill per page on first touch (about as much as the kernel's own work on
a streaming workload; NumPy pays it too). So the runtime hands results out
over a small *holder* object and, when the caller has released every array
that views it (the holder is collected), takes the buffer back into a pool;
the arena restocks its slot from that pool, so a steady stream of calls
reuses pages already faulted in, while each call still returns arrays no
other call writes.

Why a holder: NumPy collapses view chains to the object that owns the
memory, so a view ``y = r[1:]`` of a result ``r`` would not keep ``r``
alive. Building ``r`` over a ``ctypes`` array that wraps the buffer makes
that ctypes object the base of ``r`` *and* of every view of it, so it dies
only when the last of them does. The pool is bounded
(:data:`POOL_BYTES`, ``FUSE_POOL_BYTES``); buffers over the bound are freed.
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref

import numpy as np

ALIGN = 64
"""The alignment of every native buffer (bytes)."""

_addressof = ctypes.addressof
_c_char = ctypes.c_char


def address(a: np.ndarray) -> int:
    """The data address of an array (the ctypes buffer route is ~4x faster than ``a.ctypes.data``)."""
    try:
        return _addressof(_c_char.from_buffer(a))  # type: ignore[arg-type]  # an ndarray is a writable buffer
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def aligned_buffer(nbytes: int) -> tuple[np.ndarray, int, int]:
    """A fresh ``uint8`` array with ``nbytes`` usable bytes at a 64-byte aligned address: (base, offset, address)."""
    base = np.empty(nbytes + ALIGN, dtype=np.uint8)
    addr = address(base)
    off = (-addr) % ALIGN
    return base, off, addr + off


__all__ = ["ALIGN", "POOL_BYTES", "address", "aligned_buffer", "hand_out", "pool_bytes", "take"]

POOL_BYTES = int(os.environ.get("FUSE_POOL_BYTES", str(1 << 30)))
"""Most bytes the pool keeps for reuse (released results beyond it are freed)."""

_lock = threading.Lock()
_free: dict[int, list[tuple[np.ndarray, int, int]]] = {}  # capacity -> [(base, offset, address)]
_held = 0


def take(nbytes: int) -> tuple[np.ndarray, int, int]:
    """A buffer of exactly ``nbytes`` usable bytes, 64-byte aligned: a released one if pooled, else a new one."""
    global _held
    with _lock:
        stack = _free.get(nbytes)
        if stack:
            _held -= nbytes
            return stack.pop()
    return aligned_buffer(nbytes)


def _give(base: np.ndarray, off: int, addr: int, nbytes: int) -> None:
    global _held
    with _lock:
        if _held + nbytes <= POOL_BYTES:
            _free.setdefault(nbytes, []).append((base, off, addr))
            _held += nbytes


def pool_bytes() -> int:
    """Bytes currently pooled (released results waiting for reuse)."""
    return _held


def hand_out(
    shape: tuple[int, ...], dtype: np.dtype, base: np.ndarray, off: int, addr: int, capacity: int
) -> np.ndarray:
    """An array over ``base[off:off+capacity]`` (at ``addr``) whose buffer returns to the pool once no array views it."""
    holder = (ctypes.c_char * capacity).from_buffer(base, off)  # type: ignore[arg-type]  # an ndarray exports a buffer
    count = 1
    for e in shape:
        count *= e
    arr = np.frombuffer(holder, dtype=dtype, count=count).reshape(shape)  # type: ignore[call-overload]
    fin = weakref.finalize(holder, _give, base, off, addr, capacity)
    fin.atexit = False
    return arr
