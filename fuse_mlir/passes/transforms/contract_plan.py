"""Contraction orders chosen on the real extents: a FLOPs + bytes cost model, and per-shape plans at run time.

A product of three or more factors is evaluated as a tree of pairwise
contractions; which tree is cheap depends on the extents (``X[i,j] Y[j,k]
Z[k,l]`` with i = 10 wants ``(X Y) Z``; with l = 10, ``X (Y Z)``). Extents
stay symbolic in the IR, so the order is chosen when a call's shapes are
known: :class:`ShapePlans` infers every n-way contraction's index extents
from the input shapes, finds the cheapest order (:func:`optimal_path`),
writes it on the op as a ``path`` attribute of a copy of the module (which
``contract-order`` then follows), and caches that copy by the tuple of input
shapes, as ``jax.jit`` caches per shape. Shapes that lead to the same orders
share one copy (and so one compiled kernel); a repeated shape costs one
dict lookup. The same planner picks, per shape, which way round a float64
GEMM of two factors writes its result (BLAS runs a skinny product faster
one way, :func:`~fuse_mlir.gemm.orientation_cost`): a
``gemm_result`` attribute when the other order, plus a copy, pays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, UnitAttr, i64
from xdsl.ir import Operation

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.gemm import (
    LONG_CONTIGUOUS,
    GemmLayout,
    GemmSite,
    Orientation,
    blas_product,
    gemm_layout,
    orientation,
    orientation_tag,
)
from fuse_mlir.lowered import ShapeDispatch
from fuse_mlir.passes.conversions.te_to_ew.contract import RESULT_ATTR

if TYPE_CHECKING:
    from fuse_mlir.lowered import Lowered

BYTE_COST = 4.0
"""FLOPs one byte moved is worth in the cost model: roughly a core's FMA rate over its share of memory bandwidth."""

MAX_OPTIMAL = 8
"""Most factors searched exhaustively (3^n subset pairs); larger products are ordered greedily."""

PATH_ATTR = "path"
"""The ``te.contract`` attribute holding a chosen order: opt_einsum-style position pairs (see ``contract-order``)."""

ORDERS_ATTR = "orders"
"""The ``te.contract`` attribute holding a plan's axis order of each step's result (:func:`step_orders` with the
call's extents), beside its ``path``: which way round a skinny intermediate is written decides how fast BLAS runs."""

NONEMPTY_ATTR = "nonempty"
"""The ``te.contract`` unit attribute a per-shape plan sets when every index the product projects has a positive
extent at the shapes its variant runs: ``contract-order`` then factors it without the guard that makes a sum over
an empty index read 0 (:func:`~fuse_mlir.passes.transforms.contract_order.guard_empty`), which costs a pass over
the result where the last step is a GEMM."""

Path = tuple[tuple[int, int], ...]


def pair_cost(a: frozenset[str], b: frozenset[str], keep: frozenset[str], ext: Mapping[str, int], item: int) -> float:
    """Cost of one pairwise contraction: 2 FLOPs per point of the joint index space plus the bytes read and written."""

    def size(names: frozenset[str]) -> int:
        return math.prod(ext[n] for n in names)

    return 2.0 * size(a | b) + BYTE_COST * item * (size(a) + size(b) + size(keep))


def one_call_result(a: frozenset[str], b: frozenset[str], out: Sequence[str]) -> bool:
    """Whether one (batched) GEMM can write ``out = sum a * b`` in ``out``'s own order: after its batch indices
    (on both operands), the indices from ``a`` form one run and those from ``b`` another. Else the last step
    is split into a GEMM per outer index, or its result copied (``R[i,j,k]`` from ``[j,b] [i,k,b]``)."""
    kinds = ["batch" if n in a and n in b else "a" if n in a else "b" for n in out]
    rest = kinds[next((k for k, kind in enumerate(kinds) if kind != "batch"), len(kinds)) :]
    return "batch" not in rest and sum(1 for x, y in zip(rest, rest[1:]) if x != y) <= 1


def result_copy_cost(
    a: frozenset[str], b: frozenset[str], out: Sequence[str], ext: Mapping[str, int], item: int
) -> float:
    """What a last step pays beyond :func:`pair_cost` for writing ``out`` in its own order: nothing when one GEMM
    call can (:func:`one_call_result`), else the bytes of copying the result (read and written)."""
    return 0.0 if one_call_result(a, b, out) else 2 * BYTE_COST * item * math.prod(ext[n] for n in out)


def optimal_path(
    names_each: Sequence[Sequence[str]],
    out: Sequence[str],
    ext: Mapping[str, int],
    itemsize: int = 8,
    max_optimal: int = MAX_OPTIMAL,
) -> tuple[Path, float]:
    """The cheapest pairwise order of a sum contraction (position pairs, as opt_einsum's paths) and its cost.

    Exhaustive over subsets (dynamic programming) up to ``max_optimal``
    factors, else greedy (the cheapest pair first). Each intermediate keeps
    exactly the indices still needed by another factor or the result. An
    intermediate's axis order is free (:func:`step_orders`), the result's is
    not: a last step that cannot write ``out`` in one call
    (:func:`one_call_result`) also pays a copy of the result, which decides
    between trees of equal FLOPs (a Tucker product's three orders of GEMMs:
    1.0 ms against 1.8 ms for one ending in 96 small GEMMs).
    """
    n = len(names_each)
    outset = frozenset(out)
    # An index on one factor only, and not in the result, is summed within that factor first (contract-order).
    sets = [
        frozenset(x for x in ns if x in outset or any(x in o for j, o in enumerate(names_each) if j != k))
        for k, ns in enumerate(names_each)
    ]
    full = (1 << n) - 1
    if n > max_optimal:
        return _greedy(sets, outset, ext, itemsize)
    keep: dict[int, frozenset[str]] = {}

    def kept(mask: int) -> frozenset[str]:
        hit = keep.get(mask)
        if hit is None:
            inside: set[str] = set()
            outside: set[str] = set(outset)
            for k in range(n):
                (inside if mask >> k & 1 else outside).update(sets[k])
            hit = keep[mask] = frozenset(inside & outside) if mask != full else outset
        return hit

    best: dict[int, tuple[float, int]] = {1 << k: (0.0, 0) for k in range(n)}
    for mask in range(1, full + 1):
        if mask & (mask - 1) == 0:
            continue
        low = mask & -mask
        here = kept(mask)
        choice: tuple[float, int] | None = None
        sub = (mask - 1) & mask
        while sub:
            if sub & low:  # each split once: the part holding the lowest factor
                rest = mask ^ sub
                c = best[sub][0] + best[rest][0] + pair_cost(kept(sub), kept(rest), here, ext, itemsize)
                if mask == full:
                    c += result_copy_cost(kept(sub), kept(rest), out, ext, itemsize)
                if choice is None or c < choice[0]:
                    choice = (c, sub)
            sub = (sub - 1) & mask
        assert choice is not None
        best[mask] = choice
    steps: list[tuple[int, int]] = []

    def emit(mask: int) -> None:
        if mask & (mask - 1) == 0:
            return
        sub = best[mask][1]
        emit(sub)
        emit(mask ^ sub)
        steps.append((sub, mask ^ sub))

    emit(full)
    return _positions(n, steps), best[full][0]


def _greedy(
    sets: list[frozenset[str]], outset: frozenset[str], ext: Mapping[str, int], itemsize: int
) -> tuple[Path, float]:
    """Contract the cheapest pair (by the cost model) until one factor is left; O(n³) pair evaluations."""
    live: list[tuple[int, frozenset[str]]] = [(1 << k, s) for k, s in enumerate(sets)]
    steps: list[tuple[int, int]] = []
    total = 0.0
    while len(live) > 1:
        pick: tuple[float, int, int, frozenset[str]] | None = None
        for x in range(len(live)):
            for y in range(x + 1, len(live)):
                others = set(outset)
                for z, (_, s) in enumerate(live):
                    if z not in (x, y):
                        others |= s
                keep = (live[x][1] | live[y][1]) & frozenset(others) if len(live) > 2 else outset
                c = pair_cost(live[x][1], live[y][1], keep, ext, itemsize)
                if pick is None or c < pick[0]:
                    pick = (c, x, y, keep)
        assert pick is not None
        c, x, y, keep = pick
        total += c
        steps.append((live[x][0], live[y][0]))
        merged = (live[x][0] | live[y][0], keep)
        live = [e for z, e in enumerate(live) if z not in (x, y)] + [merged]
    return _positions(len(sets), steps), total


def _positions(n: int, steps: Sequence[tuple[int, int]]) -> Path:
    """Subset-pair steps as opt_einsum-style position pairs into the shrinking operand list (new ones appended)."""
    live = [1 << k for k in range(n)]
    path: list[tuple[int, int]] = []
    for a, b in steps:
        i, j = sorted((live.index(a), live.index(b)))
        path.append((i, j))
        live.pop(j)
        live.pop(i)
        live.append(a | b)
    return tuple(path)


def path_flops(names_each: Sequence[Sequence[str]], out: Sequence[str], ext: Mapping[str, int], path: Path) -> int:
    """FLOPs of a sum contraction evaluated in ``path``'s pairwise order (2 per point of each step's joint space).

    An index on one factor only, and not in the result, is summed within that
    factor first (one add per element of the factor), as ``contract-order``
    and :func:`optimal_path` do; each intermediate keeps the indices still
    needed by another factor or the result.
    """
    outset = frozenset(out)
    flops = 0
    live: list[frozenset[str]] = []
    for k, ns in enumerate(names_each):
        shared = frozenset(x for x in ns if x in outset or any(x in o for j, o in enumerate(names_each) if j != k))
        if len(shared) < len(set(ns)):
            flops += math.prod(ext[n] for n in set(ns))
        live.append(shared)
    for i, j in path:
        a, b = live[i], live[j]
        live.pop(max(i, j))
        live.pop(min(i, j))
        flops += 2 * math.prod(ext[n] for n in a | b)
        others = set(outset).union(*live)
        live.append((a | b) & frozenset(others) if live else outset)
    return flops


def path_attr(path: Path) -> ArrayAttr:
    """A path as an attribute: an array of integer pairs."""
    return ArrayAttr([ArrayAttr([IntegerAttr(i, i64), IntegerAttr(j, i64)]) for i, j in path])


def path_of(op: Operation) -> Path | None:
    """The order written on a ``te.contract`` by a plan, or None."""
    attr = op.attributes.get(PATH_ATTR)
    if not isinstance(attr, ArrayAttr):
        return None
    return tuple((int(p.data[0].value.data), int(p.data[1].value.data)) for p in attr.data)


def step_orders(
    names: Sequence[Sequence[str]], out: Sequence[str], path: Sequence[tuple[int, int]], extents: dict[str, int]
) -> list[tuple[str, ...]]:
    """The axis order of each step's result: the last one is ``out``; every intermediate gets, top-down, the order
    its consumer's GEMM reads without a copy (:func:`~fuse_mlir.gemm.gemm_layout` with free operands), so
    the factor order written does not decide which copies are made."""
    live: list[tuple[str, int]] = [("leaf", k) for k in range(len(names))]
    children: list[list[tuple[str, int]]] = []
    natural: list[tuple[str, ...]] = []
    for step in path:
        picked = [live[k] for k in step]
        for k in sorted(step, reverse=True):
            live.pop(k)
        later = {n for kind, i in live for n in (names[i] if kind == "leaf" else natural[i])} | set(out)
        inside = [n for kind, i in picked for n in (names[i] if kind == "leaf" else natural[i])]
        natural.append(tuple(n for n in dict.fromkeys(inside) if n in later) if live else tuple(out))
        children.append(picked)
        live.append(("step", len(children) - 1))
    orders = list(natural)

    def index_set(kind: str, i: int) -> frozenset[str]:
        return frozenset(names[i] if kind == "leaf" else natural[i])

    for t in range(len(children) - 1, -1, -1):
        kids = children[t]
        if len(kids) != 2:
            continue
        own = [names[i] if kind == "leaf" else orders[i] for kind, i in kids]
        free = (kids[0][0] == "step", kids[1][0] == "step")
        layout = gemm_layout(own[0], own[1], orders[t], extents, free)
        if layout is None:
            continue
        chosen = [layout.a, layout.b]
        for side, (kind, i) in enumerate(kids):
            if kind != "step" or len(children[i]) != 2:
                continue
            # Of the orders this consumer reads without a copy, one its producer writes in one GEMM call.
            summed = tuple(n for n in chosen[side] if n not in orders[t])
            kept = tuple(n for n in chosen[side] if n in orders[t])
            a, b = (index_set(*kid) for kid in children[i])
            for cand in dict.fromkeys((chosen[side], kept + summed, summed + kept)):
                trial = list(chosen)
                trial[side] = cand
                reads = gemm_layout(trial[0], trial[1], orders[t], extents)
                if reads == GemmLayout(trial[0], trial[1], tuple(orders[t])) and one_call_result(a, b, cand):
                    chosen[side] = cand
                    break
        for (kind, i), want in zip(kids, chosen):
            if kind == "step":
                orders[i] = want
    return orders


def orders_attr(orders: Sequence[Sequence[str]]) -> ArrayAttr:
    """Step orders as an attribute: an array of arrays of index names."""
    return ArrayAttr([ArrayAttr([StringAttr(n) for n in o]) for o in orders])


def orders_of(
    op: Operation, names: Sequence[Sequence[str]], out: Sequence[str], path: Path
) -> list[tuple[str, ...]] | None:
    """The step orders a plan wrote on ``op`` for ``path``, or None (none written, or not a reordering of the
    steps' own index sets: an attribute edited by hand, or written for another path)."""
    attr = op.attributes.get(ORDERS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return None
    orders = [tuple(n.data for n in o.data) for o in attr.data]  # type: ignore[attr-defined]
    default = step_orders(names, out, path, {})
    if len(orders) != len(default) or any(sorted(o) != sorted(d) for o, d in zip(orders, default)):
        return None
    if orders[-1] != tuple(out):
        return None
    return orders


def is_nway(op: Operation) -> bool:
    """A sum contraction of three or more factors without repeated names: what ``contract-order`` splits."""
    return (
        isinstance(op, te.ContractOp)
        and op.projection.data == "sum"
        and len(op.inputs) >= 3
        and all(len(set(ns)) == len(ns) for ns in te.names_of_each(op.operand_indices))
    )


def is_oriented_gemm(op: Operation) -> bool:
    """A sum product of two factors that becomes one BLAS call whose speed depends on which way round it writes its
    result (a dtype in :data:`~fuse_mlir.gemm.LONG_CONTIGUOUS`): the planner picks that per shape."""
    if not (isinstance(op, te.ContractOp) and op.projection.data == "sum" and len(op.inputs) == 2):
        return False
    dtype = te.dtype_of(op.result)
    if dtype.name not in LONG_CONTIGUOUS:
        return False
    names = te.names_of_each(op.operand_indices)
    static = {n: e for v, ns in zip(op.inputs, names) for n, e in zip(ns, v.type.get_shape()) if e >= 0}  # type: ignore[attr-defined]
    return blas_product(names, te.names_of(op.indices), [te.dtype_of(v) for v in op.inputs], dtype, static)


SENTINEL = 10**12 + 7
"""The first of the distinct fake extents :func:`gemm_sites` gives the inputs' axes (far from any real extent)."""


def gemm_sites(lowered: Lowered) -> list[GemmSite] | None:
    """The module's GEMMs whose result orientation is planned per shape (:func:`is_oriented_gemm`), each with the
    program input and axis its every index's extent comes from; None when the module has an n-way product or an
    index whose extent is not simply an input's axis (then planning needs the IR).

    Found by inferring shapes once with a fake extent per input axis (:data:`SENTINEL` onwards) and reading which
    of them each index got. Axes the program checks equal (``te.check_dim`` of two inputs' ``te.dim``) share
    one fake extent, so shapes broadcast as a valid call's do; where an index still has several, the first
    factor's wins, as in :func:`~fuse_mlir.interp.shapes.extents_by_name` (only a size-1 broadcast axis would
    differ, and that only decides which way round a GEMM runs, never a value). Shapes that do not broadcast even
    so give None.
    """
    from fuse_mlir.interp.shapes import infer_shapes, op_index_extents

    ops = list(lowered.module.body.block.ops)
    if any(is_nway(op) for op in ops):
        return None
    gemms = [(k, op) for k, op in enumerate(ops) if is_oriented_gemm(op)]
    if not gemms:
        return []
    axes = [(spec.name, a) for spec in lowered.inputs for a in range(spec.rank)]
    parent = {x: x for x in axes}

    def root(x: tuple[str, int]) -> tuple[str, int]:
        while parent[x] != x:
            parent[x] = x = parent[parent[x]]
        return x

    def input_axis(v: Any) -> tuple[str, int] | None:
        op = v.owner
        if isinstance(op, te.DimOp) and isinstance(op.source.owner, te.InputOp):
            x = (op.source.owner.tensor_name.data, op.axis.value.data)
            return x if x in parent else None
        return None

    for op in ops:
        if isinstance(op, te.CheckDimOp) and op.predicate_name() == "eq":
            x, y = input_axis(op.lhs), input_axis(op.rhs)
            if x is not None and y is not None:
                parent[root(x)] = root(y)
    fake: dict[str, list[int]] = {spec.name: [] for spec in lowered.inputs}
    first: dict[tuple[str, int], tuple[str, int]] = {}  # each class's first axis in input order names it
    origin: dict[int, tuple[str, int]] = {}
    for x in axes:
        rep = first.setdefault(root(x), x)
        value = SENTINEL + axes.index(rep)
        fake[x[0]].append(value)
        origin[value] = rep
    try:
        shapes = infer_shapes(lowered.module, {n: tuple(v) for n, v in fake.items()}, lowered.sources)
    except ValueError:  # shapes that do not broadcast: planning needs the real ones
        return None
    sites = []
    for position, op in gemms:
        assert isinstance(op, te.ContractOp)
        names = te.names_of_each(op.operand_indices)
        try:
            ext = op_index_extents(op, shapes)
        except (KeyError, TypeError):
            return None
        every = list(dict.fromkeys(n for ns in names for n in ns))
        if any(ext.get(n) not in origin for n in every):
            return None
        f0, f1 = names
        extents = tuple((n, *origin[ext[n]]) for n in every)
        out, dtype = te.names_of(op.indices), te.dtype_of(op.result).name
        sites.append(GemmSite(position, (tuple(f0), tuple(f1)), out, dtype, extents))
    return sites


def set_result_orders(module: Any, choice: Orientation) -> None:
    """Write ``choice``'s result orders on the module's GEMMs (top-level ops by position) as :data:`RESULT_ATTR`:
    the edit of a planned variant (:meth:`~fuse_mlir.lowered.Lowered.derived`, tagged by
    :func:`~fuse_mlir.gemm.orientation_tag`)."""
    ops = list(module.body.block.ops)
    for k, order in choice:
        ops[k].attributes[RESULT_ATTR] = te.str_array(order)


def oriented_variant(lowered: Lowered, choice: Orientation) -> Lowered:
    """``lowered`` with its GEMMs writing ``choice``'s result orders: a derived lowering whose digest a warm start
    computes without the IR (the same as :class:`~fuse_mlir.modes.gemm_gate.GemmGate` makes)."""
    return lowered.derived(orientation_tag(choice), lambda module: set_result_orders(module, choice))


@dataclass
class Plan:
    """The orders chosen for one shape: per n-way contraction its factors, the path and its cost."""

    shapes: tuple[tuple[int, ...], ...]
    sites: list[dict[str, Any]]


@dataclass
class ShapePlans:
    """Per-shape contraction orders for one lowered module (see the module docstring).

    ``lowered_for(arrays)`` is the module copy whose n-way contractions carry
    the orders chosen for these arrays' shapes; ``plans`` counts the shapes
    planned (a repeated shape plans nothing), ``by_path`` holds one module
    copy (so one compiled kernel) per distinct choice of orders.
    """

    lowered: Lowered
    sites: list[int] = field(default_factory=list)  # positions of n-way contractions among the module's top-level ops
    by_shape: dict[tuple, tuple[Lowered, Plan]] = field(default_factory=dict)
    by_path: dict[tuple, Lowered] = field(default_factory=dict)
    plans: int = 0
    on_variant: Callable[[Lowered], None] | None = None  # told of each new planned copy (the runner maps it back)

    def __post_init__(self) -> None:
        self.names = [s.name for s in self.lowered.inputs]
        ops = list(self.lowered.module.body.block.ops)
        self.sites = [k for k, op in enumerate(ops) if is_nway(op)]
        self.gemms = [k for k, op in enumerate(ops) if is_oriented_gemm(op)]  # products whose result order is planned
        # The warm start's gate (modes/gemm_gate.py) decides from these without IR; deciding the same way here
        # keeps a shape on the same module in a cold process and a warm one.
        self.gemm_sites = gemm_sites(self.lowered) if self.gemms and not self.sites else None
        # The runner's direct calls (Python) and native entries of the variants, by shape. A GEMM-sides-only plan is
        # decided from the shapes alone (a few microseconds), so a new shape that plans as an earlier one runs that
        # one's call; an n-way plan infers shapes on the IR, so a new shape plans on the runner's general path.
        choose = self.lowered_for if self.gemm_sites is not None else None
        self.calls = ShapeDispatch(self.names, choose)
        self.native_calls = ShapeDispatch(self.names, choose)

    @staticmethod
    def needed(lowered: Lowered) -> bool:
        """Whether ``lowered`` has a contraction whose plan can depend on the run's shapes: an n-way product's order,
        or which way round a GEMM writes its result (:func:`is_oriented_gemm`)."""
        return any(is_nway(op) or is_oriented_gemm(op) for op in lowered.module.body.block.ops)

    def lowered_for(self, arrays: Mapping[str, Any]) -> Lowered:
        """The planned module for these arrays (one dict lookup when the shapes were seen before)."""
        key = tuple(arrays[n].shape for n in self.names)
        hit = self.by_shape.get(key)
        if hit is None:
            hit = self.by_shape[key] = self._plan(key)
        return hit[0]

    def plan_for(self, shapes: Mapping[str, tuple[int, ...]]) -> Plan | None:
        """The plan a call with these input shapes (by name) ran with (None when none was made)."""
        hit = self.by_shape.get(tuple(tuple(shapes[n]) for n in self.names))
        return None if hit is None else hit[1]

    def _plan(self, key: tuple) -> tuple[Lowered, Plan]:
        from fuse_mlir.interp.shapes import infer_shapes, op_index_extents

        self.plans += 1
        by_name = dict(zip(self.names, key))
        if self.gemm_sites is not None:  # GEMM sides only: decided as a warm start decides them
            choice = orientation(self.gemm_sites, by_name)
            if not choice:
                return self.lowered, Plan(key, [])  # every GEMM writes its result's own order: the module as it is
            variant = self.by_path.get(choice)
            if variant is None:
                variant = self.by_path[choice] = oriented_variant(self.lowered, choice)
                if self.on_variant is not None:
                    self.on_variant(variant)
            return variant, Plan(key, [])
        module = self.lowered.module
        shapes = infer_shapes(module, by_name, self.lowered.sources, checks=True)
        ops = list(module.body.block.ops)
        paths: list[tuple[Path, tuple[tuple[str, ...], ...], bool] | None] = []
        sites: list[dict[str, Any]] = []
        for k in self.sites:
            op = ops[k]
            assert isinstance(op, te.ContractOp)
            names = te.names_of_each(op.operand_indices)
            try:
                ext = op_index_extents(op, shapes)
                missing = [n for ns in names for n in ns if n not in ext]
            except (KeyError, TypeError):
                ext, missing = {}, ["?"]
            if missing:
                paths.append(None)  # an extent the shapes do not give: the compile-time order stays
                continue
            out = te.names_of(op.indices)
            itemsize = te.dtype_of(op.result).itemsize
            path, cost = optimal_path(names, out, ext, itemsize)
            positive = all(ext[n] > 0 for ns in names for n in ns if n not in out)
            paths.append((path, tuple(step_orders(names, out, path, ext)), positive))
            sites.append(
                {
                    "factors": [list(ns) for ns in names],
                    "result": list(out),
                    "extents": {n: int(ext[n]) for n in dict.fromkeys(n for ns in names for n in ns)},
                    "path": [list(p) for p in path],
                    "cost": cost,
                }
            )
        choice = tuple((k, o) for k in self.gemms if (o := self._result_order(ops[k], shapes)) is not None)
        pkey = (tuple(paths), choice)
        variant = self.by_path.get(pkey)
        if variant is None:
            copy = module.clone()
            copy_ops = list(copy.body.block.ops)
            for k, chosen in zip(self.sites, paths):
                if chosen is not None:
                    copy_ops[k].attributes[PATH_ATTR] = path_attr(chosen[0])
                    copy_ops[k].attributes[ORDERS_ATTR] = orders_attr(chosen[1])
                    if chosen[2]:
                        copy_ops[k].attributes[NONEMPTY_ATTR] = UnitAttr()
            set_result_orders(copy, choice)
            variant = self.by_path[pkey] = self.lowered.with_module(copy)
            if self.on_variant is not None:
                self.on_variant(variant)
        return variant, Plan(key, sites)

    @staticmethod
    def _result_order(op: Operation, shapes: Mapping[Any, Any]) -> tuple[str, ...] | None:
        """The order ``op``'s GEMM should write for these shapes when it is not the result's own (None: its own,
        or an extent the shapes do not give)."""
        from fuse_mlir.interp.shapes import op_index_extents

        assert isinstance(op, te.ContractOp)
        names = te.names_of_each(op.operand_indices)
        out = te.names_of(op.indices)
        try:
            ext = op_index_extents(op, shapes)
        except (KeyError, TypeError):
            return None
        if any(n not in ext for ns in names for n in ns):
            return None
        layout = gemm_layout(names[0], names[1], out, ext, dtype=te.dtype_of(op.result))
        return None if layout is None or layout.c == tuple(out) else layout.c


def contraction_text(row: Mapping[str, Any]) -> str:
    """One row of :func:`explain_contractions` as a line of ``runner.explain()``'s text."""

    def ref(ns: Sequence[str]) -> str:
        return "[" + ",".join(ns) + "]"

    if row["kind"] == "order":
        live = [ref(ns) for ns in row["factors"]]
        steps = []
        for i, j in row["path"]:
            pair = f"({live[i]} {live[j]})"
            live.pop(j)
            live.pop(i)
            live.append(pair)
            steps.append(pair)
        ext = " ".join(f"{n}={e}" for n, e in row["extents"].items())
        return f"order {' '.join(ref(ns) for ns in row['factors'])} -> {ref(row['result'])}: {live[0]} ({ext})"
    head = f"{' '.join(ref(ns) for ns in row['factors'])} -> {ref(row['result'])}: {row['call']}"
    if row["call"] == "loop":
        return head + " (fused loop nest)"
    flags = "".join(f" {k}" for k in ("trans_a", "trans_b") if row[k])
    first = [c for c in row["copies"] if c != "result"]
    copies = f", copies {','.join(first)} first" if first else ""
    if "result" in row["copies"]:
        copies += ", copies result after"
    return f"{head} batch={row['batch']} m={row['m']} n={row['n']} k={row['k']}{flags}{copies}"
