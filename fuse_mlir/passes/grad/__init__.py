"""``grad``: reverse-mode automatic differentiation of a tensor_eq module (docs/autodiff.md).

``fuse-opt prog.fuse -p 'grad{of=L wrt=W1,B1}'`` turns a module computing the
float scalar ``L`` into one exporting ``L`` and ``dL_dW1``, ``dL_dB1``: the
gradients, each with the shape and dtype of its tensor. The backward ops are
ordinary tensor_eq ops (the adjoint rules are in :mod:`.rules` and
:mod:`.blocks`, the sweep in :mod:`.transform`), so the pipeline that follows
fuses and compiles them like any program.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.grad.transform import differentiate, grad_name
from fuse_mlir.passes.registry import register_pass

__all__ = ["Grad", "differentiate", "grad_name"]


@register_pass
@dataclass(frozen=True)
class Grad(FusePass):
    """Reverse-mode gradient of the scalar ``of`` with respect to the ``wrt`` tensors (exports ``d<of>_d<name>``)."""

    name = "grad"
    level: ClassVar[str] = "tensor_eq"

    of: str = option("L", help="the float scalar tensor to differentiate")
    wrt: tuple[str, ...] = option((), help="the float tensors (inputs, sources or equations) to differentiate by")

    example: ClassVar[str | None] = """\
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %s = te.contract %x, %x {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  %l = te.group "L" %s {indices = [], boolean = false} : (tensor<f64>) -> tensor<f64>
  te.export %l {names = ["L"]} : tensor<f64>
}
"""
    example_pipeline: ClassVar[str | None] = "grad{of=L wrt=X}"

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        differentiate(module, self.of, self.wrt)
        return True
