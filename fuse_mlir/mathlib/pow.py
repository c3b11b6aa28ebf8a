"""pow(x, y) as branch-free float64 code, with C99/NumPy special cases."""

from __future__ import annotations

from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import Emitter
from fuse_mlir.mathlib.exp import exp, exp_dd
from fuse_mlir.mathlib.log import log, log_dd

INF = float("inf")


def pow(em: Emitter, x: SSAValue, y: SSAValue, single: bool = False) -> SSAValue:
    """x^y = exp(y·log|x|) with the sign of x when y is an odd integer. float64: log|x| as a double-double
    (relative error ~2^-66), y·log|x| as an exact fma product, and exp of the double-double, so the result
    is within 1 ulp over the whole range; ``single`` (float32 computed in float64): plain log and exp,
    whose 2^-52 errors stay far below a float32 ulp. IEEE/C99 special cases as NumPy: pow(x, ±0) = 1 and
    pow(1, y) = 1 even for NaN, pow(-1, ±inf) = 1, negative finite x with non-integer finite y is NaN,
    zeros and infinities by the sign and parity of y, |x| ≶ 1 with y = ±inf; overflow inf, underflow to
    0 through the subnormals."""
    ax = em.abs(x)
    if single:
        t = em.mul(y, log(em, ax))
        tc = em.select(em.isnan(t), em.c(0.0), t)
        r = exp(em, tc)
    else:
        lh, ll = log_dd(em, ax)
        p, pe = em.two_prod(y, lh)
        pl = em.fma(y, ll, pe)
        pc = em.select(em.isnan(p), em.c(0.0), p)
        r = exp_dd(em, pc, pl)
    zero, one, inf = em.c(0.0), em.c(1.0), em.c(INF)
    y_neg = em.cmp("olt", y, zero)
    # |x| = 0 or inf.
    r = em.select(em.cmp("oeq", ax, zero), em.select(y_neg, inf, zero), r)
    r = em.select(em.cmp("oeq", ax, inf), em.select(y_neg, zero, inf), r)
    # y = ±inf: 0, 1 or inf by |x| against 1.
    big = em.select(y_neg, zero, inf)
    small = em.select(y_neg, inf, zero)
    y_inf = em.cmp("oeq", em.abs(y), inf)
    by_ax = em.select(em.cmp("ogt", ax, one), big, em.select(em.cmp("olt", ax, one), small, one))
    r = em.select(y_inf, by_ax, r)
    # Sign: negative x (-0 and -inf included) with an odd integer y.
    y_int = em.cmp("oeq", em.roundeven(y), y)  # false for NaN; true for ±inf (treated as even)
    half = em.mul(y, em.c(0.5))
    y_odd = em.and_(y_int, em.cmp("one", em.roundeven(half), half))
    x_signed = em.icmp("slt", em.bits(x), em.ic(0))
    r = em.select(em.and_(x_signed, y_odd), em.neg(r), r)
    # Negative finite x with non-integer finite y; NaN operands; then the two rules that beat NaN.
    nan = em.c(float("nan"))
    neg_finite = em.and_(em.cmp("olt", x, zero), em.cmp("ogt", x, em.c(-INF)))
    r = em.select(em.and_(neg_finite, em.and_(em.not_(y_int), em.not_(y_inf))), nan, r)
    r = em.select(em.or_(em.isnan(x), em.isnan(y)), em.add(x, y), r)
    r = em.select(em.cmp("oeq", x, one), one, r)
    return em.select(em.cmp("oeq", y, zero), one, r)
