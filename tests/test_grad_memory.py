"""What a gradient program keeps: structure of the lowered kernels, not timings (docs/autodiff.md, Memory).

The rule: contractions (GEMMs) and reductions are stored; elementwise maps are not: a map's value is
recomputed inside every kernel that reads it (fusion), and an activation's derivative is taken from its
output where it can be (relu's mask from ``y > 0``, ``1 - y^2`` for tanh, ``y (1 - y)`` for sig, ``y`` for
exp), so the pre-activation is not kept beside the activation. Forward values the backward does not read
are removed.
"""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.lowering import lower_to_loop
from fuse_mlir.program import Program
from fuse_mlir.testing.gradcheck import check_grad

MLP = """
H[b,h] = {act}
Z[b,c] = H[b,h] W2[h,c] + B2[c]
L = avg(logsumexp(Z[b,c]) - reduce(sum, c) Y[b,c] Z[b,c])
"""
WRT = ["W1", "B1", "W2", "B2"]


def matrix_buffers(src: str, wrt: list[str]) -> tuple[int, int]:
    """(rank-2 buffers the lowered gradient program allocates, how many of them are GEMM results)."""
    module = lower_to_loop(Program(src).grad("L", wrt).lower().module)
    gemm_out = {op.operands[2] for op in module.walk() if isinstance(op, loop.GemmOp)}
    allocs = [op for op in module.walk() if isinstance(op, loop.AllocOp) and len(op.operands) == 2]
    return len(allocs), sum(op.results[0] in gemm_out for op in allocs)


@pytest.mark.parametrize(
    ("act", "buffers"),
    [
        ("relu(X[b,d] W1[d,h] + B1[h])", 5),
        ("tanh(X[b,d] W1[d,h] + B1[h])", 5),
        ("sig(X[b,d] W1[d,h] + B1[h], 1.5)", 5),
        ("exp(X[b,d] W1[d,h] + B1[h])", 5),
        # gelu' needs its input: X W1 stays (a GEMM result) and H, the next GEMM's operand, is stored beside it.
        ("gelu(X[b,d] W1[d,h] + B1[h])", 6),
    ],
)
def test_mlp_gradient_stores_gemm_results_only(act: str, buffers: int) -> None:
    """Two forward GEMMs (X W1, H W2) and three backward ones (dH = dZ W2^T, dW2 = H^T dZ, dW1 = X^T dH'):
    the matrix-sized buffers are those five results (the activation written over X W1 in place), plus H for
    gelu. The bias add, the activation's derivative and the loss's softmax pieces live inside kernels; no
    transposed copy is made for a GEMM."""
    total, from_gemm = matrix_buffers(MLP.format(act=act), WRT)
    assert (total, from_gemm) == (buffers, 5)


def test_relu_mask_is_read_from_the_activation() -> None:
    """relu's mask is ``H > 0`` (the output the forward keeps), never the pre-activation ``X W1 + B1``."""
    module = Program(MLP.format(act="relu(X[b,d] W1[d,h] + B1[h])")).grad("L", WRT).lower().module
    masks = [op for op in module.walk() if isinstance(op, te.MapOp) and op.fn.data == "gt"]
    assert masks
    for op in masks:
        owner = op.operands[0].owner
        assert isinstance(owner, te.MapOp) and owner.fn.data == "relu"


def test_values_the_backward_does_not_read_are_not_kept() -> None:
    """An equation off the path from W to L, and one on the forward path whose value only ``of`` reads,
    leave no op behind that nothing reads."""
    src = "Unused[i] = exp(X[i]) X[i]\nH[i] = tanh(X[i] W[i])\nL = H[i] H[i]\n"
    module = Program(src).grad("L", ["W"]).lower().module
    groups = {op.tensor_name.data for op in module.walk() if isinstance(op, te.GroupOp)}
    assert "Unused" not in groups
    for op in module.body.block.ops:
        if op.results and not isinstance(op, te.InputOp | te.SourceOp):
            assert any(r.uses for r in op.results), op.name
    x, w = np.linspace(-1, 1, 5), np.linspace(0.5, 1.5, 5)
    check_grad(src, "L", ["W"], {"X": x, "W": w}, backend="llvm")
