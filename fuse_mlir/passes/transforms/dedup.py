"""``dedup``: common subexpression elimination that sees through kernel bodies and respects buffers.

xDSL's ``cse`` compares attributes and operands but not region contents, so
two identical fused kernels never merge. ``dedup`` keys every op on its
name, attributes (except ``loc`` and ``body_key``), properties, operand
values, result types and, for region ops, the frozen body
(:mod:`fuse_mlir.frozen`) together with the outside values the body reads.
It works at every level, in every block. It never merges:

- ops that allocate or have side effects (``loop.alloc``, checks, exports);
- a value that a kernel overwrites in place (the ``inplace`` attribute):
  two such values must stay two buffers, and merging one with an unwritten
  twin would let the write clobber the twin's readers.

Extents that a ``te.check_dim`` (eq) has proven equal are one value after
the check: later uses of its right-hand side read the left-hand side, so
kernels over ``te.dim X, 0`` and ``te.dim Z, 0`` have identical extents and
can be fused.

Run it before fusion (identical equations become one) and after (fused
kernels that came out equal become one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frozen import canonical_attr, freeze_block, keyed_on_position
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.statistics import count
from fuse_mlir.passes.transforms.schedule import top_level

IGNORED_ATTRS = frozenset({"loc", "body_key"})


def destroyed_values(block: Block) -> set[SSAValue]:
    """Every value some kernel of ``block`` (or of a nested block) overwrites in place."""
    return {op.inputs[k] for op in block.walk() if isinstance(op, ew.GenericOp) for k in op.inplace_list() if k >= 0}


def shallow_key(op: Operation) -> tuple | None:
    """The identity of ``op`` short of its bodies, or None when it must never merge."""
    if keyed_on_position(op) or not op.results:
        return None
    attrs = tuple((k, canonical_attr(v)) for k, v in sorted(op.attributes.items()) if k not in IGNORED_ATTRS)
    props = tuple((k, canonical_attr(v)) for k, v in sorted(op.properties.items()))
    return (op.name, attrs, props, tuple(op.operands), tuple(str(r.type) for r in op.results), len(op.regions))


def body_key(op: Operation) -> tuple:
    """The frozen bodies of ``op`` and the outside values they read (O(1) to compare once built)."""
    out: list[object] = []
    for region in op.regions:
        for block in region.blocks:
            graph, free = freeze_block(block)
            out.append(graph)
            out.extend(free)
    return tuple(out)


def unify_checked_extents(block: Block) -> int:
    """After ``te.check_dim %a, %b`` (eq), uses of ``%b`` in later ops of the block read ``%a``; the count."""
    n = 0
    after: set[Operation] = set()
    for op in reversed(list(block.ops)):
        if isinstance(op, te.CheckDimOp) and op.predicate_name() == "eq" and op.lhs != op.rhs:
            for use in list(op.rhs.uses):
                if top_level(use.operation, block) in after:
                    use.operation.operands[use.index] = op.lhs
                    n += 1
        after.add(op)
    return n


def dedup_block(block: Block, destroyed: set[SSAValue]) -> int:
    """Merge equal ops of ``block`` (and of blocks nested in it) into their first occurrence; the count merged."""
    merged = 0
    seen: dict[tuple, Operation] = {}
    # shallow key -> the first op with it, and once a second op came, every distinct body key -> its first op
    seen_bodies: dict[tuple, tuple[Operation, dict[tuple, Operation] | None]] = {}
    for op in list(block.ops):
        for region in op.regions:
            for inner in region.blocks:
                merged += dedup_block(inner, destroyed)
        if any(r in destroyed for r in op.results):
            continue
        key = shallow_key(op)
        if key is None:
            continue
        if op.regions:  # bodies are frozen only when another op matches all the rest
            entry = seen_bodies.get(key)
            if entry is None:
                seen_bodies[key] = (op, None)
                continue
            earliest, bodies = entry
            if bodies is None:
                bodies = {body_key(earliest): earliest}
                seen_bodies[key] = (earliest, bodies)
            mine = body_key(op)
            first = bodies.get(mine)  # a lookup, not a scan of every earlier body with this shallow key
            if first is None:
                bodies[mine] = op
                continue
        else:
            first = seen.get(key)
            if first is None:
                seen[key] = op
                continue
        for old, new in zip(op.results, first.results):
            old.replace_all_uses_with(new)
        op.detach()
        op.erase()
        merged += 1
    return merged


@register_pass
@dataclass(frozen=True)
class Dedup(FusePass):
    """Merge structurally equal ops, kernels with equal bodies included; never allocations or in-place buffers."""

    name = "dedup"
    level: ClassVar[str] = "any"
    example: ClassVar[str | None] = """\
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  %a = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%v: f64):
    %e = math.exp %v : f64
    ew.yield %e : f64
  }
  %b = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%w: f64):
    %f = math.exp %w : f64
    ew.yield %f : f64
  }
  te.export %a, %b {names = ["A", "B"]} : tensor<?xf64>, tensor<?xf64>
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        block = module.body.block
        # One forward sweep suffices (an op's operands are merged before the op is keyed), and one more
        # when extents proven equal were unified (their users may now be equal).
        merged = dedup_block(block, destroyed_values(block))
        unified = unify_checked_extents(block)
        if unified:
            merged += dedup_block(block, destroyed_values(block))
            count("dedup", "extents-unified", unified)
        count("dedup", "ops-merged", merged)
        return merged > 0
