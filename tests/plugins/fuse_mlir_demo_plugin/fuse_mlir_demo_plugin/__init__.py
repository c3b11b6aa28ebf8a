"""A fuse_mlir plug-in: importing it registers the passes ``demo-count-ops`` and ``demo-break-ir``.

fuse_mlir finds it through this package's entry point in the
``fuse_mlir.passes`` group (see pyproject.toml), so ``fuse-opt --list-passes``
shows the passes and ``-p demo-count-ops`` runs one once the package is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64

from fuse_mlir.diagnostics import remark
from fuse_mlir.passes import AnalysisManager, FusePass, option, register_pass


def count_ops(module: ModuleOp) -> int:
    """The analysis: how many ops the module holds (the module itself not counted)."""
    return sum(1 for op in module.walk() if op is not module)


@register_pass
@dataclass(frozen=True)
class CountOps(FusePass):
    """Count the ops of the module and record the count as a module attribute.

    A demonstration plug-in pass: it changes nothing but the attribute.
    """

    name = "demo-count-ops"
    level: ClassVar[str] = "any"

    attr_name: str = option("demo.op_count", help="the module attribute that receives the count")
    report: bool = option(False, help="also emit the count as a remark")

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        count = analyses.get(count_ops)
        module.attributes[self.attr_name] = IntegerAttr(count, i64)
        if self.report:
            remark(f"demo-count-ops: {count} ops")
        analyses.preserve(count_ops)  # the attribute is no op: the count stays right
        return True


@register_pass
@dataclass(frozen=True)
class BreakIR(FusePass):
    """Deliberately make the module invalid (an extra index name on the first te.input).

    For testing ``--verify-each``: the verifier must name this pass.
    """

    name = "demo-break-ir"

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        for op in module.walk():
            if op.name == "te.input":
                names = [*op.attributes["indices"].data, StringAttr("extra")]
                op.attributes["indices"] = ArrayAttr(names)
                return True
        return False
