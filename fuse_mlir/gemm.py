"""Pairwise contractions as BLAS calls: batch × M × N × K groups, transpose flags, and the copies that pay.

``out[...] = sum lhs[...] * rhs[...]`` is a (batched) GEMM when each of
the batch, M, N and K index groups is adjacent and in one order in every
buffer holding it (:func:`gemm_plan`, on positions). Which operand is BLAS's
A, and whether a buffer is read transposed, are flags: ``W[h,i] X[b,i]``
written either way round and with any result order is one GEMM, no copy.
When the layouts do not fit (a batch index in the middle of an operand, a
result order that interleaves M and N), :func:`gemm_layout` picks the
cheapest set of operands (or the result) to copy into a layout that does:
an O(size) permutation beside an O(M·N·K) product. Products of a few
hundred FLOPs stay in fused loops (:data:`SMALL_FLOPS`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SMALL_FLOPS = 1024
"""A product with fewer FLOPs (all extents known at compile time) stays a loop nest: a BLAS call costs more."""

ASSUMED_EXTENT = 64
"""Extent assumed for an index known only at run time when weighing copies (as ``contract-order`` does)."""


@dataclass(frozen=True)
class GemmPlan:
    """How a contraction maps onto ``loop.gemm``: dim groups and flags (``swap``: rhs is BLAS's A).

    ``inner_a``, ``inner_b``, ``inner_c``: that buffer holds its batch dims between its rows and its columns
    (``A[i, b, j]``), so its matrices are strided (batch stride: the columns' size, row stride: batch × columns);
    otherwise they lead it (or it has none) and each matrix is contiguous.
    """

    swap: bool
    batch: list[int]
    m: list[int]
    n: list[int]
    k: list[int]
    trans_a: bool
    trans_b: bool
    broadcast_a: bool
    broadcast_b: bool
    inner_a: bool = False
    inner_b: bool = False
    inner_c: bool = False

    @property
    def strided(self) -> bool:
        """Whether some buffer holds its batch dims inside (``loop.gemm`` then takes explicit strides)."""
        return self.inner_a or self.inner_b or self.inner_c


def _without_batch(dims: list[int], batch: list[int]) -> tuple[list[int], int] | None:
    """``dims`` without the block ``batch`` and the number of dims before the block (0: it leads); None when the
    block is not there in this order, or is last (the columns would not be contiguous)."""
    nb = len(batch)
    for p in (0, *range(1, len(dims) - nb)):
        if dims[p : p + nb] == batch:
            return dims[:p] + dims[p + nb :], p
    return None


def gemm_plan(ma: Sequence[int], mb: Sequence[int], out: Sequence[int]) -> GemmPlan | None:
    """Match ``out[...] = sum lhs[ma] * rhs[mb]`` to ``C[b] = op(A[b]) @ op(B[b])`` over row-major buffers.

    Each of M, N, K (and the batch) may be several dims when they are adjacent
    and in the same order in every buffer they occur in (``A[i,j,k] B[j,k,l]``
    is one GEMM with k = j·k). The batch dims lead a buffer, or sit between its
    rows and its columns (``A[i,b,j]``: strided matrices, :class:`GemmPlan`),
    in the same order in every buffer, or are absent from one operand
    (broadcast). Operands may swap roles (``C = B·A`` when the result lists rhs
    dims first). Fewer batch dims win (a plain GEMM before a batch of
    matrix-vector products), then batch dims that lead the result.
    """
    if len(set(ma)) != len(ma) or len(set(mb)) != len(mb) or len(set(out)) != len(out):
        return None
    for nb in range(len(out) + 1):
        for start in range(len(out) - nb + 1) if nb else (0,):
            for swap in (False, True):
                plan = _plan(list(mb) if swap else list(ma), list(ma) if swap else list(mb), list(out), start, nb, swap)
                if plan is not None:
                    return plan
    return None


def _plan(am: list[int], bm: list[int], out: list[int], start: int, nb: int, swap: bool) -> GemmPlan | None:
    """:func:`gemm_plan` for one choice: the batch is ``out[start:start + nb]``, ``am`` is BLAS's A."""
    batch = out[start : start + nb]
    a_none, b_none = not set(batch) & set(am), not set(batch) & set(bm)
    if nb and a_none and b_none:
        return None
    split = []
    for dims, none in ((am, a_none), (bm, b_none), (out, False)):
        if not nb or none:
            split.append((dims, 0))
            continue
        found = _without_batch(dims, batch)
        if found is None:
            return None
        split.append(found)
    (a_rest, a_at), (b_rest, b_at), (c_rest, c_at) = split
    k = [d for d in a_rest if d in b_rest]
    m = [d for d in a_rest if d not in b_rest]
    n = [d for d in b_rest if d not in a_rest]
    if c_rest != m + n or c_at not in (0, len(m)):
        return None
    ta, tb = _transposed(a_rest, m, k), _transposed(b_rest, k, n)
    if ta is None or tb is None or a_at not in (0, len(k if ta else m)) or b_at not in (0, len(n if tb else k)):
        return None
    broadcast_a, broadcast_b = bool(nb) and a_none, bool(nb) and b_none
    return GemmPlan(swap, batch, m, n, k, ta, tb, broadcast_a, broadcast_b, a_at > 0, b_at > 0, c_at > 0)


def _transposed(dims: list[int], rows: list[int], cols: list[int]) -> bool | None:
    """Whether a buffer holding ``dims`` stores the rows × cols matrix transposed (False: as is); None when
    ``dims`` is neither order."""
    if dims == rows + cols:
        return False
    return True if dims == cols + rows else None


def is_matrix_product(a: Sequence[str], b: Sequence[str], out: Sequence[str]) -> bool:
    """Each side keeps an index the other lacks and they share a summed one: a GEMM. Matrix-vector products and
    dots stay loop nests: memory-bound, as fast as GEMV/DOT there (in either orientation, see
    ``outer_reduction_order``), and fusion can feed them."""
    if len(set(a)) != len(a) or len(set(b)) != len(b) or not any(n in b and n not in out for n in a):
        return False
    return any(n in out and n not in b for n in a) and any(n in out and n not in a for n in b)


def blas_product(
    names: Sequence[Sequence[str]],
    out: Sequence[str],
    dtypes: Sequence[np.dtype],
    dtype: np.dtype,
    static: Mapping[str, int],
) -> bool:
    """Whether a pairwise sum contraction goes to BLAS: float32/float64 operands of the result's dtype (BLAS has no
    half precision), a matrix product, and not known at compile time (``static`` extents) to be small."""
    if len(names) != 2 or dtype.kind != "f" or dtype.itemsize < 4 or any(d != dtype for d in dtypes):
        return False
    if not is_matrix_product(names[0], names[1], out):
        return False
    every = {n for ns in names for n in ns}
    return not (all(n in static for n in every) and 2 * math.prod(static[n] for n in every) < SMALL_FLOPS)


@dataclass(frozen=True)
class GemmLayout:
    """The axis orders a GEMM reads and writes: ``a``/``b`` (copied first when they differ from the operands'),
    and ``c``, the order the GEMM writes (copied into the result's order when it differs)."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    c: tuple[str, ...]


def gemm_layout(
    a: Sequence[str],
    b: Sequence[str],
    out: Sequence[str],
    extents: Mapping[str, int] | None = None,
    free: tuple[bool, bool] = (False, False),
    dtype: np.dtype | None = None,
    result: Sequence[str] | None = None,
) -> GemmLayout | None:
    """The cheapest layouts (fewest elements copied) under which ``out = sum a * b`` is one :func:`gemm_plan`.

    The operands' own orders come first (no copy); otherwise every way of
    copying one or more of lhs, rhs and the result into ``[batch, M, K]`` /
    ``[batch, K, M]``-style orders, with each group's order taken from one of
    the three tensors, is weighed by the elements it copies (``extents``,
    where known, else :data:`ASSUMED_EXTENT`; a copy that moves the innermost
    axis counts :data:`TRANSPOSE_COST` times, or once more when it brings an
    axis from further out innermost, so of equal copies the one that keeps
    rows contiguous wins); a ``free`` operand (an
    intermediate whose producer can write any order) costs nothing to
    reorder, and then its order follows ``out``'s. With ``dtype``, a GEMM
    that writes its result the way round BLAS runs slower for that dtype
    (:func:`orientation_cost`, only where every extent is known) costs as if
    it copied, so a large skinny product may write a transposed result and
    copy it. ``result`` forces the order the GEMM writes (a per-shape plan's
    choice). None when no index grouping fits: an index on one operand only
    that the result lacks (it is summed first), or repeated names.
    """
    a, b, out = tuple(a), tuple(b), tuple(out)
    forced = None if result is None else tuple(result)
    if forced is not None and sorted(forced) != sorted(out):
        forced = None  # not a reordering of the result's indices: ignored
    groups = {
        "batch": [n for n in out if n in a and n in b],
        "m": [n for n in out if n in a and n not in b],
        "n": [n for n in out if n in b and n not in a],
        "k": [n for n in a if n in b and n not in out],
    }
    ext = extents or {}

    def size(names: Sequence[str]) -> int:
        return math.prod(ext.get(n, ASSUMED_EXTENT) for n in names)

    def oriented(c: tuple[str, ...]) -> int:
        return 0 if dtype is None else orientation_cost(c, groups, ext, dtype)

    if _fits(a, b, out) and not any(free) and forced in (None, out) and (forced == out or not oriented(out)):
        return GemmLayout(a, b, out)
    if any(n not in out and n not in b for n in a) or any(n not in out and n not in a for n in b):
        return None
    fixed = [t for t, f in ((a, free[0]), (b, free[1])) if not f]
    loose = [t for t, f in ((a, free[0]), (b, free[1])) if f]
    orders: dict[str, list[tuple[str, ...]]] = {}
    for g, names in groups.items():
        seen = [tuple(n for n in t if n in names) for t in (out, *fixed, *loose)]
        orders[g] = list(dict.fromkeys(o for o in seen if len(o) == len(names)))  # the result's, fixed ones' first
    best: tuple[int, GemmLayout] | None = None
    for pick in itertools.product(*(orders[g] for g in ("batch", "m", "n", "k"))):
        bt, m, n, k = pick
        a_opts = [*_long_last(bt, m, k, size), a] if free[0] else [a, bt + m + k, bt + k + m]
        b_opts = [*_long_last(bt, k, n, size), b] if free[1] else [b, bt + k + n, bt + n + k]
        c_opts = [forced] if forced is not None else [out, bt + m + n, bt + n + m]
        for la, lb, lc in itertools.product(a_opts, b_opts, c_opts):
            cost = (
                (not free[0]) * copy_cost(a, la, size)
                + (not free[1]) * copy_cost(b, lb, size)
                + copy_cost(lc, out, size)
                + oriented(lc)
            )
            if (best is None or cost < best[0]) and _fits(la, lb, lc):
                best = (cost, GemmLayout(la, lb, lc))
    if best is None and forced is not None:
        return gemm_layout(a, b, out, extents, free, dtype)  # no GEMM writes the forced order: choose freely
    return None if best is None else best[1]


TRANSPOSE_COST = 3
"""Weight of a copy whose innermost axis was the source's second-innermost, against one that keeps the innermost
axis (per element): the first reads with the stride of one row on every element, the second copies whole rows.
A copy that brings an axis further out innermost weighs one more (its reads stride over whole planes)."""


LONG_CONTIGUOUS: dict[str, bool] = {"float64": True}
"""Per dtype, whether BLAS runs a skinny GEMM faster with the long side of its result contiguous (True) or the short
side (False); a dtype not listed has no preference. NumPy's OpenBLAS (0.3.30, SkylakeX kernels, Zen 5, 2 threads and
one), float64, the same product written both ways round (ms, long side contiguous vs short side): 4096×4096 @
4096×256 43.2 vs 47.4; 2048×2048 @ 2048×128 5.76 vs 6.76; 1500×1500 @ 1500×10 0.60 vs 0.76 (one thread 0.88 vs
1.35); 1024³ and 4096×512 @ 512×4096 within 2%. float32 has no consistent side: short contiguous wins when the
left factor is the tall one (4096×4096 @ 4096×256: 18.4 vs 21.0 ms), long contiguous or neither when it is the
wide one (10×1500 @ 1500×1500, one thread: 0.52 vs 0.66 ms; two threads: equal)."""

ORIENTATION_ASPECT = 4
"""The wrong orientation counts only when the result's long side is this many times its short side (nearly square
products run as fast either way round)."""

ORIENTATION_LOSS = 0.1
"""The fraction of a GEMM's time the wrong orientation is taken to lose (measured 10-50%; the low end, so a copy
is added only where it surely pays)."""

MACS_PER_COPY_UNIT = 13
"""Multiply-adds a GEMM does (on all cores) in the time a copy spends on one unit of :func:`copy_cost`: the
tiled transposing copy of a 4096 × 256 float64 matrix (3 units per element) takes 0.40 ms on two threads, where
OpenBLAS does 203 GFLOP/s (0.13 ns per unit, 0.0099 ns per multiply-add)."""


ORIENTATION_FIXED = 300_000
"""What turning a result round costs beyond its copy, in copy units (about 40 µs): the copy's own parallel nest and
the buffer the GEMM then writes. 512 × 512 @ 512 × 64 float64 took 0.222 ms written as it is and 0.263 ms turned
round (512 × 512 @ 512 × 16: 0.098 against 0.119 ms), where the copy itself moves 32K elements (about 4 µs)."""


def orientation_cost(
    c: tuple[str, ...], groups: Mapping[str, Sequence[str]], extents: Mapping[str, int], dtype: np.dtype
) -> int:
    """What writing a GEMM's result in order ``c`` loses to the other way round, in :func:`copy_cost` units.

    BLAS is column-major, so the result's contiguous side (the group holding
    ``c``'s last index) is its M. For a dtype in :data:`LONG_CONTIGUOUS`, a
    result whose contiguous side is the wrong one of a skinny product
    (:data:`ORIENTATION_ASPECT`) costs :data:`ORIENTATION_LOSS` of the
    product's multiply-adds, in copy units (:data:`MACS_PER_COPY_UNIT`), less
    the fixed cost of turning it round (:data:`ORIENTATION_FIXED`), so a small
    product keeps its order. Nothing when an extent is unknown (the per-shape
    plan decides then).
    """
    want = LONG_CONTIGUOUS.get(np.dtype(dtype).name)
    if want is None or not c or any(n not in extents for g in groups.values() for n in g):
        return 0
    inner = next((g for g in ("m", "n") if c[-1] in groups[g]), None)
    if inner is None:
        return 0
    size = {g: math.prod(extents[n] for n in names) for g, names in groups.items()}
    contiguous, other = size[inner], size["n" if inner == "m" else "m"]
    long, short = max(contiguous, other), min(contiguous, other)
    if long < ORIENTATION_ASPECT * short or (contiguous == long) == want:
        return 0
    return max(0, int(ORIENTATION_LOSS * math.prod(size.values()) / MACS_PER_COPY_UNIT) - ORIENTATION_FIXED)


def copy_cost(src: tuple[str, ...], dst: tuple[str, ...], size: Callable[[Sequence[str]], int]) -> int:
    """What copying a tensor from axis order ``src`` into ``dst`` costs: nothing when equal, else its elements,
    weighted by how far out in ``src`` the axis that ``dst`` makes innermost lies (:data:`TRANSPOSE_COST`)."""
    if src == dst:
        return 0
    depth = len(src) - 1 - src.index(dst[-1])  # 0: the innermost axis stays innermost
    weight = 1 if depth == 0 else TRANSPOSE_COST if depth == 1 else TRANSPOSE_COST + 1
    return size(src) * weight


def _long_last(
    bt: tuple[str, ...], x: tuple[str, ...], y: tuple[str, ...], size: Callable[[Sequence[str]], int]
) -> list[tuple[str, ...]]:
    """A free intermediate's two orders, the one ending in the larger group first (ties go to it).

    The intermediate is the result of the GEMM that produces it, and OpenBLAS runs a skinny product faster
    with the long side contiguous in its result: 10×1500 @ 1500×1500 written as [10, 1500] takes 0.95-1.0 ms
    whichever operands are transposed, written as [1500, 10] 1.15-1.67 ms (float64, 2 threads).
    """
    return [bt + x + y, bt + y + x] if size(y) >= size(x) else [bt + y + x, bt + x + y]


@functools.lru_cache(maxsize=4096)
def _fits(a: tuple[str, ...], b: tuple[str, ...], out: tuple[str, ...]) -> bool:
    dims = list(dict.fromkeys(out + a + b))
    return gemm_plan([dims.index(n) for n in a], [dims.index(n) for n in b], [dims.index(n) for n in out]) is not None


def describe_gemm(
    a: Sequence[str],
    b: Sequence[str],
    out: Sequence[str],
    extents: Mapping[str, int],
    dtype: np.dtype,
    result: Sequence[str] | None = None,
) -> dict[str, object] | None:
    """The BLAS call(s) of one pairwise contraction for ``runner.explain()``: routine, batch, m, n, k, flags and the
    copies made first (``result``: the order a per-shape plan had the GEMM write); None when it stays a loop nest."""
    prefix = "d" if np.dtype(dtype).itemsize == 8 else "s"
    layout = gemm_layout(a, b, out, extents, dtype=dtype, result=result)
    if layout is None:
        return None
    dims = list(dict.fromkeys(layout.c + layout.a + layout.b))
    plan = gemm_plan(
        [dims.index(x) for x in layout.a], [dims.index(x) for x in layout.b], [dims.index(x) for x in layout.c]
    )
    assert plan is not None

    def size(group: list[int]) -> int:
        return math.prod(extents[dims[d]] for d in group)

    copies = [name for name, was, now in (("lhs", a, layout.a), ("rhs", b, layout.b)) if tuple(was) != now]
    if layout.c != tuple(out):
        copies.append("result")
    return {
        "call": f"{prefix}gemm",
        "batch": size(plan.batch),
        "m": size(plan.m),
        "n": size(plan.n),
        "k": size(plan.k),
        "trans_a": plan.trans_a,
        "trans_b": plan.trans_b,
        "swap": plan.swap,
        "copies": copies,
    }


@dataclass(frozen=True)
class GemmSite:
    """A GEMM whose result orientation is planned per shape, as a warm start keeps it (no IR): its position among
    the module's top-level ops, its factors' and result's index names, its dtype, and for every index the program
    input and axis its extent comes from."""

    position: int
    factors: tuple[tuple[str, ...], tuple[str, ...]]
    result: tuple[str, ...]
    dtype: str
    extents: tuple[tuple[str, str, int], ...]  # (index, input name, axis)

    def to_json(self) -> dict[str, object]:
        """The site as JSON values (the warm start index's header)."""
        return {
            "position": self.position,
            "factors": [list(f) for f in self.factors],
            "result": list(self.result),
            "dtype": self.dtype,
            "extents": [list(e) for e in self.extents],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> GemmSite:
        """The inverse of :meth:`to_json` (a ValueError, TypeError or KeyError for anything else)."""
        f0, f1 = data["factors"]
        extents = tuple((str(n), str(x), int(a)) for n, x, a in data["extents"])
        return GemmSite(
            int(data["position"]),
            (tuple(map(str, f0)), tuple(map(str, f1))),
            tuple(map(str, data["result"])),
            str(data["dtype"]),
            extents,
        )

    def result_order(self, shapes: Mapping[str, tuple[int, ...]]) -> tuple[str, ...] | None:
        """The order the GEMM should write for these input shapes (by name) when it is not the result's own
        (:func:`gemm_layout` with the dtype's orientation); None when it is, or a shape lacks an axis."""
        try:
            ext = {n: int(shapes[x][a]) for n, x, a in self.extents}
        except (KeyError, IndexError):
            return None
        macs = math.prod(ext.values())
        if ORIENTATION_LOSS * macs / MACS_PER_COPY_UNIT <= ORIENTATION_FIXED and _fits(*self.factors, self.result):
            return None  # too small to turn round (orientation_cost is 0) and one GEMM writes its own order
        layout = gemm_layout(self.factors[0], self.factors[1], self.result, ext, dtype=np.dtype(self.dtype))
        return None if layout is None or layout.c == self.result else layout.c


Orientation = tuple[tuple[int, tuple[str, ...]], ...]
"""The result orders chosen for one shape: (site position, order) for each GEMM that writes another order."""


def orientation(sites: Sequence[GemmSite], shapes: Mapping[str, tuple[int, ...]]) -> Orientation:
    """The result orders these input shapes (by name) give the sites (empty: every GEMM writes its own order)."""
    return tuple((s.position, o) for s in sites if (o := s.result_order(shapes)) is not None)


def orientation_tag(choice: Orientation) -> str:
    """The text naming ``choice`` in a planned variant's digest (:meth:`fuse_mlir.lowered.Lowered.derived`)."""
    return "gemm_result " + ";".join(f"{k}:{','.join(o)}" for k, o in choice)
