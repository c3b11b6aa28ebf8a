"""The ``demand`` pass: keep only what one tensor needs, and push axis selections into its producers.

This is the rewrite behind ``runner.query`` (docs/modes.md, demand), exposed
to ``fuse-opt`` to inspect: the module becomes the backward slice of
``tensor``'s definition, exporting only it; each axis listed in ``select``
is restricted by a run-time int64 input ``select:k`` (``axis=int``: a 0-d
position, the axis goes; ``axis=slice``: a vector of positions), pushed
through maps, contractions over other indices, group sums and plain reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.modes.demand import defining_value, own_names, query_module
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class Demand(FusePass):
    """Prune the module to what ``tensor`` depends on and push the ``select``ed axes of it into its producers.

    ``select`` lists ``axis=int`` or ``axis=slice`` (axis: an index name of
    the tensor), comma-separated; each becomes a run-time gather input
    ``select:k``. Ops where the axis is not parallel (a softmax along it,
    concat, blocks, offsets, ...) run whole and their result is gathered.
    """

    name = "demand"
    level: ClassVar[str] = "tensor_eq"
    example: ClassVar[str | None] = """\
builtin.module {
  %w = te.input "W" {indices = ["i", "j"]} : tensor<?x?xf64>
  %x = te.input "X" {indices = ["j"]} : tensor<?xf64>
  %v = te.input "V" {indices = ["k"]} : tensor<?xf64>
  %y = te.contract %w, %x {operand_indices = [["i", "j"], ["j"]], indices = ["i"], projection = "sum"} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?xf64>
  %r = te.map "relu" %y {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  %g = te.group "Y" %r {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %z = te.map "exp" %v {operand_indices = [["k"]], indices = ["k"]} : (tensor<?xf64>) -> tensor<?xf64>
  %h = te.group "Z" %z {indices = ["k"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  te.export %g, %h {names = ["Y", "Z"]} : tensor<?xf64>, tensor<?xf64>
}
"""
    example_pipeline: ClassVar[str | None] = 'demand{tensor=Y select="i=int"}'

    tensor: str = option("", help="the tensor to compute (a group, input or source name)")
    select: str = option("", help="comma-separated axis=int|slice selections of the tensor's axes")

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        root = defining_value(module, self.tensor)
        if root is None:
            raise FuseError(f"demand: the module defines no tensor '{self.tensor}'")
        names = own_names(root)
        axes: list[tuple[int, bool]] = []
        for part in filter(None, (p.strip() for p in self.select.split(","))):
            axis, _, kind = part.partition("=")
            if axis not in names or kind not in ("int", "slice"):
                raise FuseError(
                    f"demand: bad selection '{part}': expected axis=int or axis=slice with axis one of "
                    f"{', '.join(names) or '(none: the tensor is 0-d)'}"
                )
            if any(names[p] == axis for p, _ in axes):
                raise FuseError(f"demand: axis {axis} is selected twice")
            axes.append((names.index(axis), kind == "int"))
        new, _ = query_module(module, self.tensor, axes)
        block = module.body.block
        for op in list(block.ops):
            op.detach()
        for op in list(new.body.block.ops):
            op.detach()
            block.add_op(op)
        for op in reversed(list(new.body.block.ops)):
            op.erase()
        return True
