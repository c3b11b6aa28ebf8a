"""``fuse``: grow multi-output kernels: elementwise chains, sibling kernels, reductions and gathers.

Two moves, repeated until neither applies (both keep every group convex, so
the result is still a valid schedule, and neither duplicates work beyond
cheap broadcast maps):

- **sibling merge**: two ``ew.generic`` kernels with the same extents and
  iterators that read a common input (same value and map) — or, for
  reductions, just iterate over the same space — neither depending on the
  other, become one kernel with the results of both: the sum and the max of
  one value are one loop nest with two accumulators, ``Σ exp(x)·y + Σ z``
  is one pass, and ``sum(exp(x))`` next to ``exp(x) * y`` reads ``x`` once.
- **producer inlining**: a pure map's computation moves into the body of its
  first consumer (a map or a reduction), so the intermediate tensor is never
  built (elementwise chains, elementwise + reduction, ``sum(x[idx])`` without
  ``x[idx]``). When the value also has other users, it stays a *second
  output* of the fused kernel, provided the consumer is a map over the same
  iteration space (a reduction cannot also store a full-size value) and
  every other user comes after it (convexity).

A producer whose consumer visits each of its points several times (a map
over ``i`` read by a kernel over ``i, j``) is inlined only when its body is
cheap, since it would be recomputed per ``j``. Every decision asks the
target (``fuse_mlir.targets``): maps need ``fuse``, reductions
``fuse_reductions``, gathers ``fuse_gathers``; a kernel's inputs plus tables
never exceed ``max-operands``. Targets with none of these (torch, jax) leave
the module unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.statistics import count
from fuse_mlir.passes.transforms.kernel_merge import inline_producer, merge_siblings
from fuse_mlir.passes.transforms.schedule import Schedule, kernel_blocks, reads
from fuse_mlir.targets import Target, get_target

CHEAP_BODY_OPS = 4
"""A broadcast producer is recomputed per extra point only if its body has at most this many ops, none of
them ``math.*`` (transcendentals)."""


def _has_gather(kernel: ew.GenericOp) -> bool:
    return any(isinstance(o, ew.ExtractOp) for o in kernel.body.block.ops)


def _has_checks(kernel: ew.GenericOp) -> bool:
    """Whether the body checks values at run time (a checked gather or numeric position, an ``ew.assert``)."""
    return any(
        isinstance(o, ew.AssertOp) or (isinstance(o, ew.ExtractOp) and o.check is not None)
        for o in kernel.body.block.ops
    )


def _is_cheap(kernel: ew.GenericOp) -> bool:
    ops = [o for o in kernel.body.block.ops if not isinstance(o, ew.YieldOp)]
    return len(ops) <= CHEAP_BODY_OPS and not any(o.name.startswith("math.") for o in ops)


def _has_reduction(kernel: ew.GenericOp) -> bool:
    return "reduction" in kernel.iterator_list()


def _allowed(target: Target, kernels: Iterable[ew.GenericOp]) -> bool:
    """Whether the target lets these kernels share one loop nest."""
    ks = list(kernels)
    if any(_has_reduction(k) for k in ks) and not target.fuse_reductions:
        return False
    if any(_has_gather(k) for k in ks) and not target.fuse_gathers:
        return False
    return target.fuse or all(_has_reduction(k) or _has_gather(k) for k in ks)


class _Fuser(Schedule):
    """One run of the pass over one block."""

    def __init__(self, block: Block, target: Target, max_operands: int):
        super().__init__(block)
        self.target = target
        self.max_operands = max_operands
        self.refused: set[tuple[Operation, Operation]] = set()  # sibling pairs found unmergeable (greedy: not retried)

    def width(self, kernel: ew.GenericOp) -> int:
        return len(kernel.inputs) + len(kernel.tables)

    def replace(
        self, old: Sequence[tuple[SSAValue, SSAValue]], new: ew.GenericOp, at: Operation, dead: list[Operation]
    ):
        self.block.insert_op_before(new, at)
        for a, b in old:
            a.replace_all_uses_with(b)
        for op in dead:
            op.detach()
            op.erase()
        self.index()

    # -- sibling merge ------------------------------------------------------------

    def try_siblings(self, reductions_only: bool) -> bool:
        for b in list(self.block.ops):
            if not isinstance(b, ew.GenericOp) or (reductions_only and not _has_reduction(b)):
                continue
            candidates: list[ew.GenericOp] = []
            # Siblings read a common input, or (reductions) iterate over the same extents.
            for v in [*b.inputs, *b.tables, *(b.extents if _has_reduction(b) else ())]:
                for use in v.uses:
                    a = use.operation
                    if isinstance(a, ew.GenericOp) and a is not b and a.parent_block() is self.block:
                        if self.pos[a] < self.pos[b] and a not in candidates:
                            candidates.append(a)
            for a in sorted(candidates, key=self.pos.__getitem__):
                if (a, b) in self.refused:
                    continue
                if self.merge(a, b):
                    return True
                self.refused.add((a, b))
        return False

    def merge(self, a: ew.GenericOp, b: ew.GenericOp) -> bool:
        if list(a.extents) != list(b.extents) or a.iterator_list() != b.iterator_list():
            return False
        shared = {(v, m) for v, m in zip(a.inputs, a.map_list())} & {(v, m) for v, m in zip(b.inputs, b.map_list())}
        if not shared and not set(a.tables) & set(b.tables) and not _has_reduction(a):
            return False  # maps with nothing in common gain nothing; reductions still share one pass
        if not _allowed(self.target, (a, b)):
            return False
        if self.width(a) + self.width(b) - len(shared) > self.max_operands:
            return False
        pa, pb = self.pos[a], self.pos[b]
        if all(p > pb for r in a.outputs for p in self.user_positions(r)):
            at: Operation = b
        elif all(self.owner_position(v) < pa for v in reads(b)):
            at = a
        else:
            return False
        if self.depends(b, a):
            return False
        merged = merge_siblings(a, b)
        pairs = list(zip([*a.outputs, *b.outputs], merged.outputs))
        self.replace(pairs, merged, at, [a, b])
        count("fuse", "siblings-merged")
        return True

    # -- producer inlining --------------------------------------------------------

    def try_inline(self, allow_keep: bool) -> bool:
        for p in list(self.block.ops):
            if isinstance(p, ew.GenericOp) and not _has_reduction(p) and self.inline(p, allow_keep):
                return True
        return False

    def inline(self, p: ew.GenericOp, allow_keep: bool) -> bool:
        consumers = [
            u.operation
            for r in p.outputs
            for u in r.uses
            if isinstance(u.operation, ew.GenericOp) and u.operation.parent_block() is self.block
        ]
        if not consumers:
            return False
        c = min(consumers, key=self.pos.__getitem__)
        slots: dict[int, int] = {}
        for k, r in enumerate(p.outputs):
            for use in r.uses:
                if use.operation is not c:
                    continue
                if use.index >= len(c.inputs):
                    return False  # read as a table (gathered) or as an extent: not elementwise
                slots[use.index] = k
        c_maps = c.map_list()
        into = c_maps[next(iter(slots))]
        if any(c_maps[s] != into for s in slots):
            return False
        keep = [k for k, r in enumerate(p.outputs) if any(u.operation is not c for u in r.uses)]
        if keep:
            if not allow_keep or _has_reduction(c) or into != tuple(range(len(c.extents))) or not self.target.fuse:
                return False
            if not all(q > self.pos[c] for k in keep for q in self.user_positions(p.outputs[k], besides=c)):
                return False
        if len(into) < len(c.extents) and not _is_cheap(p):
            return False  # each producer point would be recomputed for every extra consumer dim
        if len(into) < len(c.extents) and _has_checks(p):
            # Under the consumer's extra dims the checks would run only where those are non-empty: an
            # out-of-range index must be an error whatever the consumer's loop space (as on the reference).
            return False
        if not _allowed(self.target, (p, c)):
            return False
        if self.width(p) + self.width(c) - len(slots) > self.max_operands:
            return False
        fused = inline_producer(p, c, slots, keep)
        nc = len(c.outputs)
        pairs = list(zip(c.outputs, fused.outputs[:nc])) + [
            (p.outputs[k], fused.outputs[nc + i]) for i, k in enumerate(keep)
        ]
        self.replace(pairs, fused, c, [c, p])
        count("fuse", "producers-inlined")
        if keep:
            count("fuse", "outputs-kept")
        return True

    def run(self) -> bool:
        changed = False
        # Cheapest-to-lose first: merging reductions gives their common input one consumer, which inlining
        # then removes; map siblings and second outputs come last, so they never block a reduction's fusion.
        while (
            self.try_siblings(reductions_only=True)
            or self.try_inline(allow_keep=False)
            or self.try_siblings(reductions_only=False)
            or self.try_inline(allow_keep=True)
        ):
            changed = True
        return changed


@register_pass
@dataclass(frozen=True)
class Fuse(FusePass):
    """Fuse elemwise kernels into multi-output loop nests: chains, siblings, reductions, gathers (target-aware)."""

    name = "fuse"
    level: ClassVar[str] = "elemwise"

    target: str = option("llvm", help="the target whose capabilities decide what may fuse (fuse_mlir.targets)")
    max_operands: int = option(32, help="the most inputs plus tables one fused kernel may read")

    example: ClassVar[str | None] = """\
builtin.module {
  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %n = te.dim %x, 0 : i64 : tensor<?xf64>
  %e = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]} -> tensor<?xf64> {
  ^bb0(%a: f64):
    %y = math.exp %a : f64
    ew.yield %y : f64
  }
  %s = ew.generic ins(%e : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<reduction>], kind = [#ew.kind<sum>]} -> tensor<f64> {
  ^bb0(%b: f64):
    ew.yield %b : f64
  }
  %m = ew.generic ins(%e : tensor<?xf64>) tables(:) extents(%n) attributes {maps = [[0]], iterators = [#ew.iterator<reduction>], kind = [#ew.kind<max>]} -> tensor<f64> {
  ^bb0(%c: f64):
    ew.yield %c : f64
  }
  te.export %s, %m {names = ["S", "M"]} : tensor<f64>, tensor<f64>
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        target = get_target(self.target)
        if not (target.fuse or target.fuse_reductions or target.fuse_gathers):
            return False
        changed = False
        for block in kernel_blocks(module):
            changed |= _Fuser(block, target, self.max_operands).run()
        return changed
