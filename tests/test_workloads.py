"""The benchmark workloads compute what their NumPy formulas say (small sizes, every backend available)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.workloads import WORKLOADS
from fuse_mlir import Program


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workload_matches_numpy(w, dtype):
    inputs = w.inputs(np.random.default_rng(0), np.dtype(dtype), True)
    got = Program(w.source).compile("reference")(**inputs)[w.output]
    want = w.numpy(**inputs)
    tol = 1e-10 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert got.dtype == dtype
