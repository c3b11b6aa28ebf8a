"""log and log1p (and the double-double log that pow needs), as branch-free float64 code.

Shared reduction (musl/fdlibm): x = 2^k · m with m in [√2/2, √2), found with
integer operations on the bits (subnormals are first scaled by 2^54), and
log(m) = 2·atanh(s) with s = f/(2+f), f = m - 1, from fdlibm's minimax
polynomial in s² (|error| < 2^-58.45).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import F32, Emitter
from fuse_mlir.mathlib.exp import LN2_HI, LN2_LO

# fdlibm's e_log.c coefficients: log(1+f) = f - f²/2 + s·(f²/2 + R(s²)).
LG = [
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
]
SQRT2_SHIFT = (0x3FF00000 - 0x3FE6A09E) << 32  # moves the exponent boundary from 1 to √2/2
MANT_MASK = 0x000FFFFFFFFFFFFF
INF = float("inf")


# musl's logf.c: float32 ln2 split and the degree-4 polynomial (|error| < 2^-34.24 on its range).
LN2_HI_F = 6.9313812256e-01  # 0x3f317180
LN2_LO_F = 9.0580006145e-06  # 0x3717f7d1
LG_F = [0xAAAAAA * 2.0**-24, 0xCCCE13 * 2.0**-25, 0x91E9EE * 2.0**-25, 0xF89E26 * 2.0**-26]


def _split(em: Emitter, x: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(k as a float, m) with x = 2^k·m, m in [√2/2, √2), for finite x > 0 (subnormals included); float64
    or, with a float32 emitter, float32 bit layouts."""
    native = em.f == F32
    tiny, up, mant, bias, sqrt2 = (
        (2.0**-126, 25, 23, 0x7F, 0x3F3504F3) if native else (2.0**-1022, 54, 52, 0x3FF, 0x3FE6A09E << 32)
    )
    sub = em.cmp("olt", x, em.c(tiny))
    xs = em.select(sub, em.mul(x, em.c(2.0**up)), x)
    ix = em.iadd(em.bits(xs), em.ic((bias << mant) - sqrt2))  # moves the exponent boundary from 1 to √2/2
    k = em.isub(em.ashr(ix, em.ic(mant)), em.ic(bias))
    m = em.from_bits(em.iadd(em.iand(ix, em.ic((1 << mant) - 1)), em.ic(sqrt2)))
    dk = em.sub(em.to_float(k), em.select(sub, em.c(float(up)), em.c(0.0)))
    return dk, m


def _log1p_poly(em: Emitter, f: SSAValue, c: SSAValue, dk: SSAValue) -> SSAValue:
    """log(1 + f) + c + dk·ln2 by fdlibm's formula; c is a small correction (0 for log)."""
    native = em.f == F32
    hfsq = em.mul(em.mul(em.c(0.5), f), f)
    s = em.div(f, em.add(em.c(2.0), f))
    z = em.mul(s, s)
    w = em.mul(z, z)
    if native:
        t1 = em.mul(w, em.horner(w, [LG_F[1], LG_F[3]]))
        t2 = em.mul(z, em.horner(w, [LG_F[0], LG_F[2]]))
    else:
        t1 = em.mul(w, em.horner(w, [LG[1], LG[3], LG[5]]))
        t2 = em.mul(z, em.horner(w, [LG[0], LG[2], LG[4], LG[6]]))
    r = em.add(t2, t1)
    tail = em.fma(dk, em.c(LN2_LO_F if native else LN2_LO), c)
    v = em.sub(em.fma(s, em.add(hfsq, r), tail), hfsq)
    return em.fma(dk, em.c(LN2_HI_F if native else LN2_HI), em.add(v, f))


def log(em: Emitter, x: SSAValue) -> SSAValue:
    """Natural log (fdlibm's algorithm, < 1 ulp): log(x) = k·ln2 + log(m) as above. log(±0) = -inf,
    log(x < 0) = NaN, log(inf) = inf, NaN passes through; subnormal x is exact-scaled first. With a
    float32 emitter: musl's logf (float32 constants, a shorter polynomial; < 1 ulp)."""
    dk, m = _split(em, x)
    y = _log1p_poly(em, em.sub(m, em.c(1.0)), em.c(0.0), dk)
    finite_pos = em.and_(em.cmp("ogt", x, em.c(0.0)), em.cmp("olt", x, em.c(INF)))
    special = em.select(
        em.cmp("oeq", x, em.c(0.0)), em.c(-INF), em.select(em.cmp("olt", x, em.c(0.0)), em.c(float("nan")), x)
    )
    return em.select(finite_pos, y, special)


def log1p(em: Emitter, x: SSAValue) -> SSAValue:
    """log(1 + x) without cancellation (musl's algorithm, < 1 ulp): u = 1 + x is reduced as in log, and the
    rounding error of 1 + x is added back as c/u; when 1 + x is already in [√2/2, √2) (k = 0), f = x
    exactly. log1p(-1) = -inf, x < -1 gives NaN, inf gives inf, |x| < 2^-54 returns x (signed zeros,
    subnormals)."""
    u = em.add(em.c(1.0), x)
    ix = em.iadd(em.bits(u), em.ic(SQRT2_SHIFT))
    k = em.isub(em.ashr(ix, em.ic(52)), em.ic(0x3FF))
    m = em.from_bits(em.iadd(em.iand(ix, em.ic(MANT_MASK)), em.ic(0x3FE6A09E << 32)))
    dk = em.to_float(k)
    # c ≈ log(1+x) - log(u): the rounding error of 1 + x relative to u (negligible once k ≥ 54).
    err = em.select(em.cmp("oge", dk, em.c(2.0)), em.sub(em.c(1.0), em.sub(u, x)), em.sub(x, em.sub(u, em.c(1.0))))
    c = em.select(em.cmp("olt", dk, em.c(54.0)), em.div(err, u), em.c(0.0))
    k0 = em.cmp("oeq", dk, em.c(0.0))
    f = em.select(k0, x, em.sub(m, em.c(1.0)))
    c = em.select(k0, em.c(0.0), c)
    y = _log1p_poly(em, f, c, dk)
    regular = em.and_(em.cmp("ogt", x, em.c(-1.0)), em.cmp("olt", x, em.c(INF)))
    special = em.select(
        em.cmp("oeq", x, em.c(-1.0)), em.c(-INF), em.select(em.cmp("olt", x, em.c(-1.0)), em.c(float("nan")), x)
    )
    y = em.select(regular, y, special)
    return em.select(em.cmp("olt", em.abs(x), em.c(2.0**-54)), x, y)


TWO_THIRDS_HI = 2.0 / 3.0
TWO_THIRDS_LO = 3.700743415417188e-17  # 2/3 - TWO_THIRDS_HI
# atanh(s) = s + s³/3 + s⁵·Σ s^(2j)/(2j+5): the tail after s³, to s^27 (truncation < 2^-68 on |s| ≤ 0.1716).
ATANH_TAIL = [1.0 / (2 * j + 5) for j in range(12)]


def log_dd(em: Emitter, x: SSAValue) -> tuple[SSAValue, SSAValue]:
    """log(x) as a double-double (hi, lo) with relative error about 2^-66, for finite x > 0 (others give
    garbage; pow selects them away). log(m) = 2s + (2/3)s³ + 2s⁵·T(s²) with s = f/(2+f) kept as s_hi + s_lo
    (an fma residual), the first two terms in double-double and the tail in double."""
    dk, m = _split(em, x)
    f = em.sub(m, em.c(1.0))  # exact
    d, d_lo = em.fast_two_sum(em.c(2.0), f)
    inv = em.div(em.c(1.0), d)  # one division: s = f/d to an ulp or so, s_lo from the fma-exact residual
    s = em.mul(f, inv)
    res = em.fma(em.neg(s), d_lo, em.fma(em.neg(s), d, f))
    s_lo = em.mul(res, inv)
    # s² and s³ as double-doubles.
    z, z_lo = em.two_prod(s, s)
    z_lo = em.fma(em.add(s, s), s_lo, z_lo)
    c3, c3_lo = em.two_prod(z, s)
    c3_lo = em.fma(z_lo, s, em.fma(z, s_lo, c3_lo))
    t3, t3_lo = em.two_prod(c3, em.c(TWO_THIRDS_HI))
    t3_lo = em.fma(c3_lo, em.c(TWO_THIRDS_HI), em.fma(c3, em.c(TWO_THIRDS_LO), t3_lo))
    t5 = em.mul(em.mul(em.mul(em.add(s, s), z), z), em.horner(z, ATANH_TAIL))
    # 2s + t3 exactly, then the small parts, then k·ln2 (k·LN2_HI is exact).
    h1, l1 = em.fast_two_sum(em.add(s, s), t3)
    l1 = em.add(em.add(l1, em.add(s_lo, s_lo)), em.add(t3_lo, t5))
    h2, l2 = em.two_sum(em.mul(dk, em.c(LN2_HI)), h1)
    l2 = em.add(l2, em.fma(dk, em.c(LN2_LO), l1))
    return em.fast_two_sum(h2, l2)
