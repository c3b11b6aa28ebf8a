"""Building llvm-dialect functions: the blocks, loops, guards, constants and calls every lowering to llvm uses.

:class:`FunctionBuilder` appends llvm ops to the function it builds: constants
once per function in the entry block, stack slots there too, guarded branches
to cold error blocks placed last, counted loops as header/body/exit blocks.
The loop → llvm lowering (``lower_loop_to_llvm``) and the outlined nests and
parallel chunks (``loop_to_llvm.parallel``) build their functions with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    UnitAttr,
)
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.types import I1, I32, I64, PTR
from fuse_mlir.targets import PARALLEL_MIN

if TYPE_CHECKING:
    from fuse_mlir.dialects.abi import AbiLayout

"""Default least work (iterations of the nest's loops) for which a parallel region is split across threads."""

NSW = IntegerAttr(llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP]).to_int(), 32)


def llvm_type(t: Attribute) -> Attribute:
    """The llvm-dialect type of a scalar type: ``index`` is i64, integers lose their signedness."""
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, IntegerType):
        return IntegerType(t.width.data)
    if isinstance(t, Float64Type | Float32Type | Float16Type):
        return t
    raise ValueError(f"lower-loop-to-llvm: unsupported scalar type {t}")


def byte_size(t: Attribute) -> int:
    """Bytes per element of a buffer element type (i1 is stored as one byte)."""
    if isinstance(t, IntegerType):
        return max(1, t.width.data // 8)
    if isinstance(t, Float64Type):
        return 8
    if isinstance(t, Float32Type):
        return 4
    if isinstance(t, Float16Type):
        return 2
    if isinstance(t, IndexType):
        return 8
    raise ValueError(f"lower-loop-to-llvm: unsupported element type {t}")


@dataclass
class Buf:
    """A lowered buffer: data pointer, extents (i64 values) and element type."""

    ptr: SSAValue
    extents: list[SSAValue]
    elem: Attribute


def is_const(v: SSAValue, value: int) -> bool:
    owner = v.owner
    return (
        isinstance(owner, llvm.ConstantOp) and isinstance(owner.value, IntegerAttr) and owner.value.value.data == value
    )


EXTREMAL = ("arith.maximumf", "arith.minimumf")
"""The float max and min ops: as reduction steps they also get ``nsz`` (:meth:`FunctionBuilder.flags`)."""


@dataclass
class Shared:
    """What the functions of one module share while they are lowered: settings, declarations, outlined nests."""

    layout: AbiLayout
    strict: bool
    reductions: set[Operation]
    threads: int = 1
    parallel_min: int = PARALLEL_MIN
    decls: dict[str, llvm.FuncOp] = field(default_factory=dict)
    funcs: list[llvm.FuncOp] = field(default_factory=list)
    host_calls: int = 0
    shared_allocs: frozenset[int] = frozenset()  # alloc ids bound to donated inputs (fuse.reuse): may alias
    streaming_min_bytes: int = 0  # > 0: marked stores stream into buffers of at least this size (streaming.py)
    allocs: int = 0  # loop.alloc ops lowered so far, in walk order (their default ids)
    contracted: set[Operation] = field(default_factory=set)  # reduction adds and their products: may fuse to fma


class FunctionBuilder:
    """Builds one llvm function: its region, entry block, hoisted constants and stack slots, and error blocks.

    ``main`` names the native entry point's six pointer arguments (``p_args``
    … ``p_rt``); an outlined function sets the ones it has itself.
    """

    def v(self, old: SSAValue) -> SSAValue:
        """The lowered value of a loop-level scalar."""
        try:
            return self.values[old]
        except KeyError:
            raise ValueError(f"lower-loop-to-llvm: value {old} used before it was lowered") from None

    def buf(self, old: SSAValue) -> Buf:
        """The lowered buffer of a loop-level memref."""
        try:
            return self.buffers[old]
        except KeyError:
            raise ValueError(f"lower-loop-to-llvm: buffer {old} used before it was lowered") from None

    def counted_for(
        self, op: loop.ForOp, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue] | None
    ) -> Sequence[SSAValue]:
        """Lower a ``loop.for`` over [lower, upper) (the loop-body lowering, ``lower_loop_to_llvm``, defines it)."""
        raise NotImplementedError(f"{type(self).__name__} lowers no loop bodies")

    def __init__(self, shared: Shared, arg_types: Sequence[Attribute] = (PTR,) * 6, main: bool = True):
        self.shared = shared
        self.values: dict[SSAValue, SSAValue] = {}  # lowered loop-level values
        self.buffers: dict[SSAValue, Buf] = {}  # lowered loop-level memrefs
        self.layout = shared.layout
        self.strict = shared.strict
        self.reductions = shared.reductions
        self.main = main
        self.region = Region()
        self.entry = Block(arg_types=list(arg_types))
        self.region.add_block(self.entry)
        self.block = self.entry
        if main:
            self.p_args, self.p_arg_shapes, self.p_results, self.p_result_shapes, self.p_err, self.p_rt = (
                self.entry.args
            )
        self.prologue: list[Operation] = []
        self.consts: dict[tuple[Attribute, object], SSAValue] = {}
        self.error_blocks: list[Block] = []
        self.decls = shared.decls
        # loop.store ops being lowered into a stack tile: (tile, the tile's first iteration); streaming.py
        self.streaming: dict[Operation, tuple[SSAValue, SSAValue]] = {}

    def emit(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def val(self, op: Operation) -> SSAValue:
        return self.emit(op).results[0]

    def const(self, value: int | float, t: Attribute = I64) -> SSAValue:
        """A constant, created once per function in the entry block (building xDSL ops is the slow part)."""
        if isinstance(t, IntegerType):
            v = int(value)
            if t.width.data == 1:
                v = 1 if v else 0
            key: tuple[Attribute, object] = (t, v)
        else:
            f = float(value)
            key = (t, f.hex())
        hit = self.consts.get(key)
        if hit is None:
            attr: Attribute
            if isinstance(t, IntegerType):
                attr = IntegerAttr(v, t)
            else:
                assert isinstance(t, Float64Type | Float32Type | Float16Type)
                attr = FloatAttr(f, t)
            op = llvm.ConstantOp(attr, t)
            self.prologue.append(op)
            hit = self.consts[key] = op.result
        return hit

    def new_block(self, arg_types: Sequence[Attribute] = ()) -> Block:
        return Block(arg_types=list(arg_types))

    def start(self, block: Block) -> None:
        self.region.add_block(block)
        self.block = block

    def add(self, a: SSAValue, b: SSAValue, nsw: bool = True) -> SSAValue:
        return self.val(llvm.AddOp(a, b, overflow=NSW if nsw else IntegerAttr(0, 32)))

    def mul(self, a: SSAValue, b: SSAValue, nsw: bool = True) -> SSAValue:
        if is_const(a, 1):
            return b
        if is_const(b, 1):
            return a
        return self.val(llvm.MulOp(a, b, overflow=NSW if nsw else IntegerAttr(0, 32)))

    def icmp(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        p = IntegerAttr(llvm.ICmpPredicateFlag(pred).to_int(), I64)
        return self.val(llvm.ICmpOp(a, b, p))

    def gep(self, ptr: SSAValue, index: SSAValue | int, elem: Attribute) -> SSAValue:
        return self.val(llvm.GEPOp.from_mixed_indices(ptr, [index], elem, inbounds=True))

    def load(self, ptr: SSAValue, t: Attribute) -> SSAValue:
        return self.val(llvm.LoadOp(ptr, t, alignment=byte_size(t) if t != PTR else 8))

    def store(self, v: SSAValue, ptr: SSAValue) -> None:
        t = v.type
        self.emit(llvm.StoreOp(v, ptr, alignment=byte_size(t) if t != PTR else 8))

    def intrinsic(
        self, name: str, args: Sequence[SSAValue], result: Attribute, flags: frozenset[FastMathFlag]
    ) -> SSAValue:
        op = llvm.CallIntrinsicOp(name, list(args), [result])
        if flags:
            op.properties["fastmathFlags"] = llvm.FastMathAttr(flags)
        return self.val(op)

    def declare(
        self, name: str, inputs: Sequence[Attribute], output: Attribute | None, noalias_result: bool = False
    ) -> None:
        if name in self.decls:
            return
        props: dict[str, Attribute | None] = {"no_unwind": UnitAttr()}
        if noalias_result:
            # No align attribute: a buffer may be the caller's out= array, aligned only to its element type.
            props["res_attrs"] = ArrayAttr([DictionaryAttr({"llvm.noalias": UnitAttr()})])
        self.decls[name] = llvm.FuncOp(
            name, llvm.LLVMFunctionType(list(inputs), output), linkage=llvm.LinkageAttr("external"), other_props=props
        )

    def call(self, name: str, args: Sequence[SSAValue], result: Attribute | None) -> SSAValue | None:
        op = self.emit(llvm.CallOp(name, *args, return_type=result))
        return op.results[0] if op.results else None

    def entry_alloca(self, elem: Attribute, count: int, align: int = 8) -> SSAValue:
        """A stack slot of ``count`` elements aligned to ``align`` bytes, allocated once in the entry block."""
        alloca = llvm.AllocaOp(self.const(max(1, count)), elem, alignment=align)
        self.prologue.append(alloca)
        return alloca.res

    def fail(self, code: int, a: SSAValue, b: SSAValue) -> Block:
        """A block that stores ``err = [code, a, b]`` and returns ``code``."""
        blk = self.new_block()
        saved = self.block
        self.block = blk
        for k, v in enumerate((self.const(code), a, b)):
            self.store(v, self.gep(self.p_err, k, I64) if k else self.p_err)
        self.emit(llvm.ReturnOp(self.const(code, I32)))
        self.block = saved
        self.error_blocks.append(blk)
        return blk

    def guard(self, cond: SSAValue, code: int, a: SSAValue, b: SSAValue) -> None:
        """Continue if ``cond`` (expected true), else fail with ``err = [code, a, b]``."""
        expected = self.intrinsic("llvm.expect.i1", [cond, self.const(1, I1)], I1, frozenset())
        bad = self.fail(code, a, b)
        ok = self.new_block()
        self.emit(llvm.CondBrOp(expected, ok, [], bad, []))
        self.start(ok)

    def counted_loop(
        self,
        lower: SSAValue,
        upper: SSAValue,
        step: SSAValue,
        inits: Sequence[SSAValue],
        body: Callable[[SSAValue, Sequence[SSAValue]], Sequence[SSAValue]],
    ) -> Sequence[SSAValue]:
        """``for iv in [lower, upper) by step`` with carried values; ``body(iv, carried)`` returns the next ones."""
        types = [v.type for v in inits]
        header = self.new_block([I64, *types])
        inner = self.new_block()
        exit_ = self.new_block(types)
        self.emit(llvm.BrOp(header, lower, *inits))
        self.start(header)
        iv, *carried = header.args
        more = self.icmp("slt", iv, upper)
        self.emit(llvm.CondBrOp(more, inner, [], exit_, list(carried)))
        self.start(inner)
        nexts = body(iv, carried)
        nxt = self.add(iv, step)
        self.emit(llvm.BrOp(header, nxt, *nexts))
        self.start(exit_)
        return list(exit_.args)

    def element_ptr(self, b: Buf, positions: Sequence[SSAValue]) -> SSAValue:
        if not positions:
            return b.ptr
        idx = positions[0]
        for e, p in zip(b.extents[1:], positions[1:]):
            idx = self.add(self.mul(idx, e), p)
        return self.gep(b.ptr, idx, b.elem)

    def numel(self, extents: Sequence[SSAValue]) -> SSAValue:
        if not extents:
            return self.const(1)
        n = extents[0]
        for e in extents[1:]:
            n = self.mul(n, e)
        return n

    def check_rc(self, rc: SSAValue) -> None:
        """Return ``rc`` (an i32 error code whose details are already in ``err``) unless it is 0."""
        ok = self.val(llvm.ICmpOp(rc, self.const(0, I32), IntegerAttr(llvm.ICmpPredicateFlag("eq").to_int(), I64)))
        expected = self.intrinsic("llvm.expect.i1", [ok, self.const(1, I1)], I1, frozenset())
        bad = self.new_block()
        bad.add_op(llvm.ReturnOp(rc))
        self.error_blocks.append(bad)
        good = self.new_block()
        self.emit(llvm.CondBrOp(expected, good, [], bad, []))
        self.start(good)

    def slot(self, base: SSAValue, index: SSAValue | int) -> SSAValue:
        """The address of 8-byte slot ``index`` of ``base``."""
        if isinstance(index, int) and index == 0:
            return base
        return self.gep(base, index, I64)

    def int_cast(self, x: SSAValue, to: Attribute, signed: bool) -> SSAValue:
        assert isinstance(x.type, IntegerType) and isinstance(to, IntegerType)
        src, dst = x.type.width.data, to.width.data
        if src == dst:
            return x
        if src > dst:
            return self.val(llvm.TruncOp(x, to))
        return self.val((llvm.SExtOp if signed else llvm.ZExtOp)(x, to))

    # ---- fast-math

    def flags(self, op: Operation) -> frozenset[FastMathFlag]:
        if self.strict:
            return frozenset()
        fm = op.properties.get("fastmath")
        out: set[FastMathFlag] = set(fm.data) if fm is not None else set()  # type: ignore[attr-defined]
        if op in self.reductions:
            out.add(FastMathFlag.REASSOC)
            if op.name in EXTREMAL:
                # A max/min reduction need not order -0 below +0 (NumPy's does not
                # either: it keeps the first of equal values), which halves the
                # instructions of llvm.maximum/minimum on x86; NaN still propagates.
                out.add(FastMathFlag.NO_SIGNED_ZEROS)
        if op in self.shared.contracted:
            out.add(FastMathFlag.ALLOW_CONTRACT)
        return frozenset(out)

    # ---- the function

    def finish(
        self, name: str, ftype: llvm.LLVMFunctionType, linkage: str, arg_attrs: ArrayAttr, inline: bool = True
    ) -> llvm.FuncOp:
        """The function built so far: entry-block allocas first, error blocks last.

        ``inline=False`` marks it ``noinline``: an outlined nest must stay its
        own function, or LLVM would inline it back and optimise one huge function.
        """
        if self.prologue:
            first = self.entry.first_op
            for op in self.prologue:
                if first is None:
                    self.entry.add_op(op)
                else:
                    self.entry.insert_op_before(op, first)
        for blk in self.error_blocks:
            self.region.add_block(blk)
        props: dict[str, Attribute | None] = {"no_unwind": UnitAttr(), "arg_attrs": arg_attrs}
        if not inline:
            props["no_inline"] = UnitAttr()
        return llvm.FuncOp(
            name,
            ftype,
            linkage=llvm.LinkageAttr(linkage),
            body=self.region,
            other_props=props,
        )
