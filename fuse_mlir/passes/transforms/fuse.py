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

import heapq
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
from fuse_mlir.passes.transforms.schedule import Schedule, kernel_blocks, reads, top_level
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
    ops = [o for _, o in zip(range(CHEAP_BODY_OPS + 2), kernel.body.block.ops) if not isinstance(o, ew.YieldOp)]
    return len(ops) <= CHEAP_BODY_OPS and not any(o.name.startswith("math.") for o in ops)


def _has_reduction(kernel: ew.GenericOp) -> bool:
    return "reduction" in kernel.iterator_list()


class _Fuser(Schedule):
    """One run of the pass over one block.

    The moves are tried in a fixed greedy order (see :meth:`run`), each phase
    scanning the block in program order and the first move that applies
    winning. Rescanning the whole block after every move made the pass
    quadratic (cubic with the sibling candidate lists), so each phase keeps a
    worklist instead: a heap, by position, of the kernels whose move might
    now apply. A kernel leaves it when its move is refused, and comes back
    only when a move changes something its decision reads (:meth:`_touched`),
    so every decision is the one a full rescan would make, at the cost of
    the kernels near each move. Positions are stable integers: a fused kernel
    takes the position of the kernel it replaces, so nothing is renumbered.
    """

    PHASES = ("siblings-reductions", "inline", "siblings", "inline-keep")

    def __init__(self, block: Block, target: Target, max_operands: int):
        super().__init__(block)
        self.target = target
        self.max_operands = max_operands
        self.refused: set[tuple[Operation, Operation]] = set()  # sibling pairs found unmergeable (greedy: not retried)
        self._reduction: dict[Operation, bool] = {}
        self._sigs: dict[Operation, tuple] = {}
        self._by_sig: dict[tuple, set[ew.GenericOp]] = {}
        kernels = [op for op in block.ops if isinstance(op, ew.GenericOp)]
        self._heaps: list[list[tuple[int, int, ew.GenericOp]]] = [[] for _ in self.PHASES]
        self._pending: list[set[ew.GenericOp]] = [set() for _ in self.PHASES]
        self._seq = 0
        self._fact_cache: dict[Operation, tuple[int, bool, bool, frozenset, frozenset]] = {}
        self._first_user: dict[Operation, float] = {}  # invalidated by _touched
        # What a kernel's body reads from outside, and whether it gathers: walked once per kernel of the block;
        # a fused kernel's are its parts' (walking each new body made fusing a chain of n kernels O(n^2)).
        self._body_reads: dict[Operation, list[SSAValue]] = {}
        self._gathers: dict[Operation, bool] = {}
        self._refused_siblings: set[Operation] = set()  # live kernels phase 2 refused and nothing re-queued
        self._last_read: dict[Operation, int] = {}  # invalidated by _touched
        for k in kernels:
            self._by_sig.setdefault(self.sig(k), set()).add(k)
            self._push(k, range(len(self.PHASES)))

    def reads_of(self, op: Operation) -> list[SSAValue]:
        if not isinstance(op, ew.GenericOp):
            return reads(op)
        inner = self._body_reads.get(op)
        if inner is None:
            inner = self._body_reads[op] = reads(op)[len(op.operands) :]
        return [*op.operands, *inner]

    def has_gather(self, kernel: ew.GenericOp) -> bool:
        hit = self._gathers.get(kernel)
        if hit is None:
            hit = self._gathers[kernel] = _has_gather(kernel)
        return hit

    def _joined(self, parts: Sequence[ew.GenericOp]) -> tuple[list[SSAValue] | None, bool]:
        """The body reads and gather flag of a kernel fused from ``parts``, read before their bodies move (None
        for the reads if a body reads a part's result: the fused body is walked when asked)."""
        dead = {r for k in parts for r in k.outputs}
        inner: dict[SSAValue, None] = {}
        for k in parts:
            inner.update(dict.fromkeys(self.reads_of(k)[len(k.operands) :]))
        return (None if dead.intersection(inner) else list(inner)), any(self.has_gather(k) for k in parts)

    def _inherit(self, new: ew.GenericOp, joined: tuple[list[SSAValue] | None, bool]) -> None:
        """Record for ``new`` what :meth:`_joined` read from its parts."""
        body_reads, self._gathers[new] = joined
        if body_reads is not None:
            self._body_reads[new] = body_reads

    def width(self, kernel: ew.GenericOp) -> int:
        return self._facts(kernel)[0]

    def _facts(self, kernel: ew.GenericOp) -> tuple[int, bool, bool, frozenset, frozenset]:
        """Width, has a gather, has a reduction, (input, map) pairs, tables (dropped when its operands change)."""
        hit = self._fact_cache.get(kernel)
        if hit is None:
            pairs = frozenset(zip(kernel.inputs, kernel.map_list()))
            tables = frozenset(kernel.tables)
            hit = (
                len(kernel.inputs) + len(kernel.tables),
                self.has_gather(kernel),
                self.is_reduction(kernel),
                pairs,
                tables,
            )
            self._fact_cache[kernel] = hit
        return hit

    def _allowed(self, a: ew.GenericOp, b: ew.GenericOp) -> bool:
        """Whether the target lets ``a`` and ``b`` share one loop nest (reductions and gathers need their own
        capabilities; a target without plain fusion fuses only those), from their cached facts."""
        fa, fb = self._facts(a), self._facts(b)
        if (fa[2] or fb[2]) and not self.target.fuse_reductions:
            return False
        if (fa[1] or fb[1]) and not self.target.fuse_gathers:
            return False
        return self.target.fuse or all(f[2] or f[1] for f in (fa, fb))

    def first_user(self, kernel: ew.GenericOp) -> float:
        """The lowest position of an op using a result of ``kernel`` (inf if none); cached until a move touches it."""
        hit = self._first_user.get(kernel)
        if hit is None:
            hit = self._first_user[kernel] = min(
                (p for r in kernel.outputs for p in self.user_positions(r)), default=float("inf")
            )
        return hit

    def last_read(self, kernel: ew.GenericOp) -> int:
        """The highest position of an op defining a value ``kernel`` reads (-1 if none); cached likewise."""
        hit = self._last_read.get(kernel)
        if hit is None:
            hit = self._last_read[kernel] = max((self.owner_position(v) for v in self.reads_of(kernel)), default=-1)
        return hit

    def is_reduction(self, kernel: ew.GenericOp) -> bool:
        hit = self._reduction.get(kernel)
        if hit is None:
            hit = self._reduction[kernel] = _has_reduction(kernel)
        return hit

    def sig(self, kernel: ew.GenericOp) -> tuple:
        """Extents and iterators: sibling kernels must agree on both (immutable for a kernel's lifetime)."""
        hit = self._sigs.get(kernel)
        if hit is None:
            hit = self._sigs[kernel] = (tuple(kernel.extents), tuple(kernel.iterator_list()))
        return hit

    # -- worklists ----------------------------------------------------------------

    def _push(self, kernel: ew.GenericOp, phases: Iterable[int]) -> None:
        for ph in phases:
            if ph == 2:
                self._refused_siblings.discard(kernel)
            if kernel not in self._pending[ph]:
                self._pending[ph].add(kernel)
                self._seq += 1
                heapq.heappush(self._heaps[ph], (self.pos[kernel], self._seq, kernel))

    def _next(self, ph: int) -> ew.GenericOp | None:
        """The pending kernel of phase ``ph`` with the lowest position (still pending, still in the block)."""
        heap, pending = self._heaps[ph], self._pending[ph]
        while heap:
            kernel = heap[0][2]
            if kernel in pending and kernel in self.pos:
                return kernel
            heapq.heappop(heap)
        return None

    def _done(self, ph: int, kernel: ew.GenericOp) -> None:
        """``kernel``'s move in phase ``ph`` was refused: it waits until a move touches it."""
        self._pending[ph].discard(kernel)
        if ph == 2:
            self._refused_siblings.add(kernel)

    def _touched(self, new: ew.GenericOp) -> None:
        """Put back on the worklists what a move that made ``new`` may have changed.

        Inlining decisions of a producer read its results' users and their
        positions: those change for ``new`` and for the producers of what
        ``new`` reads. Sibling candidates of a kernel are the earlier kernels
        that share one of its inputs or tables (or, for a reduction, just its
        extents): only pairs with ``new`` are new, every other pair keeps its
        refusal (refusals are final).
        """
        self._by_sig.setdefault(self.sig(new), set()).add(new)
        self._push(new, range(len(self.PHASES)))
        for v in self.reads_of(new):
            owner = v.owner
            top = top_level(owner, self.block) if isinstance(owner, Operation) else None
            if isinstance(top, ew.GenericOp) and top is not new:
                self._push(top, (1, 3))
                self._first_user.pop(top, None)  # its users changed
        for r in new.outputs:
            for use in r.uses:  # they read new's results now, instead of the replaced kernels'
                user = top_level(use.operation, self.block)
                self._last_read.pop(user, None)  # type: ignore[arg-type]
                self._fact_cache.pop(user, None)  # type: ignore[arg-type]
                if use.operation is not user:  # read inside its body: the cached body reads name the old value
                    self._body_reads.pop(user, None)  # type: ignore[arg-type]
        sig, here = self.sig(new), self.pos[new]
        if self.is_reduction(new):
            later = [k for k in self._by_sig[sig] if k in self.pos and self.pos[k] > here]
            for k in later:
                self._push(k, (0, 2))
        elif self._refused_siblings:
            # A map's siblings are maps (same iterators), which phase 0 refuses at once, so only phase 2 can
            # change its answer, and only for a kernel it refused: while it has refused none (all of a long
            # chain's inlining), no scan. Scanning every user of a shared input after every move made fusing
            # a chain of n kernels that all read X O(n^2).
            for v in [*new.inputs, *new.tables]:
                for u in v.uses:
                    k = u.operation
                    if k in self._refused_siblings and self.pos[k] > here and self.sig(k) == sig:  # type: ignore[arg-type]
                        self._push(k, (2,))  # type: ignore[arg-type]

    def replace(
        self, old: Sequence[tuple[SSAValue, SSAValue]], new: ew.GenericOp, at: Operation, dead: list[Operation]
    ):
        self.block.insert_op_before(new, at)
        for a, b in old:
            a.replace_all_uses_with(b)
        here = self.pos[at]
        for op in dead:
            op.detach()
            op.erase()
            del self.pos[op]
            self._refused_siblings.discard(op)
            self._by_sig.get(self._sigs.get(op, ()), set()).discard(op)
        self.pos[new] = here  # the slot of the kernel it replaces: every other position stays valid
        self._touched(new)

    # -- sibling merge ------------------------------------------------------------

    def try_siblings(self, b: ew.GenericOp) -> bool:
        """Merge ``b`` into the first earlier sibling that allows it; refuse (for good) each that does not."""
        reduction = self.is_reduction(b)
        sig, pb = self.sig(b), self.pos[b]
        candidates: dict[ew.GenericOp, None] = {}
        if reduction:  # every earlier kernel over the same extents (they all read them) with b's iterators
            candidates = dict.fromkeys(k for k in self._by_sig[sig] if k in self.pos and self.pos[k] < pb)
        else:  # siblings read a common input or table
            for v in [*b.inputs, *b.tables]:
                for use in v.uses:
                    a = use.operation
                    if isinstance(a, ew.GenericOp) and a is not b and a in self.pos and self.pos[a] < pb:
                        if self.sig(a) == sig:  # else merge() refuses at once: extents or iterators differ
                            candidates[a] = None
        for a in sorted(candidates, key=self.pos.__getitem__):
            if (a, b) in self.refused:
                continue
            if self.merge(a, b):
                return True
            self.refused.add((a, b))
        return False

    def merge(self, a: ew.GenericOp, b: ew.GenericOp) -> bool:
        # Pure checks, cheapest first (the order changes no outcome): the placement, then what is shared.
        if self.sig(a) != self.sig(b):
            return False
        pa, pb = self.pos[a], self.pos[b]
        if self.first_user(a) > pb:  # every user of a comes after b: the merged kernel goes at b
            at: Operation = b
        elif self.last_read(b) < pa:  # everything b reads is ready before a: it goes at a
            at = a
        else:
            return False
        fa, fb = self._facts(a), self._facts(b)
        shared = fa[3] & fb[3]
        if not shared and not fa[4] & fb[4] and not fa[2]:
            return False  # maps with nothing in common gain nothing; reductions still share one pass
        if not self._allowed(a, b):
            return False
        if fa[0] + fb[0] - len(shared) > self.max_operands:
            return False
        if self.depends(b, a):
            return False
        joined = self._joined((a, b))
        merged = merge_siblings(a, b)
        self._inherit(merged, joined)
        pairs = list(zip([*a.outputs, *b.outputs], merged.outputs))
        self.replace(pairs, merged, at, [a, b])
        count("fuse", "siblings-merged")
        return True

    # -- producer inlining --------------------------------------------------------

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
            if not allow_keep or self.is_reduction(c) or into != tuple(range(len(c.extents))) or not self.target.fuse:
                return False
            if not all(q > self.pos[c] for k in keep for q in self.user_positions(p.outputs[k], besides=c)):
                return False
        if len(into) < len(c.extents) and not _is_cheap(p):
            return False  # each producer point would be recomputed for every extra consumer dim
        if len(into) < len(c.extents) and _has_checks(p):
            # Under the consumer's extra dims the checks would run only where those are non-empty: an
            # out-of-range index must be an error whatever the consumer's loop space (as on the reference).
            return False
        if not self._allowed(p, c):
            return False
        if self.width(p) + self.width(c) - len(slots) > self.max_operands:
            return False
        joined = self._joined((p, c))
        fused = inline_producer(p, c, slots, keep)
        self._inherit(fused, joined)
        nc = len(c.outputs)
        pairs = list(zip(c.outputs, fused.outputs[:nc])) + [
            (p.outputs[k], fused.outputs[nc + i]) for i, k in enumerate(keep)
        ]
        self.replace(pairs, fused, c, [c, p])
        count("fuse", "producers-inlined")
        if keep:
            count("fuse", "outputs-kept")
        return True

    def _step(self, ph: int) -> bool:
        """Phase ``ph``'s first applicable move in program order (made), or False when none applies."""
        while (k := self._next(ph)) is not None:
            if ph in (0, 2):
                moved = (ph == 2 or self.is_reduction(k)) and self.try_siblings(k)
            else:
                moved = not self.is_reduction(k) and self.inline(k, allow_keep=ph == 3)
            if moved:
                return True
            self._done(ph, k)
        return False

    def run(self) -> bool:
        changed = False
        # Cheapest-to-lose first: merging reductions gives their common input one consumer, which inlining
        # then removes; map siblings and second outputs come last, so they never block a reduction's fusion.
        while self._step(0) or self._step(1) or self._step(2) or self._step(3):
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
