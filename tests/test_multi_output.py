"""Multi-result ew.generic (the fused-kernel form): several reductions of one expression in one loop nest."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.utils.exceptions import VerifyException

from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.ew_interp import run_ew_module
from fuse_mlir.interp.loop_interp import run_loop_module
from fuse_mlir.ir import make_context, parse_mlir, print_module
from fuse_mlir.passes.conversions.lower_ew_to_loop import LowerEwToLoop

F64 = np.dtype(np.float64)


def row_stats(kinds: list[str], parallel_rows: bool = True) -> ModuleOp:
    """Y_k[r] = kind_k over c of exp(X[r, c]), all results from one ew.generic."""
    dyn = te.DYNAMIC
    x = te.InputOp("X", ["r", "c"], te.tensor_type(F64, [dyn, dyn]))
    d0, d1 = te.DimOp(x.result, 0), te.DimOp(x.result, 1)
    region, block = ew.GenericOp.make_body([x.result], [])
    e = xmath.ExpOp(block.args[0])
    block.add_ops([e, ew.YieldOp([e.result] * len(kinds))])
    iters = ["parallel", "reduction"] if parallel_rows else ["reduction", "parallel"]
    g = ew.GenericOp(
        [x.result],
        [],
        [d0.result, d1.result],
        [[0, 1]],
        iters,
        kinds,
        region,
        [te.tensor_type(F64, [dyn])] * len(kinds),
    )
    export = te.ExportOp(list(g.outputs), [f"Y{k}" for k in range(len(kinds))])
    return ModuleOp([x, d0, d1, g, export])


def expected(x: np.ndarray, kinds: list[str], axis: int) -> list[np.ndarray]:
    f = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}
    return [f[k](np.exp(x), axis=axis) for k in kinds]


@pytest.mark.parametrize("parallel_rows", [True, False])
def test_two_reductions_one_loop_nest(parallel_rows):
    kinds = ["sum", "max", "min"]
    module = row_stats(kinds, parallel_rows)
    module.verify()
    text = print_module(module)
    assert "kind = [#ew.kind<sum>, #ew.kind<max>, #ew.kind<min>]" in text
    assert print_module(parse_mlir(text, "m.mlir")) == text
    x = np.random.default_rng(0).standard_normal((5, 7))
    axis = 1 if parallel_rows else 0
    want = expected(x, kinds, axis)
    ew_out = run_ew_module(module, {"X": x}, {}).exports
    loop_module = module.clone()
    LowerEwToLoop().apply(make_context(), loop_module)
    loop_module.verify()
    fors = [op for op in loop_module.walk() if op.name == "loop.for"]
    assert len(fors) == (2 if parallel_rows else 3)  # one nest (plus the fill loop in column order)
    loop_out = run_loop_module(loop_module, {"X": x}, {}).exports
    native = NativeKernel(loop_module)([x])
    for k in range(len(kinds)):
        np.testing.assert_allclose(ew_out[f"Y{k}"], want[k], rtol=1e-12)
        np.testing.assert_allclose(loop_out[f"Y{k}"], want[k], rtol=1e-12)
        np.testing.assert_allclose(native[k], want[k], rtol=1e-12)


def test_kinds_must_match_results():
    module = row_stats(["sum", "max"])
    g = next(op for op in module.walk() if isinstance(op, ew.GenericOp))
    g.attributes["kind"] = ArrayAttr([ew.ReductionKindAttr(ew.ReductionKind.SUM)])
    with pytest.raises(VerifyException, match="one per result"):
        module.verify()


def test_yield_count_must_match_results():
    module = row_stats(["sum", "max"])
    g = next(op for op in module.walk() if isinstance(op, ew.GenericOp))
    y = g.body.block.last_op
    y.detach()
    g.body.block.add_op(ew.YieldOp([y.values[0]]))
    with pytest.raises(VerifyException, match="yields 1 values for 2 results"):
        module.verify()
