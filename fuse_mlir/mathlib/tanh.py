"""tanh as branch-free float64 code, from expm1."""

from __future__ import annotations

from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import Emitter
from fuse_mlir.mathlib.exp import expm1


def tanh(em: Emitter, x: SSAValue, single: bool = False) -> SSAValue:
    """tanh(x) = sign(x)·t/(t + 2) with t = expm1(2|x|) for |x| < 0.55 (no cancellation near 0), else
    sign(x)·(1 - 2/(t + 2)); |x| is clamped at 20, where tanh is 1 to within half an ulp (saturation
    without overflow). Signed zeros and subnormals come back unchanged, NaN passes through.
    Accuracy: within 2 ulp in float64 (measured), float32 (computed in float64) correctly rounded but rarely."""
    ax = em.min(em.abs(x), em.c(20.0))
    t = expm1(em, em.add(ax, ax), single)
    d = em.add(t, em.c(2.0))
    small = em.div(t, d)
    big = em.sub(em.c(1.0), em.div(em.c(2.0), d))
    y = em.select(em.cmp("olt", ax, em.c(0.55)), small, big)
    return em.copysign(y, x)
