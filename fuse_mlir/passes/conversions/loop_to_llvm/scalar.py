"""The arith/math → llvm op table: one lowering per op class, as in xDSL's ``backend/llvm/convert_op.py``.

:data:`LOWERINGS` maps each ``arith``/``math``/``mathx`` op class the loop level uses to
a function that builds its llvm form: llvm arithmetic, casts, type-mangled
intrinsic calls (``llvm.exp.f64``, ``llvm.maximum.f32``, …) or libm calls for
the float functions LLVM has no intrinsic for. A class missing from the table
is an op the lowering refuses (a ``ValueError`` naming it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from xdsl.dialects import arith, llvm, math
from xdsl.dialects.builtin import Float32Type, Float64Type, FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue

from fuse_mlir.dialects.llvmx import FPToSIOp, FPToUIOp, UIToFPOp, mangle
from fuse_mlir.dialects.types import I1, I32, I64
from fuse_mlir.mathlib.ops import LdexpOp
from fuse_mlir.passes.conversions.loop_to_llvm.builder import FunctionBuilder

# Float intrinsics overloaded on one type: name suffix is that type.
FLOAT_INTRINSICS: dict[type[Operation], str] = {
    math.ExpOp: "llvm.exp",
    math.Exp2Op: "llvm.exp2",
    math.LogOp: "llvm.log",
    math.Log2Op: "llvm.log2",
    math.Log10Op: "llvm.log10",
    math.SqrtOp: "llvm.sqrt",
    math.SinOp: "llvm.sin",
    math.CosOp: "llvm.cos",
    math.TanOp: "llvm.tan",
    math.TanhOp: "llvm.tanh",
    math.SinhOp: "llvm.sinh",
    math.CoshOp: "llvm.cosh",
    math.AsinOp: "llvm.asin",
    math.AcosOp: "llvm.acos",
    math.AtanOp: "llvm.atan",
    math.Atan2Op: "llvm.atan2",
    math.AbsFOp: "llvm.fabs",
    math.FloorOp: "llvm.floor",
    math.CeilOp: "llvm.ceil",
    math.RoundOp: "llvm.round",
    math.RoundEvenOp: "llvm.roundeven",
    math.TruncOp: "llvm.trunc",
    math.CopySignOp: "llvm.copysign",
    math.FmaOp: "llvm.fma",
    math.PowFOp: "llvm.pow",
    arith.MaximumfOp: "llvm.maximum",
    arith.MinimumfOp: "llvm.minimum",
    arith.MaxnumfOp: "llvm.maxnum",
    arith.MinnumfOp: "llvm.minnum",
}
# Float functions LLVM has no intrinsic for: libm calls (``name`` for f64, ``namef`` for f32).
LIBM: dict[type[Operation], str] = {
    math.ErfOp: "erf",
    math.Log1pOp: "log1p",
    math.ExpM1Op: "expm1",
    math.CbrtOp: "cbrt",
    math.AsinhOp: "asinh",
    math.AcoshOp: "acosh",
    math.AtanhOp: "atanh",
}
INT_MINMAX: dict[type[Operation], str] = {
    arith.MaxSIOp: "llvm.smax",
    arith.MinSIOp: "llvm.smin",
    arith.MaxUIOp: "llvm.umax",
    arith.MinUIOp: "llvm.umin",
}
INT_BINOPS: dict[type[Operation], Callable[[SSAValue, SSAValue], Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
}
FLOAT_BINOPS: dict[type[Operation], type[llvm.AbstractFloatArithOp]] = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}
CASTS: dict[type[Operation], Callable[[SSAValue, Attribute], Operation]] = {
    arith.ExtFOp: llvm.FPExtOp,
    arith.TruncFOp: llvm.FPTruncOp,
    arith.SIToFPOp: llvm.SIToFPOp,
    arith.UIToFPOp: UIToFPOp,
    arith.FPToSIOp: FPToSIOp,
    arith.FPToUIOp: FPToUIOp,
    arith.BitcastOp: llvm.BitcastOp,
}
INT_CASTS: dict[type[Operation], bool] = {
    arith.ExtSIOp: True,
    arith.ExtUIOp: False,
    arith.TruncIOp: False,
    arith.IndexCastOp: True,
}
"""Integer width changes, by whether they extend with the sign."""

V = TypeVar("V")


def by_name(table: Mapping[type[Operation], V]) -> dict[str, V]:
    """``table`` keyed by the ops' names (``arith.addf``): for code that names a fold by its op."""
    return {cls.name: v for cls, v in table.items()}


ScalarLowering = Callable[[FunctionBuilder, Any, list[SSAValue], Attribute], SSAValue]
"""``(builder, op, lowered operands, llvm result type) -> lowered result``."""


def _constant(b: FunctionBuilder, op: arith.ConstantOp, args: list[SSAValue], rt: Attribute) -> SSAValue:
    value = op.properties.get("value", op.attributes.get("value"))
    if isinstance(value, IntegerAttr):
        return b.const(value.value.data, rt)
    if isinstance(value, FloatAttr):
        return b.const(value.value.data, rt)
    raise ValueError(f"lower-loop-to-llvm: unsupported constant {value}")


def _float_binop(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.val(FLOAT_BINOPS[type(op)](args[0], args[1], llvm.FastMathAttr(b.flags(op))))


def _negf(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.val(llvm.FNegOp(args[0], llvm.FastMathAttr(b.flags(op))))


def _int_binop(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.val(INT_BINOPS[type(op)](args[0], args[1]))


def _int_minmax(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.intrinsic(f"{INT_MINMAX[type(op)]}.{mangle(rt)}", args, rt, frozenset())


def _int_div(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    """``floordivsi``, ``ceildivsi`` and ``ceildivui`` from truncating division and remainder."""
    a, d = args[0], args[1]
    t = a.type
    zero = b.const(0, t)
    if isinstance(op, arith.CeilDivUIOp):
        q = b.val(llvm.UDivOp(a, d))
        r = b.val(llvm.URemOp(a, d))
        return b.val(llvm.AddOp(q, b.int_cast(b.icmp("ne", r, zero), t, signed=False)))
    q = b.val(llvm.SDivOp(a, d))
    r = b.val(llvm.SRemOp(a, d))
    nonzero = b.icmp("ne", r, zero)
    r_neg, d_neg = b.icmp("slt", r, zero), b.icmp("slt", d, zero)
    if isinstance(op, arith.FloorDivSIOp):
        fix = b.val(llvm.AndOp(nonzero, b.icmp("ne", r_neg, d_neg)))
        return b.val(llvm.SubOp(q, b.int_cast(fix, t, signed=False)))
    fix = b.val(llvm.AndOp(nonzero, b.icmp("eq", r_neg, d_neg)))
    return b.val(llvm.AddOp(q, b.int_cast(fix, t, signed=False)))


def _cmpi(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    pred = op.properties["predicate"]
    assert isinstance(pred, IntegerAttr)
    return b.val(llvm.ICmpOp(args[0], args[1], IntegerAttr(pred.value.data, I64)))


def _cmpf(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    pred = op.properties["predicate"]
    assert isinstance(pred, IntegerAttr)
    cmp = llvm.FCmpOp(args[0], args[1], IntegerAttr(pred.value.data, I64))
    if fl := b.flags(op):
        cmp.properties["fastmathFlags"] = llvm.FastMathAttr(fl)
    return b.val(cmp)


def _select(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.val(llvm.SelectOp(args[0], args[1], args[2]))


def _cast(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.val(CASTS[type(op)](args[0], rt))


def _int_cast(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.int_cast(args[0], rt, signed=INT_CASTS[type(op)])


def _float_intrinsic(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.intrinsic(f"{FLOAT_INTRINSICS[type(op)]}.{mangle(rt)}", args, rt, b.flags(op))


def _libm(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    fn = LIBM[type(op)] + ("f" if isinstance(rt, Float32Type) else "")
    if not isinstance(rt, Float64Type | Float32Type):
        raise ValueError(f"lower-loop-to-llvm: {op.name} on {rt} is not supported")
    b.declare(fn, [rt], rt)
    res = b.call(fn, args, rt)
    assert res is not None
    return res


def _rsqrt(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    fl = b.flags(op)
    root = b.intrinsic(f"llvm.sqrt.{mangle(rt)}", args, rt, fl)
    return b.val(llvm.FDivOp(b.const(1.0, rt), root, llvm.FastMathAttr(fl)))


def _fpowi(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    e = b.int_cast(args[1], I32, signed=True)
    return b.intrinsic(f"llvm.powi.{mangle(rt)}.i32", [args[0], e], rt, b.flags(op))


def _ldexp(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    """``mathx.ldexp`` as ``llvm.ldexp`` (AVX-512's ``vscalefpd``). Only hosts that have it see the op here:
    elsewhere :func:`~fuse_mlir.passes.conversions.lower_loop_to_llvm.lower_module` first rewrites it into its
    portable arith form (:meth:`~fuse_mlir.mathlib.emitter.Emitter.ldexp_halves`)."""
    return b.intrinsic(f"llvm.ldexp.{mangle(rt)}.i32", args, rt, frozenset())


def _absi(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.intrinsic(f"llvm.abs.{mangle(rt)}", [args[0], b.const(0, I1)], rt, frozenset())


def _count_zeros(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    base = "llvm.ctlz" if isinstance(op, math.CountLeadingZerosOp) else "llvm.cttz"
    return b.intrinsic(f"{base}.{mangle(rt)}", [args[0], b.const(0, I1)], rt, frozenset())


def _ctpop(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute) -> SSAValue:
    return b.intrinsic(f"llvm.ctpop.{mangle(rt)}", [args[0]], rt, frozenset())


LOWERINGS: dict[type[Operation], ScalarLowering] = {
    arith.ConstantOp: _constant,
    **dict.fromkeys(FLOAT_BINOPS, _float_binop),
    arith.NegfOp: _negf,
    **dict.fromkeys(INT_BINOPS, _int_binop),
    **dict.fromkeys(INT_MINMAX, _int_minmax),
    **dict.fromkeys((arith.FloorDivSIOp, arith.CeilDivSIOp, arith.CeilDivUIOp), _int_div),
    arith.CmpiOp: _cmpi,
    arith.CmpfOp: _cmpf,
    arith.SelectOp: _select,
    **dict.fromkeys(CASTS, _cast),
    **dict.fromkeys(INT_CASTS, _int_cast),
    **dict.fromkeys(FLOAT_INTRINSICS, _float_intrinsic),
    **dict.fromkeys(LIBM, _libm),
    math.RsqrtOp: _rsqrt,
    math.FPowIOp: _fpowi,
    LdexpOp: _ldexp,
    math.AbsIOp: _absi,
    **dict.fromkeys((math.CountLeadingZerosOp, math.CountTrailingZerosOp), _count_zeros),
    math.CtPopOp: _ctpop,
}
"""How each arith/math op class becomes llvm ops."""


def lower_scalar_op(b: FunctionBuilder, op: Operation, args: list[SSAValue], rt: Attribute | None) -> SSAValue:
    """The llvm value of the scalar op ``op`` whose operands lowered to ``args`` (``rt``: its llvm result type)."""
    lowering = LOWERINGS.get(type(op))
    if lowering is None:
        raise ValueError(f"lower-loop-to-llvm: cannot lower {op.name}")
    assert rt is not None
    return lowering(b, op, args, rt)
