"""The checked build: every ``loop.load`` and ``loop.store`` tests its positions against its buffer's extents.

``compile(check_bounds=True)`` (or ``FUSE_CHECK_BOUNDS=1``, or ``fuse run
--check-bounds``) runs this pass on the loop module after every other
lowering, so what it checks is exactly what native code will access: the
positions of gathers, offsets, slices, diagonals, reductions, the buffers the
in-place analysis reuses, and every nest (outlined and parallel nests are made
from the checked loop level). Before each access, per axis, it inserts
``loop.check (position ult extent)``: one unsigned compare catches negative
positions too. Before each ``loop.gemm`` it checks that the BLAS call's
matrices fit in the element counts of ``a``, ``b`` and ``c``: that the last
element each operand's matrices reach, ``(batch-1)·batch_stride +
(rows-1)·row_stride + cols``, is inside it (``batch × m × k`` and so on for
the contiguous layout). A failing check is a ``FuseRuntimeError``
naming the op, the axis and the buffer (an input, constant or source by name,
a result by name, else the allocation's id), with the failing position and the
extent; host calls run on NumPy, whose indexing is checked already.

The checks cost what a branch per access costs, and they keep LLVM from
vectorising most loops: a correctness tool, not a production mode (the slowdown
on one workload is in docs/runtime.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import ERRORS, ErrorEntry, LoopAbi
from fuse_mlir.dialects.types import INDEX
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.targets import checked_build  # noqa: F401 - re-exported (defined there: no xDSL)


class _Checker:
    """Inserts the checks into one loop module and appends their messages to ``fuse.errors``."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.abi = LoopAbi.read(module)
        self.errors = self.abi.errors
        self.arg_names = {k: (e.name, e.kind) for k, e in enumerate(self.abi.args or ())}
        self.result_names = {k: e.name for k, e in enumerate(self.abi.results or ())}
        self.names: dict[SSAValue, str] = {}
        self.codes: dict[tuple[str, int, str], int] = {}
        self.count = 0

    def describe(self, buf: SSAValue) -> str:
        """How a message names a buffer: where it comes from."""
        name = self.names.get(buf)
        if name is not None:
            return name
        owner = buf.owner
        if isinstance(owner, loop.ArgOp):
            slot = owner.slot.value.data
            arg, kind = self.arg_names.get(slot, (f"#{slot}", "input"))
            return f"{kind} '{arg}'"
        if isinstance(owner, loop.AllocOp):
            return f"buffer {owner.result.name_hint or ''}".rstrip() + " (a loop.alloc)"
        return "a buffer"

    def code(self, op: str, axis: int, what: str) -> int:
        """The ``fuse.errors`` code for an out-of-range position of ``op`` on ``axis`` of buffer ``what``."""
        key = (op, axis, what)
        hit = self.codes.get(key)
        if hit is None:
            message = f"{op} out of bounds: position {{0}} on axis {axis} of {what}, whose extent is {{1}}"
            self.errors.append(ErrorEntry(message))
            hit = self.codes[key] = len(self.errors)
        return hit

    def gemm_code(self, operand: str, what: str) -> int:
        key = ("loop.gemm", -1, f"{operand}:{what}")
        hit = self.codes.get(key)
        if hit is None:
            message = (
                f"loop.gemm out of bounds: BLAS would access {{0}} elements of operand {operand} ({what}), "
                f"which has {{1}}"
            )
            self.errors.append(ErrorEntry(message))
            hit = self.codes[key] = len(self.errors)
        return hit

    def name_results(self) -> None:
        """Buffers that leave as results are named by their export."""
        for op in self.module.walk():
            if isinstance(op, loop.ResultOp):
                name = self.result_names.get(op.slot.value.data)
                if name is not None and op.buffer not in self.names and isinstance(op.buffer.owner, loop.AllocOp):
                    self.names[op.buffer] = f"result '{name}'"

    def insert(self, before: Operation, ops: Sequence[Operation]) -> None:
        block = before.parent_block()
        assert block is not None
        for o in ops:
            block.insert_op_before(o, before)

    def access(self, op: loop.LoadOp | loop.StoreOp) -> None:
        buf = op.buffer
        what = self.describe(buf)
        new: list[Operation] = []
        for axis, pos in enumerate(op.positions):
            dim = loop.DimOp(buf, axis)
            cmp = arith.CmpiOp(pos, dim.result, "ult")
            new += [dim, cmp, loop.CheckOp(cmp.result, pos, dim.result, self.code(op.name, axis, what))]
        self.insert(op, new)
        self.count += len(op.positions)

    def numel(self, buf: SSAValue, new: list[Operation]) -> SSAValue:
        t = buf.type
        assert isinstance(t, MemRefType)
        one = arith.ConstantOp(IntegerAttr(1, INDEX))
        new.append(one)
        n: SSAValue = one.result
        for axis in range(len(t.get_shape())):
            dim = loop.DimOp(buf, axis)
            mul = arith.MuliOp(n, dim.result)
            new += [dim, mul]
            n = mul.result
        return n

    def gemm(self, op: loop.GemmOp) -> None:
        new: list[Operation] = []

        def need(*factors: SSAValue) -> SSAValue:
            n = factors[0]
            for f in factors[1:]:
                mul = arith.MuliOp(n, f)
                new.append(mul)
                n = mul.result
            return n

        one = arith.ConstantOp(IntegerAttr(1, INDEX))
        zero = arith.ConstantOp(IntegerAttr(0, INDEX))
        new += [one, zero]

        def add(x: SSAValue, y: SSAValue) -> SSAValue:
            new.append(o := arith.AddiOp(x, y))
            return o.result

        def less_one(x: SSAValue) -> SSAValue:
            new.append(o := arith.SubiOp(x, one.result))
            return o.result

        def span(nb: SSAValue, rows: SSAValue, cols: SSAValue, step: SSAValue, row: SSAValue) -> SSAValue:
            """One past the last element the matrices reach (nb·rows·cols when contiguous); 0 when they are empty."""
            reach = add(add(need(less_one(nb), step), need(less_one(rows), row)), cols)
            new.append(empty := arith.CmpiOp(need(nb, rows, cols), zero.result, "eq"))
            new.append(sel := arith.SelectOp(empty.result, zero.result, reach))
            return sel.result

        batch_a = one.result if op.broadcast_a.value.data else op.batch
        batch_b = one.result if op.broadcast_b.value.data else op.batch
        strides = list(op.strides) or op.contiguous_strides(op.m, op.n, op.k, need, zero.result)
        shape_a, shape_b, shape_c = op.shapes(op.m, op.n, op.k)
        wanted_a = span(batch_a, *shape_a, *strides[0:2])
        wanted_b = span(batch_b, *shape_b, *strides[2:4])
        wanted_c = span(op.batch, *shape_c, *strides[4:6])
        for name, buf, wanted in (("a", op.a, wanted_a), ("b", op.bm, wanted_b), ("c", op.c, wanted_c)):
            have = self.numel(buf, new)
            ok = arith.CmpiOp(wanted, have, "ule")
            new += [ok, loop.CheckOp(ok.result, wanted, have, self.gemm_code(name, self.describe(buf)))]
        self.insert(op, new)
        self.count += 3

    def run(self) -> int:
        self.name_results()
        for op in list(self.module.walk()):
            if isinstance(op, loop.LoadOp | loop.StoreOp):
                self.access(op)
            elif isinstance(op, loop.GemmOp):
                self.gemm(op)
        self.abi.checked = True
        self.abi.absent -= {ERRORS}  # a checked module always has its error table
        self.abi.write(self.module)
        return self.count


def check_bounds(module: ModuleOp) -> int:
    """Insert the checks into a loop-level module (once: a checked module is left alone); returns how many."""
    if LoopAbi.read(module).checked:
        return 0
    return _Checker(module).run()


@register_pass
@dataclass(frozen=True)
class CheckBounds(FusePass):
    """Check every loop.load/loop.store position against its buffer's extent, and BLAS sizes against buffers.

    The checked build (``compile(check_bounds=True)``, ``FUSE_CHECK_BOUNDS=1``):
    each access gets one ``loop.check`` per axis (an unsigned compare, so
    negative positions fail too) and each ``loop.gemm`` three size checks; a
    failure is a run-time error naming the op, the axis and the buffer. Marks
    the module ``fuse.checked`` so running it twice adds nothing.
    """

    name = "check-bounds"
    level: ClassVar[str] = "loop"
    example: ClassVar[str | None] = """\
builtin.module attributes {fuse.args = [#fuse.arg<"x", input>], fuse.results = [#fuse.result<"y", export>], fuse.errors = []} {
  func.func @fuse_main() {
    %x = loop.arg 0 : i64 "x" : memref<?xf64>
    %y = loop.alloc() : memref<f64>
    %c3 = arith.constant 3 : index
    %v = loop.load %x[%c3] : memref<?xf64> -> f64
    loop.store %v, %y[] : f64, memref<f64>
    loop.result %y, 0 : i64 "y" : memref<f64>
    func.return
  }
}
"""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        return check_bounds(module) > 0
