"""The vectorised exp against NumPy on millions of points, edges included (ulp-level accuracy)."""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir import Program
from fuse_mlir.backends.llvm.executor import lower_to_loop

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 5e-324, 1.0, -1.0]
EDGES64 = [709.78, 709.79, 710.0, -745.13, -745.14, -708.4, -720.0, -1000.0, 1000.0]
EDGES32 = [88.72, 88.73, -87.3, -103.97, -104.0, -110.0, 100.0, -200.0]


def ulps(got: np.ndarray, exact: np.ndarray, dtype) -> np.ndarray:
    """|got - exact| in units of the last place of ``dtype`` at ``exact`` (non-finite and zero handled apart)."""
    spacing = np.spacing(np.abs(exact.astype(dtype))).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exp_accuracy(dtype):
    rng = np.random.default_rng(0)
    hi = 709.0 if dtype == np.float64 else 88.0
    edges = EDGES + (EDGES64 if dtype == np.float64 else EDGES32)
    x = np.concatenate([rng.uniform(-hi - 40, hi, 1_500_000), rng.uniform(-2, 2, 500_000), edges]).astype(dtype)
    got = Program("Y[i] = exp(X[i])").compile("llvm")(X=x)["Y"]
    with np.errstate(all="ignore"):
        ref = np.exp(x)
        exact = np.exp(x.astype(np.float64))  # float32: a float64 exp is exact to far below a float32 ulp
    special = ~np.isfinite(ref)
    np.testing.assert_array_equal(got[special & ~np.isnan(ref)], ref[special & ~np.isnan(ref)])
    assert np.isnan(got[np.isnan(ref)]).all()
    rest = ~special  # normal and subnormal results (an ulp of a subnormal is the smallest subnormal)
    target = exact[rest] if dtype == np.float32 else ref[rest].astype(np.float64)
    err = ulps(got[rest], target, dtype)
    assert err.max() <= 1.0, err.max()


def test_strict_mode_keeps_libm_exp():
    loop = lower_to_loop(Program("Y[i] = exp(X[i])").lower().module, strict=True)
    assert any(op.name == "math.exp" for op in loop.walk())
    loop = lower_to_loop(Program("Y[i] = exp(X[i])").lower().module)
    assert not any(op.name == "math.exp" for op in loop.walk())
