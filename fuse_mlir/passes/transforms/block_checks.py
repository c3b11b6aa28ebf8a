"""``block-checks``: check a block of indices at once, then run the block without checks (vectorisable gathers).

A loop whose body holds ``loop.check`` (a gather's index test, ``sum(x[idx])``)
exits early on the first failing iteration, which keeps LLVM from
vectorising or unrolling it: each iteration is a scalar load-check-add
chain. This pass splits such an innermost loop into blocks of ``block``
iterations. Each block first folds its checks' conditions with ``and`` (a
branch-free loop LLVM vectorises; the indices it reads stay in L1), then
runs the block's body without the checks when all passed. When one failed,
the block runs the original checked body instead, which stops with the
located error at the first bad index: the same error, from the same
iteration, as before. Iterations past the last whole block run the original
loop.

The block loop keeps the original's ``parallel`` flag and carried values, so
a top-level reduction or map is still split across threads (docs/threads.md).
Only checks whose conditions depend on the iteration alone (loads of buffers
the loop does not write, and scalar arithmetic) are hoisted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, ModuleOp, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import entry_block
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.scalar import constant_of
from fuse_mlir.passes.statistics import count

BLOCKED = "checked_blocks"
"""Attribute of the loop over whole blocks (the original loop, after it, runs the remaining iterations)."""

BLOCK = 1024
"""Default iterations per checked block (the block's indices stay in L1 between the check and the body)."""


def _condition_slice(body: Block, checks: Sequence[loop.CheckOp]) -> list[Operation] | None:
    """The body ops the checks' conditions are computed from, in body order; None if not hoistable."""
    carried = set(body.args[1:])
    stored = {x.buffer for op in body.ops for x in op.walk() if isinstance(x, loop.StoreOp)}
    need: set[Operation] = set()
    work = [c.cond for c in checks]
    while work:
        v = work.pop()
        if v in carried:
            return None
        owner = v.owner
        if not isinstance(owner, Operation) or owner.parent_block() is not body or owner in need:
            continue
        if isinstance(owner, loop.LoadOp):
            if owner.buffer in stored:
                return None
        elif not (owner.name.startswith("arith.") and not owner.regions):
            return None
        need.add(owner)
        work.extend(owner.operands)
    return [op for op in body.ops if op in need]


def _clone_into(
    block: Block, ops: Sequence[Operation], mapper: dict[SSAValue, SSAValue], keep: Callable[[Operation], bool]
) -> None:
    for op in ops:
        if keep(op):
            block.add_op(op.clone(value_mapper=mapper))


class _Blocker:
    def __init__(self, func_block: Block, size: int):
        self.top = func_block
        self.size = size
        self.done = 0

    def candidates(self) -> list[loop.ForOp]:
        out = []
        for op in self.top.walk():
            if not isinstance(op, loop.ForOp) or constant_of(op.step) != 1:
                continue
            body = op.body.block
            if any(isinstance(x, loop.ForOp | loop.WhileOp) for x in body.ops):
                continue
            if any(isinstance(x, loop.CheckOp) for x in body.ops):
                out.append(op)
        return out

    def run(self) -> int:
        for op in self.candidates():
            self.split(op)
        return self.done

    def split(self, old: loop.ForOp) -> None:
        body = old.body.block
        checks = [x for x in body.ops if isinstance(x, loop.CheckOp)]
        cond_ops = _condition_slice(body, checks)
        if cond_ops is None:
            return
        parent = old.parent_block()
        assert parent is not None
        index = IndexType()
        pre: list[Operation] = []

        def emit(op: Operation, into: list[Operation] | Block) -> SSAValue:
            if isinstance(into, Block):
                into.add_op(op)
            else:
                into.append(op)
            return op.results[0]

        # Constants go before the top-level op holding the loop, so a top-level block loop sees them as free
        # values (its work estimate for threads counts the check loop's constant trip).
        anchor: Operation = old
        while anchor.parent_block() is not self.top:
            up = anchor.parent_op()
            assert up is not None
            anchor = up
        consts: list[Operation] = []
        c0 = emit(arith.ConstantOp(IntegerAttr(0, index)), consts)
        c1 = emit(arith.ConstantOp(IntegerAttr(1, index)), consts)
        cb = emit(arith.ConstantOp(IntegerAttr(self.size, index)), consts)
        true = emit(arith.ConstantOp(IntegerAttr(1, IntegerType(1))), consts)
        for op in consts:
            self.top.insert_op_before(op, anchor)

        span = emit(arith.MaxSIOp(emit(arith.SubiOp(old.upper, old.lower), pre), c0), pre)
        n_blocks = emit(arith.DivUIOp(span, cb), pre)
        tail_start = emit(arith.AddiOp(old.lower, emit(arith.MuliOp(n_blocks, cb), pre)), pre)
        for op in pre:
            parent.insert_op_before(op, old)

        carried_types = [v.type for v in old.inits]
        outer = Block(arg_types=[index, *carried_types])
        b, accs = outer.args[0], list(outer.args[1:])
        start = emit(arith.AddiOp(old.lower, emit(arith.MuliOp(b, cb), outer)), outer)

        def inner_loop(
            upper: SSAValue, inits: Sequence[SSAValue], fill: Callable[[Block, SSAValue], None]
        ) -> loop.ForOp:
            blk = Block(arg_types=[index, *(v.type for v in inits)])
            i = emit(arith.AddiOp(start, blk.args[0]), blk)
            fill(blk, i)
            op = loop.ForOp(c0, upper, c1, list(inits), Region(blk))
            outer.add_op(op)
            return op

        def check_all(blk: Block, i: SSAValue) -> None:
            mapper: dict[SSAValue, SSAValue] = {body.args[0]: i}
            _clone_into(blk, cond_ops, mapper, lambda _: True)
            ok: SSAValue = blk.args[1]
            for c in checks:
                ok = emit(arith.AndIOp(ok, mapper[c.cond]), blk)
            blk.add_op(loop.YieldOp([ok]))

        ok_loop = inner_loop(cb, [true], check_all)
        ok = ok_loop.results[0]

        def original(checked: bool) -> Callable[[Block, SSAValue], None]:
            def fill(blk: Block, i: SSAValue) -> None:
                mapper: dict[SSAValue, SSAValue] = {body.args[0]: i, **dict(zip(body.args[1:], blk.args[1:]))}
                _clone_into(blk, list(body.ops), mapper, lambda x: checked or not isinstance(x, loop.CheckOp))

            return fill

        bad_n = emit(arith.SelectOp(ok, c0, cb), outer)
        checked = inner_loop(bad_n, accs, original(True))
        good_n = emit(arith.SelectOp(ok, cb, c0), outer)
        fast = inner_loop(good_n, list(checked.results), original(False))
        outer.add_op(loop.YieldOp(list(fast.results)))
        blocks = loop.ForOp(c0, n_blocks, c1, list(old.inits), Region(outer), parallel=old.parallel is not None)
        blocks.attributes[BLOCKED] = UnitAttr()
        parent.insert_op_before(blocks, old)
        # The iterations after the last whole block: the original loop, from where the blocks stopped.
        old.operands[0] = tail_start
        for k, r in enumerate(blocks.results):
            old.operands[3 + k] = r
        self.done += 1
        count("block-checks", "loops-blocked")


@register_pass
@dataclass(frozen=True)
class BlockChecks(FusePass):
    """Check a block of indices at once (branch-free, vectorisable), then run it unchecked; bad blocks run checked."""

    name = "block-checks"
    level: ClassVar[str] = "loop"

    block: int = option(BLOCK, help="iterations per checked block (0: off)")

    example: ClassVar[str | None] = """\
builtin.module {
  func.func @fuse_main() {
    %0 = arith.constant 0.000000e+00 : f64
    %1 = arith.constant 0 : index
    %2 = arith.constant 1 : index
    %3 = loop.arg 0 : i64 "X" : memref<?xf64>
    %4 = loop.arg 1 : i64 "Idx" : memref<?xi64>
    %5 = loop.dim %3, 0 : i64 : memref<?xf64>
    %6 = loop.dim %4, 0 : i64 : memref<?xi64>
    %7 = loop.alloc() : memref<f64>
    %8 = loop.for %1 to %6 step %2 iter_args(%0 : f64) -> f64 {
    ^bb0(%9: index, %10: f64):
      %11 = loop.load %4[%9] : memref<?xi64> -> i64
      %12 = arith.index_cast %11 : i64 to index
      %13 = arith.cmpi ult, %12, %5 : index
      loop.check %13, %12, %5 code 1 : i64
      %14 = loop.load %3[%12] : memref<?xf64> -> f64
      %15 = arith.addf %10, %14 : f64
      loop.yield %15 : f64
    }
    loop.store %8, %7[] : f64, memref<f64>
    loop.result %7, 0 : i64 "S" : memref<f64>
    func.return
  }
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        if self.block <= 0:
            return False
        block = entry_block(module)
        if block is None:
            return False
        return _Blocker(block, self.block).run() > 0
