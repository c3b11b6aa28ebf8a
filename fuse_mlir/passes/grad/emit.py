"""Building blocks of the gradient transformation: named tensors and an emitter of tensor_eq ops.

The adjoint rules (:mod:`fuse_mlir.passes.grad.rules`) speak in named tensors
(:class:`T`: an SSA value and one index name per axis), like the language; the
:class:`Emitter` turns each step into one ``te`` op inserted before the
module's export, computing result dtypes with the same rules the frontend
uses, so the gradient module is an ordinary tensor_eq module that every pass
and backend accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.dtypes import contract_dtype, map_dtype, reduce_dtype


@dataclass(frozen=True)
class T:
    """A tensor value with one index name per axis (the names are local to the rule that made them)."""

    value: SSAValue
    names: tuple[str, ...]

    @property
    def dtype(self) -> np.dtype:
        return te.dtype_of(self.value)


def rename(t: T, names: Sequence[str]) -> T:
    """The same tensor with its axes named ``names`` (positional: no data moves)."""
    assert len(names) == len(t.names)
    return T(t.value, tuple(names))


def union(*lists: Sequence[str]) -> tuple[str, ...]:
    """The names of ``lists`` in order of first appearance."""
    return tuple(dict.fromkeys(n for ns in lists for n in ns))


class Extents:
    """Extents by index name, read lazily (one ``te.dim``) from the first tensor that has the name."""

    def __init__(self, em: Emitter, *tensors: T):
        self.em = em
        self.tensors = tensors

    def __getitem__(self, name: str) -> SSAValue:
        for t in self.tensors:
            if name in t.names:
                return self.em.dim(t, name)
        raise KeyError(name)


class Emitter:
    """Inserts tensor_eq ops before ``anchor`` (the module's export) and remembers extents it already asked for."""

    def __init__(self, block: Block, anchor: Operation):
        self.block = block
        self.anchor = anchor
        self._dims: dict[tuple[SSAValue, int], SSAValue] = {}
        self._iotas: dict[SSAValue, SSAValue] = {}
        self._consts: dict[tuple[str, str], SSAValue] = {}
        self._fresh = 0

    # -- plumbing ------------------------------------------------------------

    def op(self, op: Operation) -> Operation:
        self.block.insert_op_before(op, self.anchor)
        return op

    def fresh(self) -> str:
        """A new index name, distinct from every name the frontend writes (those never start with ``_``)."""
        self._fresh += 1
        return f"_g{self._fresh}"

    @staticmethod
    def ttype(dtype: np.dtype, rank: int) -> te.TensorType:
        return te.tensor_type(dtype, [te.DYNAMIC] * rank)

    def dim(self, t: T, name: str) -> SSAValue:
        """The extent of axis ``name`` of ``t`` (one ``te.dim`` per value and axis)."""
        key = (t.value, t.names.index(name))
        v = self._dims.get(key)
        if v is None:
            v = self._dims[key] = self.op(te.DimOp(*key)).results[0]
        return v

    # -- leaves --------------------------------------------------------------

    def const(self, value: float | int, dtype: np.dtype) -> T:
        """A 0-d constant (one per value and dtype)."""
        dtype = np.dtype(dtype)
        key = (repr(value), dtype.name)
        v = self._consts.get(key)
        if v is None:
            v = self._consts[key] = self.op(te.ConstantOp(np.asarray(value, dtype=dtype), [])).results[0]
        return T(v, ())

    def iota(self, extent: SSAValue, name: str) -> T:
        """Positions 0..n-1 (int64) along one axis of extent ``extent``."""
        v = self._iotas.get(extent)
        if v is None:
            ty = self.ttype(np.dtype(np.int64), 1)
            v = self._iotas[extent] = self.op(te.GenerateOp("iota", [extent], ["_p"], ty)).results[0]
        return T(v, (name,))

    def extent_scalar(self, extent: SSAValue) -> T:
        """The extent ``n`` as a 0-d int64 tensor (the sum of ``n`` ones: 0 for an empty axis)."""
        name = self.fresh()
        ones = self.broadcast(self.const(1, np.dtype(np.int64)), (name,), {name: extent})
        return self.contract([ones], ())

    # -- computation -----------------------------------------------------------

    def map(self, fn: str, *args: T, params: dict[str, object] | None = None) -> T:
        """An elementwise op over the union of the arguments' names (broadcast by name)."""
        out = union(*(a.names for a in args))
        dtype = map_dtype(fn, [a.dtype for a in args], params or {})
        op = te.MapOp(fn, [a.value for a in args], [a.names for a in args], out, self.ttype(dtype, len(out)), params)
        return T(self.op(op).results[0], out)

    def contract(self, args: Sequence[T], out: Sequence[str], projection: str = "sum") -> T:
        """The product of ``args`` joined by name, names absent from ``out`` projected; one argument already
        named ``out`` in order comes back as it is."""
        out = tuple(out)
        if len(args) == 1 and args[0].names == out:
            return args[0]
        every = union(*(a.names for a in args))
        projected = any(n not in out for n in every)
        dtype = contract_dtype([a.dtype for a in args], projection, projected)
        op = te.ContractOp(
            [a.value for a in args], [a.names for a in args], out, projection, self.ttype(dtype, len(out))
        )
        return T(self.op(op).results[0], out)

    def reduce(self, kind: str, t: T, out: Sequence[str]) -> T:
        out = tuple(out)
        dtype = reduce_dtype(t.dtype, kind)
        op = te.ReduceOp(kind, t.value, t.names, out, self.ttype(dtype, len(out)))
        return T(self.op(op).results[0], out)

    def broadcast(self, t: T, out: Sequence[str], extents: Extents | dict[str, SSAValue]) -> T:
        """``t`` permuted to ``out`` and repeated along the names it lacks (their extents from ``extents``)."""
        out = tuple(out)
        if t.names == out:
            return t
        new = [n for n in out if n not in t.names]
        if not new:
            return self.contract([t], out)
        ext = [extents[n] for n in new]
        op = te.BroadcastOp(t.value, ext, t.names, out, self.ttype(t.dtype, len(out)))
        return T(self.op(op).results[0], out)

    def to_names(self, t: T, out: Sequence[str], extents: Extents | dict[str, SSAValue]) -> T:
        """``t`` summed over the names ``out`` lacks, then broadcast along those it lacks, in ``out`` order."""
        out = tuple(out)
        kept = [n for n in out if n in t.names]
        if len(kept) != len(t.names):
            t = self.contract([t], kept)
        return self.broadcast(t, out, extents)

    def cast(self, t: T, dtype: np.dtype) -> T:
        if t.dtype == np.dtype(dtype):
            return t
        op = te.CastOp(t.value, t.names, self.ttype(np.dtype(dtype), len(t.names)))
        return T(self.op(op).results[0], t.names)

    def axis_fn(self, fn: str, axis: str, *args: T, params: dict[str, object] | None = None) -> T:
        out = union(*(a.names for a in args))
        from fuse_mlir.interp.dtypes import axis_dtype

        dtype = axis_dtype(fn, [a.dtype for a in args])
        op = te.AxisOp(
            fn, axis, [a.value for a in args], [a.names for a in args], out, self.ttype(dtype, len(out)), params
        )
        return T(self.op(op).results[0], out)

    def access(
        self, src: T, axes: Sequence[te.AccessAxisAttr | str], out: Sequence[str], gathers: Sequence[T] = ()
    ) -> T:
        """Read ``src`` through ``axes`` (one :class:`~fuse_mlir.dialects.tensor_eq.AccessAxisAttr` per axis: a
        name, an offset, a position, a slice or a gather; a plain string is a name)."""
        op = te.AccessOp(
            src.value,
            list(axes),
            list(out),
            self.ttype(src.dtype, len(out)),
            [g.value for g in gathers],
            [g.names for g in gathers],
        )
        return T(self.op(op).results[0], tuple(out))

    def place(self, t: T, positions: Sequence[int], out: Sequence[str], extents: Sequence[SSAValue]) -> T:
        op = te.PlaceOp(t.value, list(extents), list(positions), t.names, list(out), self.ttype(t.dtype, len(out)))
        return T(self.op(op).results[0], tuple(out))

    def scatter_add(
        self,
        t: T,
        axes: Sequence[te.AccessAxisAttr | str],
        out: Sequence[str],
        gathers: Sequence[T],
        extents: Sequence[SSAValue],
    ) -> T:
        """``t`` added into zeros at ``axes`` (names of ``t`` or gathers), duplicates accumulating: the transpose
        of :meth:`access` with the same axes; ``extents`` gives each gathered axis's extent."""
        op = te.ScatterAddOp(
            t.value,
            t.names,
            list(axes),
            list(out),
            self.ttype(t.dtype, len(out)),
            [g.value for g in gathers],
            [g.names for g in gathers],
            list(extents),
        )
        return T(self.op(op).results[0], tuple(out))

    def count(self, like: T, names: Sequence[str], extents: Extents | dict[str, SSAValue]) -> T:
        """How many elements the axes ``names`` span, shaped and typed like ``like`` (a sum of ones made from
        ``like`` itself, so a printed program keeps the dtype without a cast)."""
        ones = self.map("pow", like, self.const(0, like.dtype))
        if not names:
            return ones
        return self.contract([self.broadcast(ones, (*like.names, *names), extents)], like.names)
