"""A small builder of scalar arith/math ops for the vector-math expansions.

Every expansion in :mod:`fuse_mlir.mathlib` is straight-line code: float
arithmetic, ``math.fma`` (``llvm.fma``: one instruction where the CPU has FMA,
an exact libm ``fma`` otherwise), integer bit manipulation through
``arith.bitcast``, ``mathx.ldexp`` (:mod:`.ops`) for the final scale by 2^n and
``arith.select`` in place of branches, so LLVM's loop vectoriser turns a loop
calling it into SIMD code. :class:`Emitter` collects
the ops in order; the caller inserts them before the op being replaced.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import Float32Type, Float64Type, FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import Operation, SSAValue

from fuse_mlir.mathlib.ops import LdexpOp

F64 = Float64Type()
F32 = Float32Type()
I64 = IntegerType(64)
I32 = IntegerType(32)


class Emitter:
    """Appends scalar ops to a list; every method returns the new value. Floats are float64 with int64
    bit patterns, or with ``single`` float32 with int32 (for the few builders with a native float32 form)."""

    def __init__(self, single: bool = False) -> None:
        self.ops: list[Operation] = []
        self.f: Float32Type | Float64Type = F32 if single else F64
        self.i = I32 if single else I64
        self.mant = 23 if single else 52  # explicit mantissa bits
        self.bias = 127 if single else 1023
        self.magic = 1.5 * 2.0**self.mant  # (x + magic) - magic rounds x to an integer (|x| < 2^(mant-1))

    def op(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def replace(self, op: Operation, result: SSAValue) -> None:
        """Insert the collected ops before ``op``, give ``op``'s uses ``result`` instead, and erase ``op``."""
        block = op.parent_block()
        assert block is not None
        for new in self.ops:
            block.insert_op_before(new, op)
        op.results[0].replace_all_uses_with(result)
        op.detach()
        op.erase()

    # -- constants -------------------------------------------------------------
    def c(self, v: float) -> SSAValue:
        return self.op(arith.ConstantOp(FloatAttr(float(v), self.f)))

    def ic(self, v: int) -> SSAValue:
        return self.op(arith.ConstantOp(IntegerAttr(v, self.i)))

    # -- float arithmetic ------------------------------------------------------
    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.DivfOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.op(arith.NegfOp(a))

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        """a·b + c rounded once."""
        return self.op(xmath.FmaOp(a, b, c))

    def abs(self, a: SSAValue) -> SSAValue:
        return self.op(xmath.AbsFOp(a))

    def copysign(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(xmath.CopySignOp(a, b))

    def min(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """The smaller; NaN if either is NaN (``llvm.minimum``)."""
        return self.op(arith.MinimumfOp(a, b))

    def max(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.MaximumfOp(a, b))

    def clamp(self, x: SSAValue, lo: float, hi: float) -> SSAValue:
        return self.min(self.max(x, self.c(lo)), self.c(hi))

    def clamp_keep_nan(self, x: SSAValue, lo: float, hi: float) -> SSAValue:
        """x limited to [lo, hi], NaN kept, by compare-and-select (one ``vmaxpd``/``vminpd`` each on x86)."""
        low = self.c(lo)
        t = self.select(self.cmp("olt", x, low), low, x)
        high = self.c(hi)
        return self.select(self.cmp("ogt", t, high), high, t)

    def roundeven(self, x: SSAValue) -> SSAValue:
        """x rounded to the nearest integer, ties to even, any magnitude (``llvm.roundeven``)."""
        return self.op(xmath.RoundEvenOp(x))

    def rint(self, x: SSAValue) -> SSAValue:
        """x rounded to the nearest integer (ties to even), for |x| < 2^51 (float32: 2^22); the magic-number
        trick."""
        m = self.c(self.magic)
        return self.sub(self.add(x, m), m)

    def horner(self, x: SSAValue, coeffs: Sequence[float]) -> SSAValue:
        """Σ coeffs[k]·x^k by Horner's rule with fused multiply-adds."""
        p = self.c(coeffs[-1])
        for k in range(len(coeffs) - 2, -1, -1):
            p = self.fma(p, x, self.c(coeffs[k]))
        return p

    def pairwise_horner(self, x: SSAValue, x2: SSAValue, coeffs: Sequence[float]) -> SSAValue:
        """Σ coeffs[k]·x^k as pairs (c[2i] + c[2i+1]·x, independent) joined by Horner's rule in ``x2`` = x²:
        the multiply-adds of Horner's rule and no more (Estrin's x⁴, x⁸ cost multiplies on the same ports),
        with half its dependency chain, so the out-of-order core overlaps more of a long polynomial (exp's
        degree 13)."""
        terms = [self.c(c) for c in coeffs]
        pairs = [
            self.fma(terms[k + 1], x, terms[k]) if k + 1 < len(terms) else terms[k] for k in range(0, len(terms), 2)
        ]
        p = pairs[-1]
        for t in reversed(pairs[:-1]):
            p = self.fma(p, x2, t)
        return p

    # -- error-free transformations ----------------------------------------------
    def two_prod(self, a: SSAValue, b: SSAValue) -> tuple[SSAValue, SSAValue]:
        """(p, e) with p = fl(a·b) and p + e = a·b exactly (an fma residual)."""
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))

    def fast_two_sum(self, a: SSAValue, b: SSAValue) -> tuple[SSAValue, SSAValue]:
        """(s, e) with s = fl(a + b), s + e = a + b exactly, for |a| ≥ |b| (or a = 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_sum(self, a: SSAValue, b: SSAValue) -> tuple[SSAValue, SSAValue]:
        """(s, e) with s = fl(a + b) and s + e = a + b exactly, any magnitudes (Knuth)."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        e = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, e

    # -- comparisons and selection -----------------------------------------------
    def cmp(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """An i1: ``arith.cmpf`` with predicate ``pred`` (olt, oeq, une, uno, ...)."""
        return self.op(arith.CmpfOp(a, b, pred))

    def icmp(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.CmpiOp(a, b, pred))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.SelectOp(cond, a, b))

    def and_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.AndIOp(a, b))

    def or_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.OrIOp(a, b))

    def not_(self, a: SSAValue) -> SSAValue:
        return self.op(arith.XOrIOp(a, self.op(arith.ConstantOp(IntegerAttr(1, IntegerType(1))))))

    def isnan(self, x: SSAValue) -> SSAValue:
        return self.cmp("uno", x, x)

    # -- integers and bits ---------------------------------------------------------
    def bits(self, x: SSAValue) -> SSAValue:
        return self.op(arith.BitcastOp(x, self.i))

    def from_bits(self, i: SSAValue) -> SSAValue:
        return self.op(arith.BitcastOp(i, self.f))

    def iadd(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.AddiOp(a, b))

    def isub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.SubiOp(a, b))

    def iand(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.AndIOp(a, b))

    def shl(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.ShLIOp(a, b))

    def ashr(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.ShRSIOp(a, b))

    def to_int(self, x: SSAValue) -> SSAValue:
        """An integral float as an integer of its width (truncating)."""
        return self.op(arith.FPToSIOp(x, self.i))

    def to_float(self, i: SSAValue) -> SSAValue:
        return self.op(arith.SIToFPOp(i, self.f))

    def pow2(self, k: SSAValue) -> SSAValue:
        """2^k for an integer k in the normal exponent range ([-1022, 1023]; float32 [-126, 127]), built
        from exponent bits."""
        return self.from_bits(self.shl(self.iadd(k, self.ic(self.bias)), self.ic(self.mant)))

    def scale(self, y: SSAValue, n: SSAValue) -> SSAValue:
        """y·2^n for an integral n with |n| ≤ 2044 (float32: 252), in two halves so neither overflows and the
        result rounds once (also into the subnormal range) when y·2^(n//2) is exact."""
        return self.scale_int(y, self.to_int(n))

    def scale_int(self, y: SSAValue, ni: SSAValue) -> SSAValue:
        """:meth:`scale` for an integer ``ni`` (of the float's width): one ``mathx.ldexp``, which lowers to
        ``vscalefpd`` on AVX-512 and to the two-half product elsewhere. A NaN ``y`` stays NaN whatever ``ni``
        holds."""
        n32 = self.op(arith.TruncIOp(ni, I32)) if self.i != I32 else ni
        return self.op(LdexpOp(y, n32))

    def ldexp_halves(self, y: SSAValue, n32: SSAValue) -> SSAValue:
        """``mathx.ldexp``'s portable form: y·2^(n>>1)·2^(n-(n>>1)), each power of two built from exponent bits
        (:meth:`pow2`), so it vectorises on any CPU; rounded once inside the op's documented domain."""
        ni = self.op(arith.ExtSIOp(n32, self.i)) if self.i != I32 else n32
        n1 = self.ashr(ni, self.ic(1))
        n2 = self.isub(ni, n1)
        return self.mul(self.mul(y, self.pow2(n1)), self.pow2(n2))
