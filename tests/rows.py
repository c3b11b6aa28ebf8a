"""Helpers of the row-kernel tests (``fuse-rows``, ``pipeline-rows``): comparing results, reading loop nests."""

from __future__ import annotations

import numpy as np

from fuse_mlir import Program
from fuse_mlir.dialects import loop
from fuse_mlir.ir import parse_mlir
from fuse_mlir.passes.lowering import lower_to_loop


def same_results(got: dict, ref: dict, rtol: float) -> None:
    """The same outputs, in the same order, dtypes and shapes, with values within ``rtol`` (and as much atol)."""
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape, k
        np.testing.assert_allclose(got[k], ref[k], rtol=rtol, atol=rtol, err_msg=k)


def top_level_loops(src: str, pipeline: str | None = None) -> list[loop.ForOp]:
    """The top-level loop nests of ``src`` (float64 ``X``) lowered to the loop level by ``pipeline``."""
    te = parse_mlir(Program(src).to_mlir({"X": "float64"}))
    module = lower_to_loop(te, pipeline=pipeline)
    func = next(iter(module.body.block.ops))
    return [op for op in func.regions[0].block.ops if isinstance(op, loop.ForOp)]


def row_matrix(rows: int, cols: int, special: bool, dtype: type) -> np.ndarray:
    """A standard-normal ``rows`` x ``cols`` matrix (seeded by its shape); ``special``: a NaN at [0, 0], +inf at
    [1, -1], row 2 all -inf and row 5 all +inf, where the matrix has them (what the row kernels must get right)."""
    x = np.random.default_rng(rows * 31 + cols).standard_normal((rows, cols)).astype(dtype)
    if special and x.size:
        x[0, 0] = np.nan
        if rows > 1:
            x[1, -1] = np.inf
        if rows > 2:
            x[2, :] = -np.inf
        if rows > 5:
            x[5, :] = np.inf
    return x
