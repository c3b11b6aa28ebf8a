"""tanh as branch-free float64 code, from expm1."""

from __future__ import annotations

from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import Emitter
from fuse_mlir.mathlib.exp import expm1


def _div(em: Emitter, a: SSAValue, d: SSAValue, d_lo: SSAValue) -> SSAValue:
    """a / (d + d_lo) to about half an ulp: the quotient plus its fma-exact residual's correction."""
    q = em.div(a, d)
    rem = em.fma(em.neg(q), d_lo, em.fma(em.neg(q), d, a))
    return em.add(q, em.div(rem, d))


def tanh(em: Emitter, x: SSAValue, single: bool = False) -> SSAValue:
    """tanh(x) = sign(x)·t/(t + 2) with t = expm1(2|x|) for |x| < 0.55 (no cancellation near 0), else
    sign(x)·(1 - 2/(t + 2)), each quotient corrected by its residual (t + 2 kept exact as a
    two-sum); |x| is clamped at 20, where tanh is 1 to within half an ulp (saturation
    without overflow). Signed zeros and subnormals come back unchanged, NaN passes through.
    Accuracy: about 1 ulp in float64 (expm1's error plus the corrected division), float32 (computed in
    float64) within half an ulp but rarely."""
    ax = em.min(em.abs(x), em.c(20.0))
    t = expm1(em, em.add(ax, ax), single)
    d, d_lo = em.two_sum(t, em.c(2.0))
    small = _div(em, t, d, d_lo)
    big = em.sub(em.c(1.0), _div(em, em.c(2.0), d, d_lo))
    y = em.select(em.cmp("olt", ax, em.c(0.55)), small, big)
    return em.copysign(y, x)
