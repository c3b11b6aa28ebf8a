"""sin and cos as branch-free float64 code: Cody–Waite reduction by π/2 and fdlibm's kernels.

Reduction: n = round(x·2/π) and r = x - n·π/2 as a double-double (r, r_lo)
with π/2 in three 33-bit parts plus a tail (fdlibm's constants), so every
n·part is exact for |n| < 2^20 and r is good to ~2^-100 relative even for x
closest to a multiple of π/2. This covers
|x| < 2^19·π ≈ 1.6e6 with fdlibm's < 1 ulp kernels. Beyond, the same code is
evaluated on x reduced by a Payne–Hanek-free fallback described in
:func:`_reduce_large`.
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

from fuse_mlir.mathlib.emitter import Emitter

PIO2_1 = 1.57079632673412561417e00  # first 33 bits of π/2
PIO2_2 = 6.07710050630396597660e-11  # second 33 bits
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


def reduce_medium(em: Emitter, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(n, r, r_lo): x = n·π/2 + r + r_lo with |r| ≤ π/4, for |x| < MEDIUM_LIMIT. π/2 = P1 + P2 + P3 + P3T
    with 33-bit P1..P3, so each n·Pk is exact (n < 2^20); x - n·P1 is exact, the next two subtractions
    are two-sums whose errors are kept, and n·P3T (~2^-100 of x) rounds harmlessly."""
    n = em.rint(em.mul(x, em.c(2.0 / math.pi)))
    r = em.sub(x, em.mul(n, em.c(PIO2_1)))  # exact
    a, e = em.two_sum(r, em.neg(em.mul(n, em.c(PIO2_2))))
    a, e2 = em.two_sum(a, em.neg(em.mul(n, em.c(PIO2_3))))
    lo = em.sub(em.add(e, e2), em.mul(n, em.c(PIO2_3T)))
    y0, y1 = em.fast_two_sum(a, lo)
    return n, y0, y1


def _arctan_inv(k: int, bits: int) -> int:
    """atan(1/k)·2^bits, truncated (Taylor series in exact integers)."""
    total, term, n, sign = 0, (1 << bits) // k, 1, 1
    while term:
        total += sign * (term // n)
        term //= k * k
        n += 2
        sign = -sign
    return total


def _two_over_pi_chunks(count: int) -> list[float]:
    """2/π = Σ_j d_j·2^(-53(j+1)): the first ``count`` 53-bit integer chunks d_j, as exact doubles (π by
    Machin's formula in integers, with guard bits)."""
    bits = 53 * count + 64
    pi = 4 * (4 * _arctan_inv(5, bits) - _arctan_inv(239, bits))  # π·2^bits, error a few units
    two_over_pi = (1 << (2 * bits + 1)) // pi  # (2/π)·2^bits
    mask = (1 << 53) - 1
    return [float((two_over_pi >> (bits - 53 * (j + 1))) & mask) for j in range(count)]


LARGE_TERMS = 5  # chunks of 2/π per float64 reduction: truncation below 2^-157 (absolute, in units of π/2)
MAX_E = 971  # largest exponent of a finite double's integer mantissa: x = M·2^E, M < 2^53
_BUCKETS = (MAX_E - 2) // 53 + 1
D = _two_over_pi_chunks(_BUCKETS + LARGE_TERMS)
PIO2_HI = 1.5707963267948966  # π/2 as a double-double
PIO2_LO = 6.123233995736766e-17


def _window(em: Emitter, j0: SSAValue, buckets: int, terms: int) -> list[SSAValue]:
    """The chunks D[j0 + k], k < terms, for an int64 j0 in [0, buckets): a binary tree of selects on the
    bits of j0 (depth log2(buckets), where a chain of compares would be ``buckets`` deep)."""
    depth = max(1, (buckets - 1).bit_length())
    out = []
    for k in range(terms):
        level = [em.c(D[min(j, buckets - 1) + k]) for j in range(1 << depth)]
        for bit in range(depth):
            on = em.icmp("ne", em.iand(em.ashr(j0, em.ic(bit)), em.ic(1)), em.ic(0))
            level = [em.select(on, level[2 * i + 1], level[2 * i]) for i in range(len(level) // 2)]
        out.append(level[0])
    return out


def _sum_tree(em: Emitter, values: list[SSAValue], errors: list[SSAValue]) -> SSAValue:
    """Σ values by a tree of exact two-sums: returns the rounded total, appends each rounding error."""
    while len(values) > 1:
        nxt = []
        for a, c in zip(values[::2], values[1::2]):
            total, err = em.two_sum(a, c)
            nxt.append(total)
            errors.append(err)
        values = nxt + ([values[-1]] if len(values) % 2 else [])
    return values[0]


def reduce_large(em: Emitter, x: SSAValue, single: bool = False) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(n, r, r_lo) with x = n·π/2 + r + r_lo for finite |x| ≥ 2^20 (float64) or any nonzero finite
    float32, Payne–Hanek style without a table load: |x| = M·2^E with M a 53-bit integer, and
    x·2/π mod 4 = Σ_j M·d_j·2^(E-53(j+1)) mod 4 over the 53-bit chunks d_j of 2/π, where the chunks whose
    terms are multiples of 4 are skipped: the first chunk used, j0 = max(0, (E-2)//53), picks five
    consecutive chunks by a tree of selects over the 19 possible j0. ``single`` (a widened float32: M
    has 24 bits, E ≤ 104): three chunks, two buckets. Each M·d_j is an exact double-double (fma), the
    pieces above 4 are reduced mod 4 exactly, and all are summed by exact two-sums in two rounds (see
    below), so r is good to ~2^-150 absolute: within 1 ulp even for the doubles closest to a multiple
    of π/2 (2^-61 away). Branch-free: :func:`sincos` computes it
    for every element and selects it where |x| ≥ 2^19·π."""
    b = em.bits(x)
    e = em.isub(em.iand(em.ashr(b, em.ic(52)), em.ic(0x7FF)), em.ic(1075))
    m = em.from_bits(em.iadd(em.iand(b, em.ic(0x000FFFFFFFFFFFFF)), em.ic(1075 << 52)))  # 2^52 + mantissa
    m = em.copysign(m, x)  # x = M·2^E with M signed: every piece below carries the sign
    ef = em.to_float(e)
    # A widened float32 has a 24-bit M (the low 29 bits are zero): shorter products, fewer chunks.
    bits, terms, max_e = (24, 3, 104) if single else (53, LARGE_TERMS, MAX_E)
    if single:
        m = em.mul(m, em.c(2.0**-29))
        ef = em.add(ef, em.c(29.0))
    # j0 = max(0, floor((E - 2)/53)): (E - 28)/53 lies within 0.49 of it, so rounding is exact.
    j0f = em.max(em.c(0.0), em.roundeven(em.mul(em.sub(ef, em.c(28.0)), em.c(1.0 / 53.0))))
    chunks = _window(em, em.to_int(j0f), (max_e - 2) // 53 + 1, terms)
    # Scale of chunk j0 + k: 2^(E - 53(j0 + 1 + k)), a normal power of two for every finite x ≥ 2^20.
    scale = em.pow2(em.to_int(em.sub(ef, em.mul(em.c(53.0), em.add(j0f, em.c(1.0))))))
    big: list[SSAValue] = []  # pieces reduced mod 4 (into [-2, 2]) or below 4 already
    low: list[SSAValue] = []  # pieces below 2^-50
    truncation = bits + 2 - 53 * (terms - 1)  # log2 of what the chunks left out can add
    for k in range(terms):
        p, err = em.two_prod(m, chunks[k])
        for part, bound in ((p, bits + 55 - 53 * k), (err, bits + 2 - 53 * k)):
            if bound <= truncation:
                continue
            v = em.mul(em.mul(part, scale), em.c(2.0 ** (-53 * k)))  # exact; |v| < 2^bound
            if bound > 2:
                v = em.fma(em.c(-4.0), em.roundeven(em.mul(v, em.c(0.25))), v)  # v mod 4, exact
            (big if bound > -50 else low).append(v)
    # Sum the big pieces exactly (a tree of two-sums: short dependency chains), take the integer part
    # out (exact), then sum what is left with the two-sums' errors and the low pieces by a second tree:
    # when x is close to a multiple of π/2 the first sum cancels to below 2^-47 and the second keeps
    # its errors below 2^-100, so r keeps ~2^-150 absolute.
    errs: list[SSAValue] = []
    total = _sum_tree(em, big, errs)
    n = em.roundeven(total)
    rest: list[SSAValue] = []
    h = _sum_tree(em, [em.sub(total, n), *errs, *low], rest)  # the subtraction is exact
    lo = rest[0]
    for v in rest[1:]:
        lo = em.add(lo, v)
    h, lo = em.fast_two_sum(h, lo)
    # r = (h + lo)·π/2 as a double-double.
    r, r_err = em.two_prod(h, em.c(PIO2_HI))
    r_err = em.fma(h, em.c(PIO2_LO), em.fma(lo, em.c(PIO2_HI), r_err))
    r, r_lo = em.fast_two_sum(r, r_err)
    return n, r, r_lo


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


def sincos(em: Emitter, x: SSAValue, cosine: bool, single: bool = False) -> SSAValue:
    """sin(x) (or cos(x)): reduce, evaluate both kernels, pick by quadrant. ±inf and NaN give NaN; -0 and
    subnormals are exact for sin. Accuracy: < 1 ulp (fdlibm's kernels; measured ≤ 0.77 ulp): below
    2^19·π by the medium reduction, beyond by :func:`reduce_large`, both computed and one selected.
    ``single``: the operand is a widened float32, whose 24-bit M keeps every scale of the table-free
    reduction normal down to the smallest subnormal, so that reduction alone serves every input."""
    ax = em.abs(x)
    finite = em.cmp("olt", ax, em.c(float("inf")))
    zero = em.cmp("oeq", x, em.c(0.0))
    if single:
        n, r, r_lo = reduce_large(em, em.select(em.and_(finite, em.not_(zero)), x, em.c(1.0)), single)
    else:
        medium = em.cmp("olt", ax, em.c(MEDIUM_LIMIT))
        n1, r1, r1_lo = reduce_medium(em, em.select(medium, x, em.c(0.0)))
        n2, r2, r2_lo = reduce_large(em, em.select(em.and_(finite, em.not_(medium)), x, em.c(2.0**30)))
        n = em.select(medium, n1, n2)
        r = em.select(medium, r1, r2)
        r_lo = em.select(medium, r1_lo, r2_lo)
    s, c = _kernels(em, r, r_lo)
    y = _quadrant(em, n, s, c, cosine)
    # sin(±0) = ±0 (the reduction loses the sign; the float32 one skips zeros), cos(±0) = 1.
    y = em.select(zero, em.c(1.0) if cosine else x, y)
    return em.select(finite, y, em.sub(x, x))
