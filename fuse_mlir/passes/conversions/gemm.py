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

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

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
    reorder, and then its order follows ``out``'s. None when no index grouping
    fits: an index on one operand only that the result lacks (it is summed
    first), or repeated names.
    """
    a, b, out = tuple(a), tuple(b), tuple(out)
    if _fits(a, b, out) and not any(free):
        return GemmLayout(a, b, out)
    if any(n not in out and n not in b for n in a) or any(n not in out and n not in a for n in b):
        return None
    ext = extents or {}

    def size(names: Sequence[str]) -> int:
        return math.prod(ext.get(n, ASSUMED_EXTENT) for n in names)

    groups = {
        "batch": [n for n in out if n in a and n in b],
        "m": [n for n in out if n in a and n not in b],
        "n": [n for n in out if n in b and n not in a],
        "k": [n for n in a if n in b and n not in out],
    }
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
        c_opts = [out, bt + m + n, bt + n + m]
        for la, lb, lc in itertools.product(a_opts, b_opts, c_opts):
            cost = (
                (not free[0]) * copy_cost(a, la, size)
                + (not free[1]) * copy_cost(b, lb, size)
                + copy_cost(lc, out, size)
            )
            if (best is None or cost < best[0]) and _fits(la, lb, lc):
                best = (cost, GemmLayout(la, lb, lc))
    return None if best is None else best[1]


TRANSPOSE_COST = 3
"""Weight of a copy whose innermost axis was the source's second-innermost, against one that keeps the innermost
axis (per element): the first reads with the stride of one row on every element, the second copies whole rows.
A copy that brings an axis further out innermost weighs one more (its reads stride over whole planes)."""


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


def _fits(a: tuple[str, ...], b: tuple[str, ...], out: tuple[str, ...]) -> bool:
    dims = list(dict.fromkeys(out + a + b))
    return gemm_plan([dims.index(n) for n in a], [dims.index(n) for n in b], [dims.index(n) for n in out]) is not None


def describe_gemm(
    a: Sequence[str], b: Sequence[str], out: Sequence[str], extents: Mapping[str, int], prefix: str
) -> dict[str, object] | None:
    """The BLAS call(s) of one pairwise contraction for ``runner.explain()``: routine, batch, m, n, k, flags and the
    copies made first; None when it stays a loop nest."""
    layout = gemm_layout(a, b, out, extents)
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
