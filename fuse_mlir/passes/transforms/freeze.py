"""``freeze``: give every kernel body its interned frozen form and stamp its structural key.

Each single-block region (an ``ew.generic`` body, a te region op) is frozen
(:mod:`fuse_mlir.frozen`): equal pure scalar ops merge, the body is rebuilt
from the frozen graph in a canonical order, and the op gets a ``body_key``
attribute holding the graph's sha256. Two kernels whose bodies differ only in
SSA names or the order of independent ops then print identical keys, and
``dedup`` can merge them. The pass is idempotent: freezing a frozen body gives
the same graph object and key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation

from fuse_mlir.frozen import freeze_block, thaw
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.statistics import count

BODY_KEY = "body_key"


def freeze_kernel(op: Operation) -> bool:
    """Replace ``op``'s body by its canonical frozen form and stamp ``body_key``; True if the body changed."""
    block = op.regions[0].block
    graph, free = freeze_block(block)
    before = len(block.ops)
    new = thaw(graph, free)
    changed = len(new.ops) != before
    region = op.regions[0]
    region.detach_block(block)
    block.erase(safe_erase=False)
    region.add_block(new)
    key = StringAttr(graph.hexdigest)
    if op.attributes.get(BODY_KEY) != key:
        op.attributes[BODY_KEY] = key
        changed = True
    count("freeze", "body-ops-merged", before - len(new.ops))
    return changed


def kernels(module: ModuleOp) -> list[Operation]:
    """Ops with one single-block region, innermost first (a nested body is frozen before its parent)."""
    out = [op for op in module.walk() if len(op.regions) == 1 and len(op.regions[0].blocks) == 1]
    return list(reversed(out))


@register_pass
@dataclass(frozen=True)
class Freeze(FusePass):
    """Intern every kernel body (merging equal pure scalar ops) and stamp its sha256 as ``body_key``.

    Bodies equal up to SSA names and the order of independent ops get equal
    keys; side-effecting or in-place ops inside a body keep their order and
    never merge.
    """

    name = "freeze"
    level: ClassVar[str] = "elemwise"
    example: ClassVar[str | None] = """\
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  %y = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%a: f64):
    %e1 = math.exp %a : f64
    %e2 = math.exp %a : f64
    %p = arith.mulf %e1, %e2 : f64
    ew.yield %p : f64
  }
  te.export %y {names = ["Y"]} : tensor<?xf64>
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        changed = False
        for op in kernels(module):
            if op.parent is None or op is module:
                continue
            changed |= freeze_kernel(op)
        return changed
