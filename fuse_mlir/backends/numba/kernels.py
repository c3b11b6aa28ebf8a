"""The numba backend's helpers for the rendered code: scalar ops with LLVM semantics, and ``loop.gemm`` on BLAS.

Each is an ``njit`` function the generated ``fuse_main`` calls as ``_k.name``;
the semantics are those of :mod:`fuse_mlir.interp.loop_interp`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
from numba import njit


@njit(cache=False)
def divsi(a, b):  # noqa: ANN001, ANN201 - numba specialises on the argument types
    """Signed division truncating toward zero (``arith.divsi``)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@njit(cache=False)
def remsi(a, b):  # noqa: ANN001, ANN201
    """The remainder of :func:`divsi` (sign of the dividend)."""
    return a - b * divsi(a, b)


@njit(cache=False)
def maximumf(a, b):  # noqa: ANN001, ANN201
    """``llvm.maximum``: NaN if either is NaN; +0 above -0."""
    if a != a or b != b:
        return a + b
    if a == b:
        return a if np.signbit(b) else b
    return a if a > b else b


@njit(cache=False)
def minimumf(a, b):  # noqa: ANN001, ANN201
    """``llvm.minimum``: NaN if either is NaN; -0 below +0."""
    if a != a or b != b:
        return a + b
    if a == b:
        return a if np.signbit(a) else b
    return a if a < b else b


@njit(cache=False)
def fptoi(x):  # noqa: ANN001, ANN201
    """Float to integer by truncation; NaN and infinities (undefined in LLVM) give 0, as the loop interpreter."""
    if not np.isfinite(x):
        return np.int64(0)
    return np.int64(x)


@njit(cache=False)
def round_half_away(x):  # noqa: ANN001, ANN201
    """``math.round``: halves away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


@njit(cache=False)
def ipowi(base, exp):  # noqa: ANN001, ANN201
    """Integer power with wrap-around; a negative exponent truncates 1/base**-exp toward zero."""
    b = np.int64(base)
    e = np.int64(exp)
    if e < 0:
        if b == 1:
            return np.int64(1)
        if b == -1:
            return np.int64(-1) if e % 2 else np.int64(1)
        return np.int64(0)
    out = np.int64(1)
    while e > 0:
        if e & 1:
            out = out * b
        b = b * b
        e >>= 1
    return out


def _blas(name: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """SciPy's Fortran BLAS routine ``name`` (all 13 arguments by pointer), callable from nopython code."""
    from scipy.linalg import cython_blas

    from fuse_mlir.backends.llvm.jit import _capsule_pointer

    pointer = _capsule_pointer(cython_blas.__pyx_capi__[name])
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)(pointer)


def _make_gemm(blas: ctypes._CFuncPtr, dtype: type) -> Callable[..., None]:  # type: ignore[name-defined]
    """``loop.gemm`` on flat C-order buffers through ``blas`` (dgemm or sgemm): the loop interpreter's semantics.

    Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the operands swap; nothing is written
    when a size is 0 (beta = 0, the lowering zero-fills C itself). ``sa, lda, sb, ldb, sc, ldc``: each buffer's
    batch and row stride in elements (the renderer passes the contiguous layout's when the op states none;
    a broadcast operand's batch stride is 0).
    """

    @njit(cache=False)
    def gemm(a, bm, c, batch, m, n, k, trans_a, trans_b, sa, lda, sb, ldb, sc, ldc):  # noqa: ANN001, ANN202
        if batch * m * n == 0 or k == 0:
            return
        tr_b = np.array([84 if trans_b else 78], np.uint8)  # 'T' / 'N'
        tr_a = np.array([84 if trans_a else 78], np.uint8)
        dims = np.array([n, m, k, max(ldb, 1), max(lda, 1), max(ldc, 1)], np.int32)
        alpha = np.ones(1, dtype)
        beta = np.zeros(1, dtype)
        for i in range(batch):
            blas(
                tr_b.ctypes,
                tr_a.ctypes,
                dims[0:].ctypes,
                dims[1:].ctypes,
                dims[2:].ctypes,
                alpha.ctypes,
                bm[i * sb :].ctypes,
                dims[3:].ctypes,
                a[i * sa :].ctypes,
                dims[4:].ctypes,
                beta.ctypes,
                c[i * sc :].ctypes,
                dims[5:].ctypes,
            )

    return gemm


dgemm = _make_gemm(_blas("dgemm"), np.float64)
sgemm = _make_gemm(_blas("sgemm"), np.float32)
