"""The ``monte-carlo`` pass: project sampled indices instead of all of them (sum/mean/max estimates).

This is the rewrite behind ``compile(projection="monte_carlo")``
(docs/modes.md), exposed to ``fuse-opt`` to inspect. Each float sum/mean/max
contraction or reduction k whose projected count is not statically known to
be at most ``samples`` reads its operands through gathers by the run-time
int64 sample tables ``mc{k}:{index}`` and projects the sample index
``mc{k}`` with mean (sum: times the run-time count ``mc{k}:count``) or max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frontend.lower import Lowered
from fuse_mlir.interp.shapes import extents_by_name
from fuse_mlir.modes.monte_carlo import candidates, projected, sample_module
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class MonteCarlo(FusePass):
    """Estimate sum/mean/max projections from ``samples`` uniform samples drawn at run time (tables as inputs).

    Ops whose projected extents are static with a count <= ``samples`` stay
    exact; the runner (``projection="monte_carlo"``) decides that per run
    from the actual extents and fills the tables from its seed.
    """

    name = "monte-carlo"
    level: ClassVar[str] = "tensor_eq"
    example: ClassVar[str | None] = """\
builtin.module {
  %a = te.input "A" {indices = ["i", "j"]} : tensor<?x?xf64>
  %b = te.input "B" {indices = ["j"]} : tensor<?xf64>
  %s = te.contract %a, %b {operand_indices = [["i", "j"], ["j"]], indices = ["i"], projection = "sum"} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?xf64>
  te.export %s {names = ["S"]} : tensor<?xf64>
}
"""

    samples: int = option(64, help="the sample count S (ops with a static projected count <= S stay exact)")

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        if self.samples < 1:
            raise FuseError(f"monte-carlo: samples must be positive (got {self.samples})")
        picked = []
        for k, op in enumerate(candidates(module)):
            each = te.names_of_each(op.attributes["operand_indices"])
            static = extents_by_name([(ns, tuple(v.type.get_shape())) for v, ns in zip(op.operands, each)])  # type: ignore[attr-defined]
            extents = [static.get(p, -1) for p in projected(op)]
            if any(n < 0 for n in extents) or math.prod(extents) > self.samples:
                picked.append(k)
        if not picked:
            return False
        new = sample_module(Lowered(module, [], [], [], {}), picked, self.samples).module
        block = module.body.block
        for op in list(block.ops):
            op.detach()
        for op in list(new.body.block.ops):
            op.detach()
            block.add_op(op)
        return True
