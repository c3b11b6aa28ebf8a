"""``fuse_dgemm``/``fuse_sgemm`` split large products into slabs over fuse's thread pool (backends/llvm/blas.py).

Every transpose flag, both split directions (by columns of C when n >= m, else by rows), slab counts that do
not divide the extent, a leading dimension larger than the matrix (the rows past it stay untouched) and
alpha/beta are checked against NumPy; BLAS's own thread count is the same after the call as before.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from fuse_mlir.backends.llvm import blas, jit
from fuse_mlir.program import Program

SHAPES = [(1024, 256, 64), (200, 1000, 40), (37, 700, 90), (700, 37, 90), (5, 5, 5)]


def gemm(name: str, split: bool):
    """The registered symbol ``name`` (whichever the setting chose), or its pool-split wrapper."""
    blas.ensure_blas()
    address = blas.split_gemms()[name] if split else jit._symbols[name]
    return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))(address)


def i32(v: int):
    return ctypes.byref(ctypes.c_int32(v))


@pytest.mark.parametrize(
    ("name", "dtype", "ctype"),
    [("fuse_sgemm", np.float32, ctypes.c_float), ("fuse_dgemm", np.float64, ctypes.c_double)],
)
@pytest.mark.parametrize("flags", ["NN", "NT", "TN", "TT", "nt"])
@pytest.mark.parametrize("split", [True, False], ids=["split", "registered"])
def test_split_gemm_matches_numpy(name: str, dtype: type, ctype: type, flags: str, split: bool) -> None:
    f = gemm(name, split)
    rng = np.random.default_rng(3)
    ta, tb = flags
    for m, n, k in SHAPES:
        a = rng.normal(size=(m, k) if ta in "Nn" else (k, m)).astype(dtype)
        b = rng.normal(size=(k, n) if tb in "Nn" else (n, k)).astype(dtype)
        af, bf = np.asfortranarray(a), np.asfortranarray(b)
        c = np.full((m + 3, n), 5.0, dtype=dtype, order="F")  # ldc = m + 3: three rows BLAS must not touch
        f(
            ta.encode(),
            tb.encode(),
            i32(m),
            i32(n),
            i32(k),
            ctypes.byref(ctype(1.5)),
            af.ctypes.data,
            i32(af.shape[0]),
            bf.ctypes.data,
            i32(bf.shape[0]),
            ctypes.byref(ctype(0.5)),
            c.ctypes.data,
            i32(m + 3),
        )
        want = 1.5 * ((a if ta in "Nn" else a.T) @ (b if tb in "Nn" else b.T)) + 2.5
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(c[:m], want, rtol=tol, atol=tol * float(np.abs(want).max()), err_msg=str((m, n, k)))
        assert (c[m:] == 5.0).all()


def test_blas_thread_count_is_restored() -> None:
    """A split product sets OpenBLAS to one thread while it runs and puts the count back."""
    found = blas.find_library()
    if found is None or not any(hasattr(found[0], s) for s, _ in blas._THREAD_FNS):
        pytest.skip("no OpenBLAS thread control in this BLAS")
    lib = found[0]
    getter = next(getattr(lib, g) for s, g in blas._THREAD_FNS if hasattr(lib, g))
    before = getter()
    f = gemm("fuse_dgemm", split=True)
    m = n = k = 300  # 27M multiply-adds: split
    a = np.asfortranarray(np.random.default_rng(0).normal(size=(m, k)))
    c = np.zeros((m, n), order="F")
    one, zero = ctypes.c_double(1.0), ctypes.c_double(0.0)
    f(b"N", b"T", i32(m), i32(n), i32(k), ctypes.byref(one), a.ctypes.data, i32(m), a.ctypes.data, i32(m),
      ctypes.byref(zero), c.ctypes.data, i32(m))  # fmt: skip
    np.testing.assert_allclose(c, a @ a.T, rtol=1e-12, atol=1e-10)
    assert getter() == before


def test_programs_use_the_registered_gemm() -> None:
    x = np.random.default_rng(0).normal(size=(300, 200))
    out = Program("H[b,h] = X[b,d] W[d,h]\n").compile("llvm")(X=x, W=x.T.copy())["H"]
    np.testing.assert_allclose(out, x @ x.T, rtol=1e-12, atol=1e-10)
