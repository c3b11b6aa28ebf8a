"""Caller-provided output buffers (``runner(..., out={"Y": buf})``): the checks every backend applies.

An ``out`` buffer must be an export of the program, a writeable C-contiguous
NumPy array of the export's dtype and shape, and share no memory with an
input or with another ``out`` buffer (the program would read what it is
overwriting). What can be checked before the run (names, type, flags, dtype
when known, overlap) is checked by :func:`check_out`; the shape, known only
once extents are, by :func:`fill_out` after it. On a shape error the buffer's
contents are unspecified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fuse_mlir.diagnostics import FuseRuntimeError

__all__ = ["check_out", "fill_out"]


def check_out(
    out: Mapping[str, Any], exports: Mapping[str, np.dtype | None], inputs: Iterable[np.ndarray]
) -> dict[str, np.ndarray]:
    """Validate ``out`` against the program's exports (name → dtype, None if unknown) and its input arrays."""
    if not isinstance(out, Mapping):
        raise FuseRuntimeError(f"out must map export names to arrays, got {type(out).__name__}")
    checked: dict[str, np.ndarray] = {}
    inputs = list(inputs)
    for name, buf in out.items():
        if name not in exports:
            raise FuseRuntimeError(
                f"out: {name} is not an export of the program (exports: {', '.join(exports) or 'none'})"
            )
        if not isinstance(buf, np.ndarray):
            raise FuseRuntimeError(f"out buffer for {name} must be a NumPy array, got {type(buf).__name__}")
        if not buf.flags.writeable:
            raise FuseRuntimeError(f"out buffer for {name} is read-only")
        if not (buf.flags.c_contiguous and buf.flags.aligned):
            raise FuseRuntimeError(f"out buffer for {name} must be C-contiguous and aligned")
        want = exports[name]
        if want is not None and buf.dtype != want:
            raise FuseRuntimeError(f"out buffer for {name} has dtype {buf.dtype}, but the result has dtype {want}")
        for a in inputs:
            if np.may_share_memory(buf, a):
                raise FuseRuntimeError(f"out buffer for {name} overlaps an input of the program")
        for other, b in checked.items():
            if np.may_share_memory(buf, b):
                raise FuseRuntimeError(f"out buffers for {other} and {name} overlap")
        checked[name] = buf
    return checked


def fill_out(buf: np.ndarray, value: np.ndarray, name: str) -> np.ndarray:
    """Copy result ``name`` into its ``out`` buffer (same shape and dtype, else a FuseRuntimeError); return the buffer."""
    if buf is value:
        return buf
    if buf.shape != value.shape or buf.dtype != value.dtype:
        raise FuseRuntimeError(
            f"out buffer for {name} has shape {buf.shape} and dtype {buf.dtype}, "
            f"but the result has shape {value.shape} and dtype {value.dtype}"
        )
    np.copyto(buf, value)
    return buf
