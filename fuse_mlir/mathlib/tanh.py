"""tanh as branch-free float64 code, from expm1."""

from __future__ import annotations

from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import F32, Emitter
from fuse_mlir.mathlib.exp import expm1


def tanh(em: Emitter, x: SSAValue, single: bool = False) -> SSAValue:
    """tanh(x) = sign(x)·t/(t + 2) with t = expm1(2|x|) for |x| < 0.55 (no cancellation near 0), else
    sign(x)·(1 - 2/(t + 2)); the quotient is num·(1/d) plus a Newton correction from its fma-exact
    residual (t + 2 kept exact as a two-sum). |x| is clamped at 20 (float32: 10), where tanh is 1 to
    within half an ulp: saturation without overflow. Signed zeros and subnormals come back unchanged,
    NaN passes through. A float32 emitter runs it natively in float32. Accuracy: 1.4 ulp measured in
    both float64 and native float32 (expm1's error plus the corrected division). ``single``: the result
    will be rounded to float32 (a shorter polynomial in expm1)."""
    ax = em.min(em.abs(x), em.c(10.0 if em.f == F32 else 20.0))
    t = expm1(em, em.add(ax, ax), single)
    d, d_lo = em.two_sum(t, em.c(2.0))
    near0 = em.cmp("olt", ax, em.c(0.55))
    num = em.select(near0, t, em.c(2.0))
    # num / (d + d_lo) to about half an ulp with one division: q = num·(1/d), plus its fma-exact residual
    # times 1/d (a Newton step).
    inv = em.div(em.c(1.0), d)
    q = em.mul(num, inv)
    rem = em.fma(em.neg(q), d_lo, em.fma(em.neg(q), d, num))
    q = em.fma(rem, inv, q)
    y = em.select(near0, q, em.sub(em.c(1.0), q))
    return em.copysign(y, x)
