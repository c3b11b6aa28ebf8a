"""Lower the loop level to xDSL's llvm dialect, implementing the native ABI (docs/native-abi.md).

``func.func @fuse_main()`` becomes ``llvm.func @fuse_main(args, arg_shapes,
results, result_shapes, err, rt) -> i32``. A buffer becomes a data pointer and
one ``i64`` per extent (static extents are constants); loads and stores
linearise their positions row-major and index with ``getelementptr inbounds``.
``loop.for`` becomes a header block whose arguments (phis) are the induction
variable and the carried values, a body, and an exit block receiving the
results. ``loop.check`` branches (``llvm.expect``-weighted) to a cold block that
fills ``err`` and returns the code. ``loop.alloc`` calls ``fuse_alloc(rt, nbytes, id)``,
``loop.gemm`` calls ``fuse_dgemm``/``fuse_sgemm`` (Fortran ABI, column-major:
row-major ``C = A·B`` is ``Cᵀ = Bᵀ·Aᵀ``) once per batch entry, and
``loop.host_call`` calls ``fuse_host_call`` with pointer/extent arrays on the
stack. ``arith``/``math`` become llvm arithmetic, casts and type-mangled
intrinsic calls (``llvm.exp.f64``, ``llvm.maximum.f32``, ...).

Each top-level ``loop.for`` becomes its own ``noinline internal`` function
``@fuse_nestK`` (see :class:`_Nest`), so LLVM optimises nests one at a time
and compile time grows linearly with the program. With ``threads`` > 1, a nest
whose outer loop is ``parallel`` with no carried values, or that folds every
carried value with one associative op (:func:`fold_kind`), also gets a chunk
function, and ``fuse_main`` runs it through ``fuse_parallel_for`` in
``min(threads, trip)`` static blocks when its work reaches ``parallel_min``
(one block below that), folding the blocks' partial results in order.

Fast-math: float adds/subs/muls on the path from a loop-carried accumulator to
its ``loop.yield`` get ``reassoc`` (what lets LLVM vectorise the reduction);
fast-math flags already on ``arith``/``math`` ops are kept. With
``strict=true`` no fast-math flag is emitted at all.

Beyond the documented ABI: a failing ``fuse_alloc`` (NULL) returns
:data:`ERR_ALLOC` with ``err = [ERR_ALLOC, nbytes, alloc_id]``, a buffer whose byte size would pass
2^63 - 1 returns :data:`ERR_SIZE` with ``err = [ERR_SIZE, alloc_id, 0]`` before anything is allocated
(:meth:`_Lowering.checked_size`), and a failing
``fuse_host_call`` (non-zero status) returns :data:`ERR_HOST_CALL` with
``err = [ERR_HOST_CALL, call_id, status]``; host calls are numbered in walk
order of the ``loop.host_call`` ops (the index into ``fuse.host_calls``). An
argument slot that no ``loop.arg`` reads contributes no extents to
``arg_shapes`` (see :func:`abi_layout`, shared with the runtime).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
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
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.dialects.func import FuncOp as FuncFuncOp
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from fuse_mlir.dialects import loop
from fuse_mlir.dialects.llvmx import FPToSIOp, FPToUIOp, UIToFPOp, mangle
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass

PTR = llvm.LLVMPointerType()
I1 = IntegerType(1)
I8 = IntegerType(8)
I32 = IntegerType(32)
I64 = IntegerType(64)
ENTRY = "fuse_main"
ERR_HOST_CALL = -1
"""Return code of ``fuse_main`` when a host call reported failure."""
ERR_ALLOC = -2
"""Return code of ``fuse_main`` when ``fuse_alloc`` returned NULL (``err = [ERR_ALLOC, nbytes, alloc_id]``)."""
ERR_SIZE = -4
"""Return code of ``fuse_main`` when a buffer's byte size would pass 2^63 - 1 (``err = [ERR_SIZE, alloc_id, 0]``)."""
PARALLEL_MIN = 1 << 16
"""Default least work (iterations of the nest's loops) for which a parallel region is split across threads."""

_NSW = IntegerAttr(llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP]).to_int(), 32)

# --------------------------------------------------------------------------- ABI layout


@dataclass(frozen=True)
class AbiLayout:
    """Where each slot's extents live in ``arg_shapes`` / ``result_shapes``."""

    arg_types: tuple[MemRefType | None, ...]
    arg_offsets: tuple[int, ...]
    result_types: tuple[MemRefType | None, ...]
    result_offsets: tuple[int, ...]

    @property
    def n_arg_extents(self) -> int:
        return _total(self.arg_types)

    @property
    def n_result_extents(self) -> int:
        return _total(self.result_types)


def _total(types: Sequence[MemRefType | None]) -> int:
    return sum(len(t.get_shape()) for t in types if t is not None)


def _slot_types(ops: Sequence[loop.ArgOp | loop.ResultOp], count: int, what: str) -> list[MemRefType | None]:
    types: list[MemRefType | None] = [None] * count
    for op in ops:
        slot = op.slot.value.data
        t = op.result.type if isinstance(op, loop.ArgOp) else op.buffer.type
        assert isinstance(t, MemRefType)
        if slot < 0:
            raise ValueError(f"{op.name}: negative slot {slot}")
        if slot >= len(types):
            types.extend([None] * (slot + 1 - len(types)))
        old = types[slot]
        if old is not None and old != t:
            raise ValueError(f"{what} slot {slot} used with two types: {old} and {t}")
        types[slot] = t
    return types


def _offsets(types: Sequence[MemRefType | None]) -> tuple[int, ...]:
    out, at = [], 0
    for t in types:
        out.append(at)
        at += 0 if t is None else len(t.get_shape())
    return tuple(out)


def abi_layout(module: ModuleOp) -> AbiLayout:
    """The slots of a loop-level module: their memref types (from ``loop.arg``/``loop.result``) and extent offsets.

    The slot counts come from ``fuse.args``/``fuse.results`` when present
    (otherwise the highest slot used + 1); a slot no op touches has type None
    and contributes no extents.
    """
    args = [op for op in module.walk() if isinstance(op, loop.ArgOp)]
    results = [op for op in module.walk() if isinstance(op, loop.ResultOp)]
    n_args = _attr_len(module, "fuse.args")
    n_results = _attr_len(module, "fuse.results")
    at = _slot_types(args, n_args, "argument")
    rt = _slot_types(results, n_results, "result")
    return AbiLayout(tuple(at), _offsets(at), tuple(rt), _offsets(rt))


def _attr_len(module: ModuleOp, name: str) -> int:
    a = module.attributes.get(name)
    return len(a.data) if isinstance(a, ArrayAttr) else 0


# --------------------------------------------------------------------------- types and intrinsics


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


# Float intrinsics overloaded on one type: name suffix is that type.
_FLOAT_INTRINSICS: dict[str, str] = {
    "math.exp": "llvm.exp",
    "math.exp2": "llvm.exp2",
    "math.log": "llvm.log",
    "math.log2": "llvm.log2",
    "math.log10": "llvm.log10",
    "math.sqrt": "llvm.sqrt",
    "math.sin": "llvm.sin",
    "math.cos": "llvm.cos",
    "math.tan": "llvm.tan",
    "math.tanh": "llvm.tanh",
    "math.sinh": "llvm.sinh",
    "math.cosh": "llvm.cosh",
    "math.asin": "llvm.asin",
    "math.acos": "llvm.acos",
    "math.atan": "llvm.atan",
    "math.atan2": "llvm.atan2",
    "math.absf": "llvm.fabs",
    "math.floor": "llvm.floor",
    "math.ceil": "llvm.ceil",
    "math.round": "llvm.round",
    "math.roundeven": "llvm.roundeven",
    "math.trunc": "llvm.trunc",
    "math.copysign": "llvm.copysign",
    "math.fma": "llvm.fma",
    "math.powf": "llvm.pow",
    "arith.maximumf": "llvm.maximum",
    "arith.minimumf": "llvm.minimum",
    "arith.maxnumf": "llvm.maxnum",
    "arith.minnumf": "llvm.minnum",
}
# Float functions LLVM has no intrinsic for: libm calls (``name`` for f64, ``namef`` for f32).
_LIBM: dict[str, str] = {
    "math.erf": "erf",
    "math.log1p": "log1p",
    "math.expm1": "expm1",
    "math.cbrt": "cbrt",
    "math.asinh": "asinh",
    "math.acosh": "acosh",
    "math.atanh": "atanh",
}
_INT_MINMAX: dict[str, str] = {
    "arith.maxsi": "llvm.smax",
    "arith.minsi": "llvm.smin",
    "arith.maxui": "llvm.umax",
    "arith.minui": "llvm.umin",
}
_INT_BINOPS: dict[str, type[Operation]] = {
    "arith.addi": llvm.AddOp,
    "arith.subi": llvm.SubOp,
    "arith.muli": llvm.MulOp,
    "arith.divsi": llvm.SDivOp,
    "arith.divui": llvm.UDivOp,
    "arith.remsi": llvm.SRemOp,
    "arith.remui": llvm.URemOp,
    "arith.andi": llvm.AndOp,
    "arith.ori": llvm.OrOp,
    "arith.xori": llvm.XOrOp,
    "arith.shli": llvm.ShlOp,
    "arith.shrsi": llvm.AShrOp,
    "arith.shrui": llvm.LShrOp,
}
_FLOAT_BINOPS: dict[str, type[llvm.AbstractFloatArithOp]] = {
    "arith.addf": llvm.FAddOp,
    "arith.subf": llvm.FSubOp,
    "arith.mulf": llvm.FMulOp,
    "arith.divf": llvm.FDivOp,
    "arith.remf": llvm.FRemOp,
}
_CASTS: dict[str, type[Operation]] = {
    "arith.extf": llvm.FPExtOp,
    "arith.truncf": llvm.FPTruncOp,
    "arith.sitofp": llvm.SIToFPOp,
    "arith.uitofp": UIToFPOp,
    "arith.fptosi": FPToSIOp,
    "arith.fptoui": FPToUIOp,
    "arith.bitcast": llvm.BitcastOp,
}

# --------------------------------------------------------------------------- reduction analysis

_ADDITIVE = ("arith.addf", "arith.subf")
_MULTIPLICATIVE = ("arith.mulf",)


def reduction_ops(root: Operation) -> set[Operation]:
    """Float adds/subs/muls on a path from a ``loop.for`` carried value to its ``loop.yield`` (same kind all along)."""
    found: set[Operation] = set()
    for op in root.walk():
        if not isinstance(op, loop.ForOp) or not op.inits:
            continue
        block = op.body.block
        term = block.last_op
        assert isinstance(term, loop.YieldOp)
        for acc, v in zip(block.args[1:], term.values):
            owner = v.owner
            if isinstance(owner, Operation) and owner.name in _ADDITIVE + _MULTIPLICATIVE:
                kind = _ADDITIVE if owner.name in _ADDITIVE else _MULTIPLICATIVE
                _chain(v, acc, block, kind, found)
    return found


def _chain(v: SSAValue, acc: SSAValue, block: Block, kind: tuple[str, ...], found: set[Operation]) -> bool:
    """Whether ``v`` is computed from ``acc`` through ``kind`` ops (and selects) of ``block``; marks those ops."""
    if v is acc:
        return True
    owner = v.owner
    if not isinstance(owner, Operation) or owner.parent_block() is not block:
        return False
    if owner.name in kind:
        operands = owner.operands[:1] if owner.name == "arith.subf" else owner.operands
        hit = False
        for o in operands:
            hit = _chain(o, acc, block, kind, found) or hit
        if hit:
            found.add(owner)
        return hit
    if owner.name == "arith.select":
        hit = False
        for o in owner.operands[1:]:
            hit = _chain(o, acc, block, kind, found) or hit
        return hit
    return False


# --------------------------------------------------------------------------- lowering


@dataclass
class Buf:
    """A lowered buffer: data pointer, extents (i64 values) and element type."""

    ptr: SSAValue
    extents: list[SSAValue]
    elem: Attribute


def _is_const(v: SSAValue, value: int) -> bool:
    owner = v.owner
    return (
        isinstance(owner, llvm.ConstantOp) and isinstance(owner.value, IntegerAttr) and owner.value.value.data == value
    )


@dataclass
class _Shared:
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
    allocs: int = 0  # loop.alloc ops lowered so far, in walk order (their default ids)


class _Lowering:
    """Builds one llvm function: ``@fuse_main`` from the loop-level ``func.func @fuse_main``, or an outlined nest."""

    def __init__(self, shared: _Shared, arg_types: Sequence[Attribute] = (PTR,) * 6, main: bool = True):
        self.shared = shared
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
        self.values: dict[SSAValue, SSAValue] = {}
        self.buffers: dict[SSAValue, Buf] = {}
        self.prologue: list[Operation] = []
        self.consts: dict[tuple[Attribute, object], SSAValue] = {}
        self.error_blocks: list[Block] = []
        self.decls = shared.decls
        self.top: Block | None = None  # the loop-level function body, whose loop nests are outlined

    # ---- building helpers

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
            v = float(value)
            key = (t, v.hex())
        hit = self.consts.get(key)
        if hit is None:
            attr: Attribute = IntegerAttr(v, t) if isinstance(t, IntegerType) else FloatAttr(v, t)  # type: ignore[arg-type]
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
        return self.val(llvm.AddOp(a, b, overflow=_NSW if nsw else IntegerAttr(0, 32)))

    def mul(self, a: SSAValue, b: SSAValue, nsw: bool = True) -> SSAValue:
        if _is_const(a, 1):
            return b
        if _is_const(b, 1):
            return a
        return self.val(llvm.MulOp(a, b, overflow=_NSW if nsw else IntegerAttr(0, 32)))

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

    def entry_alloca(self, elem: Attribute, count: int) -> SSAValue:
        """A stack slot of ``count`` elements, allocated once in the entry block."""
        alloca = llvm.AllocaOp(self.const(max(1, count)), elem, alignment=8)
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

    # ---- fast-math

    def flags(self, op: Operation) -> frozenset[FastMathFlag]:
        if self.strict:
            return frozenset()
        fm = op.properties.get("fastmath")
        out: set[FastMathFlag] = set(fm.data) if fm is not None else set()  # type: ignore[attr-defined]
        if op in self.reductions:
            out.add(FastMathFlag.REASSOC)
        return frozenset(out)

    # ---- values

    def v(self, old: SSAValue) -> SSAValue:
        try:
            return self.values[old]
        except KeyError:
            raise ValueError(f"lower-loop-to-llvm: value {old} used before it was lowered") from None

    def buf(self, old: SSAValue) -> Buf:
        try:
            return self.buffers[old]
        except KeyError:
            raise ValueError(f"lower-loop-to-llvm: buffer {old} used before it was lowered") from None

    def extents(self, t: MemRefType, dynamic: Callable[[int], SSAValue]) -> list[SSAValue]:
        """One i64 per dimension: a constant for a static extent, else ``dynamic(axis)``."""
        return [self.const(d) if d >= 0 else dynamic(k) for k, d in enumerate(t.get_shape())]

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

    # ---- driver

    def run(self, func: FuncFuncOp) -> list[Operation]:
        self.top = func.body.block
        self.lower_block(func.body.block)
        arg_attrs = ArrayAttr([DictionaryAttr({"llvm.noalias": UnitAttr()})] * 5 + [DictionaryAttr({})])
        main = self.finish(ENTRY, llvm.LLVMFunctionType([PTR] * 6, I32), "external", arg_attrs)
        return [*(self.decls[k] for k in sorted(self.decls)), *self.shared.funcs, main]

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
        return llvm.FuncOp(
            name,
            ftype,
            linkage=llvm.LinkageAttr(linkage),
            body=self.region,
            other_props={"no_unwind": UnitAttr(), "arg_attrs": arg_attrs}
            | ({} if inline else {"no_inline": UnitAttr()}),
        )

    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            self.lower_op(op)

    def lower_op(self, op: Operation) -> None:
        name = op.name
        if isinstance(op, loop.ArgOp):
            self.lower_arg(op)
        elif isinstance(op, loop.ResultOp):
            self.lower_result(op)
        elif isinstance(op, loop.AllocOp):
            self.lower_alloc(op)
        elif isinstance(op, loop.DimOp):
            self.values[op.result] = self.buf(op.buffer).extents[op.axis.value.data]
        elif isinstance(op, loop.LoadOp):
            b = self.buf(op.buffer)
            ptr = self.element_ptr(b, [self.v(p) for p in op.positions])
            self.values[op.result] = self.load(ptr, b.elem)
        elif isinstance(op, loop.StoreOp):
            b = self.buf(op.buffer)
            ptr = self.element_ptr(b, [self.v(p) for p in op.positions])
            self.store(self.v(op.value), ptr)
        elif isinstance(op, loop.ForOp):
            if op.parent_block() is self.top:
                self.outline(op)
            else:
                self.lower_for(op)
        elif isinstance(op, loop.WhileOp):
            self.lower_while(op)
        elif isinstance(op, loop.CheckOp):
            self.guard(self.v(op.cond), op.code.value.data, self.v(op.a), self.v(op.b))
        elif isinstance(op, loop.GemmOp):
            self.lower_gemm(op)
        elif isinstance(op, loop.HostCallOp):
            self.lower_host_call(op)
        elif name == "func.return":
            self.emit(llvm.ReturnOp(self.const(0, I32)))
        elif name.startswith(("arith.", "math.")):
            self.lower_scalar(op)
        else:
            raise ValueError(f"lower-loop-to-llvm: cannot lower {name}")

    # ---- loop ops

    def lower_arg(self, op: loop.ArgOp) -> None:
        slot = op.slot.value.data
        t = op.result.type
        assert isinstance(t, MemRefType)
        ptr = self.load(self.gep(self.p_args, slot, PTR) if slot else self.p_args, PTR)
        off = self.layout.arg_offsets[slot]

        def extent(k: int) -> SSAValue:
            at = off + k
            return self.load(self.gep(self.p_arg_shapes, at, I64) if at else self.p_arg_shapes, I64)

        self.buffers[op.result] = Buf(ptr, self.extents(t, extent), llvm_type(t.element_type))

    def lower_result(self, op: loop.ResultOp) -> None:
        slot = op.slot.value.data
        b = self.buf(op.buffer)
        self.store(b.ptr, self.gep(self.p_results, slot, PTR) if slot else self.p_results)
        off = self.layout.result_offsets[slot]
        for k, e in enumerate(b.extents):
            at = off + k
            self.store(e, self.gep(self.p_result_shapes, at, I64) if at else self.p_result_shapes)

    def lower_alloc(self, op: loop.AllocOp) -> None:
        t = op.result.type
        assert isinstance(t, MemRefType)
        dyn = [self.v(e) for e in op.extents]
        extents = [self.const(d) if d >= 0 else dyn[k] for k, d in enumerate(t.get_shape())]
        aid = alloc_id(op, self.shared.allocs)
        self.shared.allocs += 1
        nbytes = self.checked_size(extents, byte_size(t.element_type), aid)
        # An alloc that may be bound to a donated input (fuse.reuse) can alias it: no noalias on that call.
        fn = "fuse_alloc_shared" if aid in self.shared.shared_allocs else "fuse_alloc"
        self.declare(fn, [PTR, I64, I64], PTR, noalias_result=fn == "fuse_alloc")
        ptr = self.call(fn, [self.p_rt, nbytes, self.const(aid)], PTR)
        assert ptr is not None
        as_int = self.val(llvm.PtrToIntOp(ptr, I64))
        self.guard(self.icmp("ne", as_int, self.const(0)), ERR_ALLOC, nbytes, self.const(aid))
        self.buffers[op.result] = Buf(ptr, extents, llvm_type(t.element_type))

    def checked_size(self, extents: Sequence[SSAValue], elem_bytes: int, aid: int) -> SSAValue:
        """``elem_bytes`` times the extents' product, failing with :data:`ERR_SIZE` where it would pass 2^63 - 1.

        Each factor is tested before it is multiplied in (``n <= MAX / e``, one
        unsigned division per dynamic extent, folded for static ones), so the
        product never wraps: a wrapped size would allocate a short buffer that
        the kernel then writes past. Extents are never negative.
        """
        n = self.const(elem_bytes)
        limit = self.const((1 << 63) - 1)
        one = self.const(1)
        for e in extents:
            nonzero = self.val(llvm.SelectOp(self.icmp("eq", e, self.const(0)), one, e))
            room = self.val(llvm.UDivOp(limit, nonzero))
            self.guard(self.icmp("ule", n, room), ERR_SIZE, self.const(aid), self.const(0))
            n = self.mul(n, e, nsw=False)
        return n

    def lower_for(self, op: loop.ForOp) -> None:
        for old, new in zip(op.results, self.counted_for(op, self.v(op.lower), self.v(op.upper), None)):
            self.values[old] = new

    def counted_for(
        self, op: loop.ForOp, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue] | None
    ) -> Sequence[SSAValue]:
        """``op`` from ``lower`` to ``upper`` (its carried values start at ``inits``, else its own); its results."""
        if inits is None:
            inits = [self.v(i) for i in op.inits]
        if any(isinstance(i.type, MemRefType) for i in op.inits):
            raise ValueError("lower-loop-to-llvm: loop.for cannot carry buffers")
        block = op.body.block

        def body(iv: SSAValue, carried: Sequence[SSAValue]) -> Sequence[SSAValue]:
            self.values[block.args[0]] = iv
            for old, new in zip(block.args[1:], carried):
                self.values[old] = new
            for inner in block.ops:
                if isinstance(inner, loop.YieldOp):
                    return [self.v(x) for x in inner.values]
                self.lower_op(inner)
            raise ValueError("lower-loop-to-llvm: loop.for body without loop.yield")

        return self.counted_loop(lower, upper, self.v(op.step), inits, body)

    # ---- outlined loop nests

    def outline(self, op: loop.ForOp) -> None:
        """Lower a top-level loop nest as its own function (and, when it may be split, as a parallel region)."""
        nest = _Nest.build(self, op)
        inits = [self.v(i) for i in op.inits]
        lower, upper = self.v(op.lower), self.v(op.upper)
        if nest.folds is None:
            results = nest.call_serial(lower, upper, inits)
        else:
            results = nest.call_parallel(lower, upper, inits)
        for old, new in zip(op.results, results):
            self.values[old] = new

    def lower_while(self, op: loop.WhileOp) -> None:
        """``loop.while`` → a body block whose arguments (phis) are the carried values, branching back or out."""
        inits = [self.v(i) for i in op.inits]
        types = [v.type for v in inits]
        block = op.body.block
        head = self.new_block(types)
        exit_ = self.new_block(types)
        self.emit(llvm.BrOp(head, *inits))
        self.start(head)
        for old, new in zip(block.args, head.args):
            self.values[old] = new
        for inner in block.ops:
            if isinstance(inner, loop.YieldOp):
                cond, *nexts = (self.v(x) for x in inner.values)
                self.emit(llvm.CondBrOp(cond, head, nexts, exit_, nexts))
                break
            self.lower_op(inner)
        else:
            raise ValueError("lower-loop-to-llvm: loop.while body without loop.yield")
        self.start(exit_)
        for old, new in zip(op.results, exit_.args):
            self.values[old] = new

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

    def lower_gemm(self, op: loop.GemmOp) -> None:
        a, b, c = self.buf(op.a), self.buf(op.bm), self.buf(op.c)
        elem = c.elem
        if isinstance(elem, Float64Type):
            fn = "fuse_dgemm"
        elif isinstance(elem, Float32Type):
            fn = "fuse_sgemm"
        else:
            raise ValueError(f"lower-loop-to-llvm: loop.gemm needs f64 or f32 buffers, got {elem}")
        self.declare(fn, [PTR] * 13, None)
        batch, m, n, k = (self.v(x) for x in (op.batch, op.m, op.n, op.k))
        trans_a, trans_b = op.trans_a.value.data, op.trans_b.value.data
        one = self.const(1)

        def at_least_1(x: SSAValue) -> SSAValue:
            return self.intrinsic("llvm.smax.i64", [x, one], I64, frozenset())

        def int_slot(x: SSAValue) -> SSAValue:
            p = self.entry_alloca(I32, 1)
            self.store(self.val(llvm.TruncOp(x, I32)), p)
            return p

        def char_slot(ch: str) -> SSAValue:
            p = self.entry_alloca(I8, 1)
            self.store(self.const(ord(ch), I8), p)
            return p

        def scalar_slot(x: float) -> SSAValue:
            p = self.entry_alloca(elem, 1)
            self.store(self.const(x, elem), p)
            return p

        # Column-major Cᵀ (n×m) = op(B)ᵀ (n×k) · op(A)ᵀ (k×m); BLAS's "A" is our B and vice versa.
        p_ta, p_tb = char_slot("T" if trans_b else "N"), char_slot("T" if trans_a else "N")
        p_m, p_n, p_k = int_slot(n), int_slot(m), int_slot(k)
        p_lda = int_slot(at_least_1(k if trans_b else n))
        p_ldb = int_slot(at_least_1(m if trans_a else k))
        p_ldc = int_slot(at_least_1(n))
        p_alpha, p_beta = scalar_slot(1.0), scalar_slot(0.0)
        zero = self.const(0)
        stride_a = zero if op.broadcast_a.value.data else self.mul(m, k)
        stride_b = zero if op.broadcast_b.value.data else self.mul(k, n)
        stride_c = self.mul(m, n)

        def body(i: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            pa = self.gep(a.ptr, self.mul(i, stride_a), elem)
            pb = self.gep(b.ptr, self.mul(i, stride_b), elem)
            pc = self.gep(c.ptr, self.mul(i, stride_c), elem)
            self.call(fn, [p_ta, p_tb, p_m, p_n, p_k, p_alpha, pb, p_lda, pa, p_ldb, p_beta, pc, p_ldc], None)
            return []

        self.counted_loop(zero, batch, one, [], body)

    def lower_host_call(self, op: loop.HostCallOp) -> None:
        call_id = host_call_id(op, self.shared.host_calls)
        self.shared.host_calls += 1
        ins = [self.buf(x) for x in op.inputs]
        out_types = [r.type for r in op.outputs]
        assert all(isinstance(t, MemRefType) for t in out_types)
        n_in_ext = sum(len(b.extents) for b in ins)
        n_out_ext = sum(len(t.get_shape()) for t in out_types)  # type: ignore[attr-defined]
        in_ptrs = self.entry_alloca(PTR, len(ins))
        in_shapes = self.entry_alloca(I64, n_in_ext)
        out_ptrs = self.entry_alloca(PTR, len(out_types))
        out_shapes = self.entry_alloca(I64, n_out_ext)
        at = 0
        for k, b in enumerate(ins):
            self.store(b.ptr, self.gep(in_ptrs, k, PTR) if k else in_ptrs)
            for e in b.extents:
                self.store(e, self.gep(in_shapes, at, I64) if at else in_shapes)
                at += 1
        self.declare("fuse_host_call", [PTR, I64, PTR, PTR, PTR, PTR], I32)
        status = self.call(
            "fuse_host_call", [self.p_rt, self.const(call_id), in_ptrs, in_shapes, out_ptrs, out_shapes], I32
        )
        assert status is not None
        wide = self.val(llvm.SExtOp(status, I64))
        self.guard(self.icmp("eq", wide, self.const(0)), ERR_HOST_CALL, self.const(call_id), wide)
        at = 0
        for k, (res, t) in enumerate(zip(op.outputs, out_types)):
            assert isinstance(t, MemRefType)
            ptr = self.load(self.gep(out_ptrs, k, PTR) if k else out_ptrs, PTR)
            extents = []
            for d in t.get_shape():
                extents.append(
                    self.const(d) if d >= 0 else self.load(self.gep(out_shapes, at, I64) if at else out_shapes, I64)
                )
                at += 1
            self.buffers[res] = Buf(ptr, extents, llvm_type(t.element_type))

    # ---- scalar ops

    def lower_scalar(self, op: Operation) -> None:
        name = op.name
        args = [self.v(x) for x in op.operands]
        rt = llvm_type(op.results[0].type) if op.results else None
        out: SSAValue
        if name == "arith.constant":
            value = op.properties.get("value", op.attributes.get("value"))
            assert rt is not None
            if isinstance(value, IntegerAttr):
                out = self.const(value.value.data, rt)
            elif isinstance(value, FloatAttr):
                out = self.const(value.value.data, rt)
            else:
                raise ValueError(f"lower-loop-to-llvm: unsupported constant {value}")
        elif name in _FLOAT_BINOPS:
            out = self.val(_FLOAT_BINOPS[name](args[0], args[1], llvm.FastMathAttr(self.flags(op))))
        elif name == "arith.negf":
            out = self.val(llvm.FNegOp(args[0], llvm.FastMathAttr(self.flags(op))))
        elif name in _INT_BINOPS:
            out = self.val(_INT_BINOPS[name](args[0], args[1]))  # type: ignore[call-arg]
        elif name in _INT_MINMAX:
            assert rt is not None
            out = self.intrinsic(f"{_INT_MINMAX[name]}.{mangle(rt)}", args, rt, frozenset())
        elif name in ("arith.floordivsi", "arith.ceildivsi", "arith.ceildivui"):
            out = self.int_div(name, args[0], args[1])
        elif name == "arith.cmpi":
            pred = op.properties["predicate"]
            assert isinstance(pred, IntegerAttr)
            out = self.val(llvm.ICmpOp(args[0], args[1], IntegerAttr(pred.value.data, I64)))
        elif name == "arith.cmpf":
            pred = op.properties["predicate"]
            assert isinstance(pred, IntegerAttr)
            cmp = llvm.FCmpOp(args[0], args[1], IntegerAttr(pred.value.data, I64))
            if fl := self.flags(op):
                cmp.properties["fastmathFlags"] = llvm.FastMathAttr(fl)
            out = self.val(cmp)
        elif name == "arith.select":
            out = self.val(llvm.SelectOp(args[0], args[1], args[2]))
        elif name in _CASTS:
            assert rt is not None
            out = self.val(_CASTS[name](args[0], rt))  # type: ignore[call-arg]
        elif name in ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui"):
            assert rt is not None
            out = self.int_cast(args[0], rt, signed=name in ("arith.extsi", "arith.index_cast"))
        elif name in _FLOAT_INTRINSICS:
            assert rt is not None
            out = self.intrinsic(f"{_FLOAT_INTRINSICS[name]}.{mangle(rt)}", args, rt, self.flags(op))
        elif name in _LIBM:
            assert rt is not None
            fn = _LIBM[name] + ("f" if isinstance(rt, Float32Type) else "")
            if not isinstance(rt, Float64Type | Float32Type):
                raise ValueError(f"lower-loop-to-llvm: {name} on {rt} is not supported")
            self.declare(fn, [rt], rt)
            res = self.call(fn, args, rt)
            assert res is not None
            out = res
        elif name == "math.rsqrt":
            assert rt is not None
            fl = self.flags(op)
            root = self.intrinsic(f"llvm.sqrt.{mangle(rt)}", args, rt, fl)
            out = self.val(llvm.FDivOp(self.const(1.0, rt), root, llvm.FastMathAttr(fl)))
        elif name == "math.fpowi":
            assert rt is not None
            e = self.int_cast(args[1], I32, signed=True)
            out = self.intrinsic(f"llvm.powi.{mangle(rt)}.i32", [args[0], e], rt, self.flags(op))
        elif name == "math.absi":
            assert rt is not None
            out = self.intrinsic(f"llvm.abs.{mangle(rt)}", [args[0], self.const(0, I1)], rt, frozenset())
        elif name in ("math.ctlz", "math.cttz"):
            assert rt is not None
            base = "llvm.ctlz" if name == "math.ctlz" else "llvm.cttz"
            out = self.intrinsic(f"{base}.{mangle(rt)}", [args[0], self.const(0, I1)], rt, frozenset())
        elif name == "math.ctpop":
            assert rt is not None
            out = self.intrinsic(f"llvm.ctpop.{mangle(rt)}", [args[0]], rt, frozenset())
        else:
            raise ValueError(f"lower-loop-to-llvm: cannot lower {name}")
        self.values[op.results[0]] = out

    def int_cast(self, x: SSAValue, to: Attribute, signed: bool) -> SSAValue:
        assert isinstance(x.type, IntegerType) and isinstance(to, IntegerType)
        src, dst = x.type.width.data, to.width.data
        if src == dst:
            return x
        if src > dst:
            return self.val(llvm.TruncOp(x, to))
        return self.val((llvm.SExtOp if signed else llvm.ZExtOp)(x, to))

    def int_div(self, name: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """``floordivsi``, ``ceildivsi`` and ``ceildivui`` from truncating division and remainder."""
        t = a.type
        zero = self.const(0, t)
        if name == "arith.ceildivui":
            q = self.val(llvm.UDivOp(a, b))
            r = self.val(llvm.URemOp(a, b))
            return self.val(llvm.AddOp(q, self.int_cast(self.icmp("ne", r, zero), t, signed=False)))
        q = self.val(llvm.SDivOp(a, b))
        r = self.val(llvm.SRemOp(a, b))
        nonzero = self.icmp("ne", r, zero)
        r_neg, b_neg = self.icmp("slt", r, zero), self.icmp("slt", b, zero)
        if name == "arith.floordivsi":
            fix = self.val(llvm.AndOp(nonzero, self.icmp("ne", r_neg, b_neg)))
            return self.val(llvm.SubOp(q, self.int_cast(fix, t, signed=False)))
        fix = self.val(llvm.AndOp(nonzero, self.icmp("eq", r_neg, b_neg)))
        return self.val(llvm.AddOp(q, self.int_cast(fix, t, signed=False)))


# --------------------------------------------------------------------------- outlined nests and parallel regions

_FLOAT_FOLDS = ("arith.addf", "arith.mulf")
_FOLDS = (*_FLOAT_FOLDS, "arith.maximumf", "arith.minimumf", "arith.addi", "arith.muli", "arith.ori", "arith.andi")
_FOLDS += ("arith.xori", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui")


def fold_identity(kind: str, t: Attribute) -> int | float:
    """The exact identity of the associative fold ``kind`` on type ``t`` (what a partial accumulator starts from)."""
    if kind == "arith.addf":
        return -0.0
    if kind == "arith.mulf":
        return 1.0
    if kind in ("arith.maximumf", "arith.minimumf"):
        return float("-inf") if kind == "arith.maximumf" else float("inf")
    assert isinstance(t, IntegerType)
    w = t.width.data
    if kind in ("arith.muli",):
        return 1
    if kind in ("arith.andi", "arith.minui"):
        return -1
    if kind == "arith.maxsi":
        return -(2 ** (w - 1))
    if kind == "arith.minsi":
        return 2 ** (w - 1) - 1
    return 0


def fold_kind(op: loop.ForOp, k: int) -> str | None:
    """The op that folds carried value ``k`` of ``op``, if the loop only ever combines it with that one
    associative op and values independent of it (through nested loops too); else None.

    Such a loop may run its iterations in chunks, each from the fold's identity, and combine the chunks'
    results in order afterwards (a reassociation of the same fold).
    """
    block = op.body.block
    acc = block.args[1 + k]
    term = block.last_op
    if not acc.has_one_use() or not isinstance(term, loop.YieldOp):
        return None
    return _fold_chain(term.values[k], acc, block, "") or None


def _fold_chain(cur: SSAValue, acc: SSAValue, block: Block, kind: str) -> str | None:
    if cur is acc:
        return kind
    owner = cur.owner
    if not cur.has_one_use() or not isinstance(owner, Operation) or owner.parent_block() is not block:
        return None
    if isinstance(owner, loop.ForOp):
        idx = list(owner.results).index(cur)
        inner = fold_kind(owner, idx)
        if inner is None or (kind and inner != kind):
            return None
        return _fold_chain(owner.inits[idx], acc, block, inner)
    if owner.name not in _FOLDS or (kind and owner.name != kind):
        return None
    for x in owner.operands:
        found = _fold_chain(x, acc, block, owner.name)
        if found is not None:
            return found
    return None


def _free_values(op: Operation) -> list[SSAValue]:
    """Values used inside ``op``'s region but defined outside it, in first-use order."""
    inside = {id(x) for x in op.walk()}
    seen: set[SSAValue] = set()
    out: list[SSAValue] = []
    for inner in op.walk():
        if inner is op:
            continue
        for x in inner.operands:
            owner = x.owner
            definer = owner.parent_op() if isinstance(owner, Block) else owner
            if definer is not None and id(definer) in inside:
                continue
            if x not in seen:
                seen.add(x)
                out.append(x)
    return out


def _const_op(v: SSAValue) -> llvm.ConstantOp | None:
    return v.owner if isinstance(v.owner, llvm.ConstantOp) else None


@dataclass
class _Nest:
    """A top-level loop nest outlined as ``i32 @fuse_nestK(lo, hi, err, out, inits..., [rt], values...)``.

    The function runs the outermost loop over ``[lo, hi)`` with its carried
    values starting at ``inits``, stores their final values in the 8-byte slots
    of ``out``, and returns 0, or an error code after filling ``err``. Buffers
    come in as ``noalias`` pointers and the extents and scalars the nest reads
    as values; constants are rematerialised inside. ``folds`` is None for a
    nest that runs serially, else the fold of each carried value (empty for a
    parallel loop without any): such a nest may be split into chunks.
    """

    parent: _Lowering
    op: loop.ForOp
    name: str
    passed: list[SSAValue]
    carried: list[Attribute]
    needs_rt: bool
    folds: list[str] | None
    work: list[SSAValue]

    @staticmethod
    def build(parent: _Lowering, op: loop.ForOp) -> _Nest:
        shared = parent.shared
        name = f"fuse_nest{sum(1 for f in shared.funcs if not f.sym_name.data.endswith('_chunk'))}"
        if any(isinstance(i.type, MemRefType) for i in op.inits):
            raise ValueError("lower-loop-to-llvm: loop.for cannot carry buffers")
        carried = [llvm_type(i.type) for i in op.inits]
        inner_ops = list(op.walk())
        needs_rt = any(isinstance(x, loop.AllocOp | loop.HostCallOp | loop.GemmOp) for x in inner_ops)
        free = _free_values(op)
        passed: list[SSAValue] = []
        known: set[SSAValue] = set()

        def need(v: SSAValue) -> None:
            if _const_op(v) is None and v not in known:
                known.add(v)
                passed.append(v)

        for x in free:
            if isinstance(x.type, MemRefType):
                b = parent.buf(x)
                need(b.ptr)
                for e in b.extents:
                    need(e)
            else:
                need(parent.v(x))
        step = parent.v(op.step)
        need(step)
        head: list[Attribute] = [I64, I64, PTR, PTR, *carried] + ([PTR] if needs_rt else [])
        types = head + [v.type for v in passed]
        child = _Lowering(shared, types, main=False)
        args = child.entry.args
        lo, hi, child.p_err, out = args[:4]
        inits = list(args[4 : 4 + len(carried)])
        if needs_rt:
            child.p_rt = args[4 + len(carried)]
        local_of = dict(zip(passed, args[len(head) :]))

        def local(v: SSAValue) -> SSAValue:
            c = _const_op(v)
            if c is None:
                return local_of[v]
            value = c.value
            assert isinstance(value, IntegerAttr | FloatAttr)
            return child.const(value.value.data, c.result.type)

        for x in free:
            if isinstance(x.type, MemRefType):
                b = parent.buf(x)
                child.buffers[x] = Buf(local(b.ptr), [local(e) for e in b.extents], b.elem)
            else:
                child.values[x] = local(parent.v(x))
        child.values[op.step] = local(step)
        results = child.counted_for(op, lo, hi, inits)
        for k, r in enumerate(results):
            child.store(r, child.slot(out, k))
        child.emit(llvm.ReturnOp(child.const(0, I32)))
        noalias = DictionaryAttr({"llvm.noalias": UnitAttr()})
        plain = DictionaryAttr({})
        buffer_ptrs = {parent.buf(x).ptr for x in free if isinstance(x.type, MemRefType)}
        attrs = [plain, plain, noalias, noalias] + [plain] * (len(head) - 4)
        attrs += [noalias if v in buffer_ptrs else plain for v in passed]
        shared.funcs.append(
            child.finish(name, llvm.LLVMFunctionType(types, I32), "internal", ArrayAttr(attrs), inline=False)
        )

        folds: list[str] | None = None
        if shared.threads > 1 and not needs_rt and _is_const(step, 1):
            kinds = [fold_kind(op, k) for k in range(len(carried))]
            stores = any(isinstance(x, loop.StoreOp) for x in inner_ops)
            if all(kind is not None for kind in kinds) and (op.parallel is not None or (kinds and not stores)):
                if not (shared.strict and any(kind in _FLOAT_FOLDS for kind in kinds)):
                    folds = [kind for kind in kinds if kind is not None]
        work: list[SSAValue] = []
        if folds is not None:
            for x in inner_ops:
                # An inner loop over [0, free extent): its lower bound may be computed inside the nest.
                if (
                    isinstance(x, loop.ForOp)
                    and x is not op
                    and x.upper in free
                    and x.lower in free
                    and _is_const(parent.v(x.lower), 0)
                ):
                    w = parent.v(x.upper)
                    if w not in work:
                        work.append(w)
        return _Nest(parent, op, name, passed, carried, needs_rt, folds, work)

    def call_serial(self, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue]) -> list[SSAValue]:
        """Run the whole nest on this thread."""
        p = self.parent
        out = p.entry_alloca(I64, len(self.carried))
        args = [lower, upper, p.p_err, out, *inits] + ([p.p_rt] if self.needs_rt else []) + self.passed
        rc = p.call(self.name, args, I32)
        assert rc is not None
        p.check_rc(rc)
        return [p.load(p.slot(out, k), t) for k, t in enumerate(self.carried)]

    def call_parallel(self, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue]) -> list[SSAValue]:
        """Split the nest into one chunk per thread when there is enough work, else into one chunk.

        Chunk ``c`` of ``n`` runs iterations ``[lo + trip*c/n, lo + trip*(c+1)/n)``
        from the folds' identities; ``fuse_parallel_for`` reports the first
        failing chunk's error (in chunk order), and the partial results are
        folded in chunk order. With one chunk ``fuse_parallel_for`` just calls
        it: a small call costs a few stores and an indirect call, no thread.
        """
        p, shared = self.parent, self.parent.shared
        threads = shared.threads
        assert self.folds is not None
        trip = p.val(llvm.SubOp(upper, lower))
        work = trip
        for w in self.work:
            work = p.mul(work, w, nsw=False)
        enough = p.val(llvm.AndOp(p.icmp("sge", work, p.const(shared.parallel_min)), p.icmp("sgt", trip, p.const(1))))
        nacc = len(self.carried)
        part_off = 3 + len(self.passed)
        env = p.entry_alloca(I64, part_off + threads * nacc)
        split = p.intrinsic("llvm.smin.i64", [trip, p.const(threads)], I64, frozenset())
        chunks = p.val(llvm.SelectOp(enough, split, p.const(1)))
        for k, v in enumerate([lower, upper, chunks, *self.passed]):
            p.store(v, p.slot(env, k))
        chunk_fn = self.chunk_function(part_off)
        p.declare("fuse_parallel_for", [PTR, PTR, I64, PTR], I32)
        rc = p.call("fuse_parallel_for", [p.val(llvm.AddressOfOp(chunk_fn, PTR)), env, chunks, p.p_err], I32)
        assert rc is not None
        p.check_rc(rc)

        def fold(c: SSAValue, accs: Sequence[SSAValue]) -> Sequence[SSAValue]:
            at = p.add(p.mul(c, p.const(nacc)), p.const(part_off))
            out = []
            for k, (kind, acc, t) in enumerate(zip(self.folds or [], accs, self.carried)):
                part = p.load(p.slot(env, p.add(at, p.const(k)) if k else at), t)
                out.append(_fold(p, kind, acc, part))
            return out

        return list(p.counted_loop(p.const(0), chunks, p.const(1), list(inits), fold)) if nacc else []

    def chunk_function(self, part_off: int) -> str:
        """``i32 @fuse_nestK_chunk(env, c, err)``: run chunk ``c`` with the values stored in ``env``."""
        shared = self.parent.shared
        t = _Lowering(shared, [PTR, I64, PTR], main=False)
        env, c, err = t.entry.args
        lo0, hi0, n = (t.load(t.slot(env, k), I64) for k in range(3))
        trip = t.val(llvm.SubOp(hi0, lo0))
        lo = t.add(lo0, t.val(llvm.SDivOp(t.mul(trip, c), n)))
        hi = t.add(lo0, t.val(llvm.SDivOp(t.mul(trip, t.add(c, t.const(1))), n)))
        nacc = len(self.carried)
        out = t.slot(env, t.add(t.mul(c, t.const(nacc)), t.const(part_off))) if nacc else env
        assert self.folds is not None
        inits = [t.const(fold_identity(kind, ty), ty) for kind, ty in zip(self.folds, self.carried)]
        values = [t.load(t.slot(env, 3 + k), v.type) for k, v in enumerate(self.passed)]
        rc = t.call(self.name, [lo, hi, err, out, *inits, *values], I32)
        assert rc is not None
        t.emit(llvm.ReturnOp(rc))
        name = f"{self.name}_chunk"
        attrs = ArrayAttr([DictionaryAttr({"llvm.noalias": UnitAttr()}), DictionaryAttr({}), DictionaryAttr({})])
        shared.funcs.append(t.finish(name, llvm.LLVMFunctionType([PTR, I64, PTR], I32), "internal", attrs))
        return name


def _fold(p: _Lowering, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
    """``a`` folded with ``b`` by the arith op ``kind`` (as lowered in a loop body)."""
    if kind in _FLOAT_BINOPS:
        flags = frozenset() if p.strict else frozenset({FastMathFlag.REASSOC})
        return p.val(_FLOAT_BINOPS[kind](a, b, llvm.FastMathAttr(flags)))
    if kind in _FLOAT_INTRINSICS:
        return p.intrinsic(f"{_FLOAT_INTRINSICS[kind]}.{mangle(a.type)}", [a, b], a.type, frozenset())
    if kind in _INT_MINMAX:
        return p.intrinsic(f"{_INT_MINMAX[kind]}.{mangle(a.type)}", [a, b], a.type, frozenset())
    return p.val(_INT_BINOPS[kind](a, b))  # type: ignore[call-arg]


def host_call_id(op: loop.HostCallOp, position: int) -> int:
    """The index of a host call into ``fuse.host_calls``: its ``id`` attribute, else its position in walk order."""
    a = op.attributes.get("id")
    return a.value.data if isinstance(a, IntegerAttr) else position


def alloc_id(op: loop.AllocOp, position: int) -> int:
    """The arena slot of a ``loop.alloc`` (passed to ``fuse_alloc``): its ``id`` attribute, else its walk position."""
    a = op.attributes.get("id")
    return a.value.data if isinstance(a, IntegerAttr) else position


def reuse_table(module: ModuleOp) -> list[tuple[int, str]]:
    """The ``fuse.reuse`` entries of a loop-level module: (alloc id, input name) pairs a donated input may back."""
    attr = module.attributes.get("fuse.reuse")
    out: list[tuple[int, str]] = []
    if isinstance(attr, ArrayAttr):
        for entry in attr.data:
            parts = entry.data if isinstance(entry, ArrayAttr) else ()
            if len(parts) != 2 or not isinstance(parts[0], IntegerAttr) or not isinstance(parts[1], StringAttr):
                raise ValueError(f"fuse.reuse: expected [alloc_id, input_name] entries, got {entry}")
            out.append((parts[0].value.data, parts[1].data))
    return out


def _entry_func(module: ModuleOp) -> FuncFuncOp:
    for op in module.body.block.ops:
        if isinstance(op, FuncFuncOp) and op.sym_name.data == ENTRY:
            return op
    raise ValueError(f"lower-loop-to-llvm: the module has no func.func @{ENTRY}")


def lower_module(module: ModuleOp, strict: bool = False, threads: int = 1, parallel_min: int = PARALLEL_MIN) -> None:
    """Replace the loop-level ``fuse_main`` of ``module`` (in place) by its llvm-dialect form and declarations.

    Each top-level loop nest becomes its own internal function; with
    ``threads`` > 1 the parallel ones (and full reductions by one associative
    op) become regions split over that many threads when their work reaches
    ``parallel_min`` iterations.
    """
    func = _entry_func(module)
    if func.function_type.inputs.data or func.function_type.outputs.data:
        raise ValueError(f"lower-loop-to-llvm: func.func @{ENTRY} must take and return nothing")
    shared = _Shared(
        abi_layout(module),
        strict,
        reduction_ops(func),
        threads,
        parallel_min,
        shared_allocs=frozenset(k for k, _ in reuse_table(module)),
    )
    new_ops = _Lowering(shared).run(func)
    block = module.body.block
    for old in list(block.ops):
        old.detach()
        old.erase(safe_erase=False)
    for op in new_ops:
        block.add_op(op)


@register_pass
@dataclass(frozen=True)
class LowerLoopToLLVM(FusePass):
    """Lower the loop level to the llvm dialect: ``llvm.func @fuse_main`` implementing the native ABI.

    Buffers become pointers plus extents, loops become blocks with phis,
    checks become branches to error returns, ``loop.gemm`` calls BLAS and
    ``loop.host_call`` calls back into the runtime; float adds and muls that
    update a loop-carried accumulator get ``reassoc`` so LLVM can vectorise
    the reduction (none with ``strict``). Each top-level loop nest becomes its
    own function; with ``threads`` > 1, parallel nests and full reductions by
    one associative op run through ``fuse_parallel_for`` when their work
    reaches ``parallel-min`` (docs/threads.md).
    """

    name = "lower-loop-to-llvm"
    level: ClassVar[str] = "loop"
    example: ClassVar[str | None] = """\
builtin.module attributes {fuse.args = [["x", "input"]], fuse.results = [["s", "export"]]} {
  func.func @fuse_main() {
    %x = loop.arg 0 : i64 "x" : memref<?xf64>
    %n = loop.dim %x, 0 : i64 : memref<?xf64>
    %s = loop.alloc() : memref<f64>
    %zero = arith.constant 0.000000e+00 : f64
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %sum = loop.for %c0 to %n step %c1 iter_args(%zero : f64) -> f64 {
    ^bb0(%i: index, %acc: f64):
      %v = loop.load %x[%i] : memref<?xf64> -> f64
      %next = arith.addf %acc, %v : f64
      loop.yield %next : f64
    }
    loop.store %sum, %s[] : f64, memref<f64>
    loop.result %s, 0 : i64 "s" : memref<f64>
    func.return
  }
}
"""
    strict: bool = option(False, help="emit no fast-math flags at all (not even reassoc on reductions)")
    threads: int = option(1, help="split parallel loop nests over this many threads (1: none)")
    parallel_min: int = option(PARALLEL_MIN, help="least work (loop iterations) for which a nest is split")

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        lower_module(module, strict=self.strict, threads=self.threads, parallel_min=self.parallel_min)
        return True
