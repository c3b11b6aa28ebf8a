"""exp and expm1 (and the double-double exp that pow ends with), as branch-free float64 code.

All share one range reduction: n = round(x / ln2), r = x - n·ln2 with ln2
split in two (Cody–Waite: ln2_hi has 31 significant bits, so n·ln2_hi is
exact and x - n·ln2_hi is exact), so exp(x) = 2^n · exp(r) with |r| ≤ ln2/2.
``exp`` takes r as one fused multiply-add more (rounded once); expm1 and pow's
``exp_dd`` also keep the reduction's rounding error r_lo.
The 2^n scale is applied in two halves (:meth:`Emitter.scale`): no
intermediate overflows and results in the subnormal range round once.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import F32, Emitter

LN2_HI = 6.93147180369123816490e-01  # 0x3fe62e42fee00000
LN2_LO = 1.90821492927058770002e-10  # ln2 - LN2_HI
INV_LN2 = 1.0 / math.log(2.0)
# exp's argument clamp: beyond it exp is already inf (710 > ln(DBL_MAX)) or 0 (-750 < ln(2^-1075)).
EXP_LO, EXP_HI = -750.0, 710.0
MAGIC_BITS = int(np.array(1.5 * 2.0**52).view(np.int64))
"""The bits of the rounding constant 1.5·2^52: ``bits(magic + n) - MAGIC_BITS`` is the integer n."""


def _taylor(first: int, last: int) -> list[float]:
    """The coefficients 1/k! for k = first..last (index 0 is k = first)."""
    return [1.0 / math.factorial(k) for k in range(first, last + 1)]


def _reduce(em: Emitter, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(n, r, r_lo): n = round(x/ln2) and r + r_lo = x - n·ln2 to about 2^-80 relative (x already clamped)."""
    n = em.rint(em.mul(x, em.c(INV_LN2)))
    hi = em.fma(em.neg(n), em.c(LN2_HI), x)  # exact
    lo = em.mul(n, em.c(LN2_LO))
    r = em.sub(hi, lo)
    r_lo = em.sub(em.sub(hi, r), lo)
    return n, r, r_lo


# (e^r - 1 - r)/r² on |r| ≤ ln2/2 (widened by 2^-20): the Chebyshev interpolant of degree 10, from
# mpmath.chebyfit at 40 digits, coefficients rounded to double. Relative error of 1 + r + r²·P against e^r,
# coefficient rounding included: 2^-61.4 (the degree-13 Taylor polynomial it replaces: 2^-57.4, one more fma).
EXP_POLY = [
    0.5,
    0.1666666666666667,
    0.04166666666666667,
    0.008333333333326141,
    0.0013888888888883752,
    0.00019841269874800683,
    2.4801587325533502e-05,
    2.75572554255029e-06,
    2.7557273661174726e-07,
    2.5105206475334834e-08,
    2.091467944897855e-09,
]
# The same for float32 arithmetic, degree 4, coefficients rounded to float32: 2^-26.6 (Taylor to degree 7:
# 2^-27.0, one more fma).
EXP_POLY_F = [0.5, 0.16666577756404877, 0.041666556149721146, 0.008363173343241215, 0.0013926175888627768]


def _exp_reduced(em: Emitter, r: SSAValue, r_lo: SSAValue | None, coeffs: list[float]) -> SSAValue:
    """exp(r + r_lo) for |r| ≤ ln2/2, |r_lo| ≪ |r| (None: 0): q = r²·P(r) (``coeffs``: P's, lowest first),
    then 1 + r + (q + r_lo·exp(r)) with 1 + r formed exactly (fast two-sum) so the sum rounds once."""
    r2 = em.mul(r, r)
    q = em.mul(r2, em.pairwise_horner(r, r2, coeffs))
    s, e = em.fast_two_sum(em.c(1.0), r)
    small = q if r_lo is None else em.fma(r_lo, em.add(s, q), q)
    return em.add(s, em.add(e, small))


def _exp_by_two_fmas(
    em: Emitter, xc: SSAValue, inv_ln2: float, ln2: tuple[float, float], magic_bits: int, coeffs: list[float]
) -> SSAValue:
    """exp(xc) for an already clamped ``xc`` in the emitter's float type, shared by :func:`exp` and
    :func:`exp_single` (their constants: 1/ln2, ln2 as (hi, lo), the rounding constant's bits, P's coefficients).

    n comes from the bits of magic + round(xc/ln2) (a float-to-int conversion of NaN would be poison), and
    xc - n·ln2 takes two fmas: the inner one exact, the outer rounding once, an absolute error of at most
    ulp(0.35)/2 (2^-55 in float64, a relative error of exp(r) of about 0.1 ulp), so no r_lo is carried through
    the polynomial: five operations fewer per element than ``exp_dd``'s compensated form."""
    k = em.fma(xc, em.c(inv_ln2), em.c(em.magic))
    n = em.sub(k, em.c(em.magic))
    neg_n = em.neg(n)
    r = em.fma(neg_n, em.c(ln2[1]), em.fma(neg_n, em.c(ln2[0]), xc))
    y = _exp_reduced(em, r, None, coeffs)
    return em.scale_int(y, em.isub(em.bits(k), em.ic(magic_bits)))


def exp(em: Emitter, x: SSAValue, single: bool = False) -> SSAValue:
    """exp(x) for float64 x: Cody–Waite reduction by two fmas, a degree-12 polynomial on |r| ≤ ln2/2
    (:data:`EXP_POLY`, 2^-61 relative), added to 1 last so 1 + q rounds once, then the 2^n scale (one
    ``mathx.ldexp``). ±inf give inf/0, overflow inf, underflow gradual. Accuracy: within 1 ulp (0.79 the
    largest error measured on 12 million points, uniform on -20…20 and -745…709 and
    tests/test_expand_math.py's sets; the test asserts 1). ``single``: the result
    will be rounded to float32, so a degree-9 polynomial (2^-35) suffices.

    NaN needs no select: the clamp keeps it, n is read from the bits of the rounding sum (a float-to-int
    conversion of NaN would be poison in LLVM), and NaN times the scale's powers of two is NaN."""
    # |x/ln2| < 2^11 after the clamp, so the rounding constant's sum is exact
    xc = em.clamp_keep_nan(x, EXP_LO, EXP_HI)
    return _exp_by_two_fmas(em, xc, INV_LN2, (LN2_HI, LN2_LO), MAGIC_BITS, _taylor(2, 9) if single else EXP_POLY)


def expm1(em: Emitter, x: SSAValue, single: bool = False) -> SSAValue:
    """exp(x) - 1 without cancellation: with exp(x) = 2^n(1 + r + u), expm1(x) = (2^n - 1) + 2^n·r + 2^n·u,
    where 2^n·r and 2^n - 1 (a double-double beyond n = 53) are exact and summed by an exact two-sum
    (|n| ≤ 60), so one rounding dominates; for n > 60 the result is exp(x) itself (the -1 is below half
    an ulp). |x| < 2^-54 returns x (so -0 and subnormals are exact), x < -50 gives -1, NaN passes through.
    Accuracy: 1 ulp. ``single``: the result will be rounded to float32 (a shorter polynomial). With a
    float32 emitter the same algorithm runs natively in float32 (float32 constants, thresholds 24 and 30,
    degree 8; accuracy 1 ulp)."""
    native = em.f == F32
    lowest, wide_n, near_n = (-20.0, 24.0, 30.0) if native else (-50.0, 53.0, 60.0)
    nan = em.isnan(x)
    xc = em.select(nan, em.c(0.0), em.clamp(x, lowest, 89.0 if native else EXP_HI))
    if native:
        n, r, r_lo = _reduce_single(em, xc)
        degree = 8  # 2^n·r^9/9! stays below 0.02 ulp of the result
    else:
        n, r, r_lo = _reduce(em, xc)
        degree = 9 if single else 13
    q = em.mul(em.mul(r, r), em.horner(r, _coeffs(em, _taylor(2, degree))))
    u = em.fma(r_lo, em.add(em.add(em.c(1.0), r), q), q)  # exp(r + r_lo) - 1 - r
    two_n = em.pow2(em.to_int(em.min(n, em.c(near_n))))
    # 2^n - 1 as a double-double (a, a_lo): exact in one float up to n = 53 (24), then (2^n, -1).
    wide = em.cmp("ogt", n, em.c(wide_n))
    a = em.select(wide, two_n, em.sub(two_n, em.c(1.0)))
    a_lo = em.select(wide, em.c(-1.0), em.c(0.0))
    s, e = em.two_sum(a, em.mul(two_n, r))
    near = em.add(s, em.add(em.fma(two_n, u, e), a_lo))
    one_r, one_r_err = em.fast_two_sum(em.c(1.0), r)
    big = em.scale(em.add(one_r, em.add(one_r_err, u)), n)
    y = em.select(em.cmp("ogt", n, em.c(near_n)), big, near)
    tiny = em.cmp("olt", em.abs(x), em.c(2.0 ** -(wide_n + 1)))
    return em.select(em.or_(nan, tiny), x, y)


def exp_dd(em: Emitter, hi: SSAValue, lo: SSAValue) -> SSAValue:
    """exp(hi + lo) for a double-double argument (|lo| ≤ ulp(hi)), to about 0.5 ulp plus lo's own error:
    pow's last step. hi must not be NaN (the caller selects); beyond the clamp the result is inf or 0."""
    hc = em.clamp(hi, EXP_LO, EXP_HI)
    lo = em.select(em.cmp("oeq", hc, hi), lo, em.c(0.0))  # a clamped (or infinite) hi drops its tail
    n, r, r_lo = _reduce(em, hc)
    r_lo = em.add(r_lo, lo)
    return em.scale(_exp_reduced(em, r, r_lo, EXP_POLY), n)


# float32: ln2 = LN2_HI_F + LN2_LO_F with 9 significant bits in LN2_HI_F (n·LN2_HI_F exact for |n| < 2^15).
LN2_HI_F = 0.693359375
LN2_LO_F = float(np.float32(math.log(2.0) - LN2_HI_F))
MAGIC_BITS_F = int(np.array(1.5 * 2.0**23, np.float32).view(np.int32))
"""The bits of float32's rounding constant 1.5·2^23 (see :data:`MAGIC_BITS`)."""


def _coeffs(em: Emitter, cs: list[float]) -> list[float]:
    """Polynomial coefficients as the emitter's float type holds them."""
    return [float(np.float32(c)) for c in cs] if em.f == F32 else cs


def _reduce_single(em: Emitter, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """float32 (n, r, r_lo): n = round(x/ln2), r + r_lo = x - n·ln2 (x - n·LN2_HI_F is exact, n·LN2_LO_F an
    exact two-product, the subtraction's error kept)."""
    n = em.rint(em.mul(x, em.c(float(np.float32(INV_LN2)))))
    hi = em.fma(em.neg(n), em.c(LN2_HI_F), x)  # exact
    p, pe = em.two_prod(n, em.c(LN2_LO_F))
    r = em.sub(hi, p)
    return n, r, em.sub(em.sub(em.sub(hi, r), p), pe)


def exp_single(em: Emitter, x: SSAValue) -> SSAValue:
    """exp(x) in float32 arithmetic (``em`` a float32 emitter: twice the lanes of the widened form):
    the same Cody–Waite reduction with float32 constants, a degree-6 polynomial (:data:`EXP_POLY_F`,
    2^-26.6 on |r| ≤ ln2/2), 1 + r formed exactly, the two-half 2^n scale; clamped at -104 (exp is 0
    to within half the smallest subnormal) and 89 (inf); NaN passes through the arithmetic as in :func:`exp`.
    Accuracy: within 1 ulp (subnormal results may round twice)."""
    xc = em.clamp_keep_nan(x, -104.0, 89.0)
    return _exp_by_two_fmas(em, xc, float(np.float32(INV_LN2)), (LN2_HI_F, LN2_LO_F), MAGIC_BITS_F, EXP_POLY_F)
