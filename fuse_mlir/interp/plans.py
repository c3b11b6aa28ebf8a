"""Per-op plans: what a walker needs decoded from a tensor_eq op's attributes, computed once per op and cached.

The reference interpreter and the array walker of the torch/jax backends
both read these instead of re-parsing index-name arrays, projections,
parameters and access axes at every op of every run (a fixpoint body runs
its ops many times). A plan is pure attribute decoding (names, positions,
axes, dtypes, einsum subscripts) and never touches values, so sharing it
keeps the reference interpreter independent: each walker computes values
its own way. Plans are keyed weakly by the op and rebuilt when the op's
attributes or value types are replaced.
"""

from __future__ import annotations

import string
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation

from fuse_mlir.diagnostics import FuseRuntimeError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import source_loc

OpT = TypeVar("OpT", bound=Operation)
P = TypeVar("P")


_CACHES: list[weakref.WeakKeyDictionary[Operation, Any]] = []


def cached_per_op(build: Callable[[OpT], P]) -> Callable[[OpT], P]:
    """``build`` memoised per op (weakly: a dropped op takes its plan with it; ids are reused).

    The entry remembers the attribute and operand/result type objects it was
    built from (xDSL attributes are immutable, so identity is enough) and is
    rebuilt when a pass has replaced one of them in place.
    """
    cache: weakref.WeakKeyDictionary[Operation, tuple[tuple[Any, ...], P]] = weakref.WeakKeyDictionary()
    _CACHES.append(cache)

    def plan(op: OpT) -> P:
        stamp = (
            *op.attributes.values(),
            *op.properties.values(),
            *(r.type for r in op.results),
            *(v.type for v in op.operands),
        )
        hit = cache.get(op)
        if hit is not None and len(hit[0]) == len(stamp) and all(a is b for a, b in zip(hit[0], stamp)):
            return hit[1]
        made = build(op)
        cache[op] = (stamp, made)
        return made

    plan.__doc__ = build.__doc__
    plan.__name__ = build.__name__
    return plan


def clear_plans() -> None:
    """Forget every cached plan (they are rebuilt on next use); for measuring what the caching saves."""
    for cache in _CACHES:
        cache.clear()


@lru_cache(maxsize=4096)
def einsum_spec(names: tuple[tuple[Hashable, ...], ...], out: tuple[Hashable, ...]) -> str:
    """The einsum subscripts for operands with axes ``names`` and result axes ``out`` (at most 52 distinct names).

    Letters are given in order of first appearance, so equal name lists give equal text in every walker.
    """
    letters: dict[Hashable, str] = {}
    for ns in names:
        for n in ns:
            if n not in letters:
                letters[n] = string.ascii_letters[len(letters)]
    return ",".join("".join(letters[n] for n in ns) for ns in names) + "->" + "".join(letters[n] for n in out)


def index_constant(op: arith.ConstantOp) -> int:
    """The value of an index constant (extents and offsets); any other constant is a malformed module."""
    value = op.value
    if not isinstance(value, IntegerAttr):
        raise FuseRuntimeError(f"an index constant must be an integer, not {value}", source_loc(op))
    return int(value.value.data)


# -- access --------------------------------------------------------------------

AccessAxis = tuple[str, Any]


@dataclass(frozen=True)
class AccessPlan:
    """A ``te.access`` decoded: result names, the gather operands' names, and one axis per source axis."""

    out: tuple[str, ...]
    gather_names: tuple[tuple[str, ...], ...]
    axes: tuple[te.AccessAxisAttr, ...]
    dtype: np.dtype


@cached_per_op
def access_op_plan(op: te.AccessOp) -> AccessPlan:
    """The attribute part of reading a ``te.access`` (its shape-dependent part is :func:`access_plan`)."""
    return AccessPlan(
        te.names_of(op.indices), te.names_of_each(op.gather_indices), tuple(op.axis_list()), te.dtype_of(op.result)
    )


def access_plan(
    op: te.AccessOp, src_shape: Sequence[int], gather_shapes: Sequence[Sequence[int]], loc: Loc | None
) -> tuple[list[AccessAxis], list[int]]:
    """How a ``te.access`` reads its source: one ``(kind, value)`` per source axis, and the result's shape.

    Kinds: ``name`` (value: the index), ``pos`` (a fixed position), ``slice``
    (value: (index, range)), ``offset`` (value: (index, offset); out of range
    reads 0) and ``gather`` (value: the gather operand's number). Extents are
    checked against each other here, from shapes alone, so every walker of
    tensor_eq reports the same errors.
    """
    plan = access_op_plan(op)
    ext: dict[str, int] = {}

    def set_ext(name: str, n: int, what: str) -> None:
        if name in ext and ext[name] != n:
            raise FuseRuntimeError(f"index {name} is {ext[name]} but {n} in {what}", loc)
        ext[name] = n

    parsed: list[AccessAxis] = []
    for k, a in enumerate(plan.axes):
        n = src_shape[k]
        match a.axis_kind:
            case te.AxisKind.POSITION:
                parsed.append(("pos", a.value))
            case te.AxisKind.SLICE:
                r = range(n)[slice(*a.slice_bounds())]
                set_ext(a.index_name, len(r), f"slice {a.index_name}")
                parsed.append(("slice", (a.index_name, r)))
            case te.AxisKind.GATHER:
                parsed.append(("gather", a.value))
            case te.AxisKind.OFFSET:
                parsed.append(("offset", (a.index_name, a.value)))
            case _:
                set_ext(a.index_name, n, f"axis {k}")
                parsed.append(("name", a.index_name))
    for k, (kind, val) in enumerate(parsed):
        if kind == "offset" and val[0] not in ext:
            ext[val[0]] = src_shape[k]
    for shape, names in zip(gather_shapes, plan.gather_names):
        for name, size in zip(names, shape):
            set_ext(name, size, "an index tensor")
    for k, (kind, val) in enumerate(parsed):
        if kind == "pos" and not 0 <= val < src_shape[k]:
            raise FuseRuntimeError(f"position {val} is out of range for axis {k} (extent {src_shape[k]})", loc)
    return parsed, [ext[n] for n in plan.out]


# -- contractions and reductions ---------------------------------------------------


@dataclass(frozen=True)
class ContractPlan:
    """A ``te.contract`` decoded: operand and result names, the projection, the result dtype."""

    names: tuple[tuple[str, ...], ...]
    out: tuple[str, ...]
    projection: str
    dtype: np.dtype
    projected: tuple[str, ...]  # the names summed/maxed away, in order of first appearance
    in_dtypes: tuple[np.dtype, ...]

    def mean_work_dtype(self, in_dtypes: Sequence[np.dtype]) -> np.dtype:
        """The dtype a mean accumulates in before rounding to the result: float64 for an integer result."""
        return np.result_type(*in_dtypes, np.float64 if self.dtype.kind != "f" else self.dtype)


@cached_per_op
def contract_plan(op: te.ContractOp) -> ContractPlan:
    """The attributes of a ``te.contract`` as names, projection and dtypes."""
    names = te.names_of_each(op.operand_indices)
    out = te.names_of(op.indices)
    seen: dict[str, None] = {}
    for ns in names:
        for n in ns:
            seen.setdefault(n, None)
    return ContractPlan(
        names,
        out,
        op.projection.data,
        te.dtype_of(op.result),
        tuple(n for n in seen if n not in out),
        tuple(te.dtype_of(v) for v in op.inputs),
    )


@dataclass(frozen=True)
class ReducePlan:
    """A ``te.reduce`` decoded: the operand's names, the reduced axis positions, the kept names, kind, dtype."""

    names: tuple[str, ...]
    out: tuple[str, ...]
    axes: tuple[int, ...]
    kept: tuple[str, ...]
    kind: str
    dtype: np.dtype


@cached_per_op
def reduce_plan(op: te.ReduceOp) -> ReducePlan:
    """Which axes a ``te.reduce`` folds and in which order the kept ones come."""
    names = te.names_of_each(op.operand_indices)[0]
    out = te.names_of(op.indices)
    return ReducePlan(
        names,
        out,
        tuple(k for k, n in enumerate(names) if n not in out),
        tuple(n for n in names if n in out),
        op.kind.data,
        te.dtype_of(op.result),
    )


# -- elementwise, per-axis and layout ops ------------------------------------------


@dataclass(frozen=True)
class MapPlan:
    """A ``te.map`` (or ``te.axis``) decoded: operand and result names, function, parameters, dtype."""

    names: tuple[tuple[str, ...], ...]
    out: tuple[str, ...]
    fn: str
    params: dict[str, Any]
    dtype: np.dtype
    in_dtypes: tuple[np.dtype, ...]
    axis: int = -1  # te.axis: the position of its axis in ``out``


@cached_per_op
def map_plan(op: te.MapOp) -> MapPlan:
    """The function, parameters and name alignment of a ``te.map``."""
    return MapPlan(
        te.names_of_each(op.operand_indices),
        te.names_of(op.indices),
        op.fn.data,
        te.params_of(op.params),
        te.dtype_of(op.result),
        tuple(te.dtype_of(v) for v in op.inputs),
    )


@cached_per_op
def axis_plan(op: te.AxisOp) -> MapPlan:
    """The function, parameters, name alignment and axis position of a ``te.axis`` (softmax, lnorm, ...)."""
    out = te.names_of(op.indices)
    return MapPlan(
        te.names_of_each(op.operand_indices),
        out,
        op.fn.data,
        te.params_of(op.params),
        te.dtype_of(op.result),
        tuple(te.dtype_of(v) for v in op.inputs),
        out.index(op.axis.data),
    )


@dataclass(frozen=True)
class LayoutPlan:
    """A one-operand layout op (``te.broadcast``, ``te.place``) decoded: operand and result names, dtype."""

    names: tuple[str, ...]
    out: tuple[str, ...]
    dtype: np.dtype
    positions: tuple[int, ...] = ()  # te.place: the fixed position per result axis (-1: a free axis)
    free: tuple[str, ...] = ()  # te.place: the names of the free axes, in result order


@cached_per_op
def broadcast_plan(op: te.BroadcastOp) -> LayoutPlan:
    """The operand's and the result's names of a ``te.broadcast``."""
    return LayoutPlan(te.names_of_each(op.operand_indices)[0], te.names_of(op.indices), te.dtype_of(op.result))


@cached_per_op
def place_plan(op: te.PlaceOp) -> LayoutPlan:
    """The operand's names and the fixed positions of a ``te.place``."""
    out = te.names_of(op.indices)
    pos = tuple(op.position_list())
    free = tuple(n for n, p in zip(out, pos) if p < 0)
    return LayoutPlan(te.names_of_each(op.operand_indices)[0], out, te.dtype_of(op.result), pos, free)


@dataclass(frozen=True)
class ConcatPlan:
    """A ``te.concat`` decoded: each operand's names with its part axis renamed to the joined axis."""

    names: tuple[tuple[str, ...], ...]
    out: tuple[str, ...]
    pos: int
    dtype: np.dtype


@cached_per_op
def concat_plan(op: te.ConcatOp) -> ConcatPlan:
    """The operand names (part axis renamed to the joined one) and the joined axis's position."""
    out = te.names_of(op.indices)
    axis = op.axis.data
    names = tuple(
        tuple(axis if n == part else n for n in ns)
        for ns, part in zip(te.names_of_each(op.operand_indices), te.names_of(op.operand_axes))
    )
    return ConcatPlan(names, out, out.index(axis), te.dtype_of(op.result))


@dataclass(frozen=True)
class BlockPlan:
    """A ``te.block`` decoded: function, operand names, roles, parameters and the outputs' dtypes."""

    fn: str
    names: tuple[tuple[str, ...], ...]
    roles: dict[str, Any]
    params: dict[str, Any]
    dtypes: tuple[np.dtype, ...]


@cached_per_op
def block_plan(op: te.BlockOp) -> BlockPlan:
    """The function, roles and parameters of a ``te.block`` (attention, rope, tucker_dense, topk)."""
    return BlockPlan(
        op.fn.data,
        te.names_of_each(op.operand_indices),
        te.params_of(op.roles),
        te.params_of(op.params),
        tuple(te.dtype_of(r) for r in op.outputs),
    )


def scatter_plan(
    op: te.ScatterAddOp,
    upd_shape: Sequence[int],
    gather_shapes: Sequence[Sequence[int]],
    extents: Sequence[int],
    loc: Loc | None,
) -> list[int]:
    """The shape of a ``te.scatter_add``'s result; each index tensor's extents are checked against the update's
    (from shapes alone, so every backend that walks tensor_eq reports the same errors)."""
    ext = dict(zip(op.update_names(), upd_shape))
    for shape, names in zip(gather_shapes, te.names_of_each(op.gather_indices)):
        for n, size in zip(names, shape):
            if ext[n] != size:
                raise FuseRuntimeError(f"index {n} is {ext[n]} in the update but {size} in an index tensor", loc)
    sizes = iter(extents)
    return [next(sizes) if a.axis_kind == te.AxisKind.GATHER else ext[a.index_name] for a in op.axis_list()]


SCATTER_RANGE = "scattered index {0} is out of range for axis {1} (extent {2})"
"""The error of a scatter-add position outside the result (index value, axis, extent)."""
