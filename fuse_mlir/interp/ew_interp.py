"""A NumPy interpreter for the elemwise level, to test the tensor_eq → elemwise lowering on its own.

Each ``ew.generic`` body is evaluated once, vectorised over the whole
iteration space: inputs are broadcast views aligned to the iteration dims,
``ew.index`` is an ``arange`` along its dim, ``ew.extract`` is fancy indexing
(with the op's range check), and arith/math ops are their NumPy ufuncs with
the IR's element types. Boundary and extent ops reuse the reference
interpreter's handlers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    ModuleOp,
)
from xdsl.ir import Attribute, Operation, SSAValue

from fuse_mlir.diagnostics import FuseRuntimeError, format_details
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import source_loc
from fuse_mlir.interp import numpy_builtins as nb
from fuse_mlir.interp.contraction import ArrayKit, broadcast_shape, contract_named
from fuse_mlir.interp.reference import REFERENCE, Interpreter, _einsum_kernel
from fuse_mlir.interp.registry import OpTable
from fuse_mlir.lowered import RunResult


def np_scalar_type(t: Attribute) -> np.dtype:
    """The NumPy dtype standing for a (signless) scalar type."""
    if isinstance(t, IndexType):
        return np.dtype(np.int64)
    if isinstance(t, IntegerType):
        w = t.width.data
        return np.dtype(bool) if w == 1 else np.dtype(f"int{w}")
    if isinstance(t, Float64Type):
        return np.dtype(np.float64)
    if isinstance(t, Float32Type):
        return np.dtype(np.float32)
    if isinstance(t, Float16Type):
        return np.dtype(np.float16)
    raise TypeError(f"no NumPy scalar for {t}")


def _unsigned(a: np.ndarray) -> np.ndarray:
    return a.view(a.dtype.str.replace("i", "u")) if a.dtype.kind == "i" else a


_CMPF = {
    "oeq": np.equal,
    "ogt": np.greater,
    "oge": np.greater_equal,
    "olt": np.less,
    "ole": np.less_equal,
    "one": lambda a, b: np.not_equal(a, b) & ~np.isnan(a) & ~np.isnan(b),
    "une": np.not_equal,
    "ueq": lambda a, b: np.equal(a, b) | np.isnan(a) | np.isnan(b),
    "ord": lambda a, b: ~np.isnan(a) & ~np.isnan(b),
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
    "ugt": lambda a, b: ~np.less_equal(a, b),
    "uge": lambda a, b: ~np.less(a, b),
    "ult": lambda a, b: ~np.greater_equal(a, b),
    "ule": lambda a, b: ~np.greater(a, b),
}
_CMPI = {
    "eq": np.equal,
    "ne": np.not_equal,
    "slt": np.less,
    "sle": np.less_equal,
    "sgt": np.greater,
    "sge": np.greater_equal,
}


EW = REFERENCE.extend("elemwise interpreter")
"""The reference interpreter's handlers plus the elemwise level's ops (methods of :class:`EwInterpreter`)."""


class EwInterpreter(Interpreter):
    """The reference interpreter plus the elemwise ops."""

    handlers: OpTable = EW

    @EW.impl(ew.GenericOp)
    def generic(self, op: ew.GenericOp) -> np.ndarray:
        ext = [int(self.get(e)) for e in op.extents]
        nd = len(ext)
        its = op.iterator_list()
        local: dict[SSAValue, Any] = {}
        block = op.body.block
        for arg, v, m in zip(block.args, op.inputs, op.map_list()):
            arr = self.get(v)
            order = sorted(range(len(m)), key=lambda a: m[a])
            view = np.transpose(arr, order)
            shape = [1] * nd
            for a in order:
                shape[m[a]] = arr.shape[a]
            local[arg] = (
                view.reshape(shape).view(view.dtype.str.replace("u", "i"))
                if view.dtype.kind == "u"
                else view.reshape(shape)
            )
        for arg, t in zip(block.args[len(op.inputs) :], op.tables):
            local[arg] = self.get(t)
        values = self._body(op, block, local, ext)
        red = tuple(d for d, it in enumerate(its) if it == "reduction")
        outs = []
        for value, kind, out in zip(values, op.kind_list(), op.outputs):
            full = np.broadcast_to(value, ext)
            if not red:
                res = full
            elif kind == "any":
                res = np.any(full != 0, axis=red).astype(np.int8)
            else:
                res = nb.reduce(full, red, kind)
            outs.append(np.array(res).astype(te.dtype_of(out)))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _body(self, op: ew.GenericOp, block, local: dict, ext: list[int]) -> Any:
        nd = len(ext)

        def val(v: SSAValue) -> Any:
            return local[v] if v in local else self.get(v)

        for inner in block.ops:
            if isinstance(inner, ew.YieldOp):
                return [val(v) for v in inner.values]
            if isinstance(inner, ew.IndexOp):
                d = inner.dim.value.data
                shape = [1] * nd
                shape[d] = ext[d]
                local[inner.results[0]] = np.arange(ext[d], dtype=np.int64).reshape(shape)
                continue
            if isinstance(inner, ew.ExtractOp):
                table = val(inner.table)
                pos = [np.asarray(val(p), dtype=np.int64) for p in inner.positions]
                if inner.check is not None:
                    for k, p in enumerate(pos):
                        bad = (p < 0) | (p >= table.shape[k])
                        if np.any(bad):
                            first = int(np.broadcast_to(p, bad.shape)[bad].flat[0])
                            loc = source_loc(inner)
                            raise FuseRuntimeError(format_details(inner.check.data, first, table.shape[k]), loc)
                if table.size == 0:
                    local[inner.results[0]] = np.zeros(broadcast_shape(*[p.shape for p in pos]), table.dtype)
                else:
                    clipped = [np.clip(p, 0, max(table.shape[k] - 1, 0)) for k, p in enumerate(pos)]
                    got = table[tuple(clipped)]
                    local[inner.results[0]] = (
                        got.view(got.dtype.str.replace("u", "i")) if got.dtype.kind == "u" else got
                    )
                continue
            if isinstance(inner, te.DimOp):
                local[inner.results[0]] = val(inner.source).shape[inner.axis.value.data]
                continue
            if isinstance(inner, ew.AssertOp):
                ok = np.broadcast_to(np.asarray(val(inner.cond), dtype=bool), ext)
                if not ok.all():
                    first = int(np.broadcast_to(np.asarray(val(inner.value)), ext)[~ok].flat[0])
                    loc = source_loc(inner)
                    raise FuseRuntimeError(format_details(inner.message.data, first, 0), loc)
                continue
            local[inner.results[0]] = _scalar_op(inner, [val(o) for o in inner.operands])
        raise AssertionError("generic body without ew.yield")

    @EW.impl(ew.ContractOp)
    def ew_contract(self, op: ew.ContractOp) -> np.ndarray:
        a, b = self.get(op.lhs), self.get(op.rhs)
        maps = [ew.ints_of(m) for m in op.maps.data]
        out = ew.ints_of(op.out)
        dtype = te.dtype_of(op.result)
        kit = ArrayKit(np.stack, lambda shape: np.zeros(shape, dtype), np.add)
        res = contract_named([a, b], maps, out, _einsum_kernel, kit, linear=True)
        return np.asarray(res, dtype=dtype)

    @EW.impl(ew.ScatterAddOp)
    def ew_scatter_add(self, op: ew.ScatterAddOp) -> np.ndarray:
        upd = self.get(op.update)
        gathers = [self.get(g) for g in op.gathers]
        maps = op.map_list()
        sizes = iter(self.get(e) for e in op.extents)
        shape: list[int] = []
        idx: list[np.ndarray] = []
        for p in op.place_list():
            if p >= 0:
                shape.append(upd.shape[p])
                idx.append(np.arange(upd.shape[p]).reshape([-1 if q == p else 1 for q in range(upd.ndim)]))
                continue
            n = next(sizes)
            g = gathers[-1 - p].astype(np.int64)
            m = maps[-1 - p]
            # The gather's axes in update order, size 1 along the update axes it lacks.
            view = np.transpose(g, np.argsort(m)).reshape(
                [g.shape[m.index(q)] if q in m else 1 for q in range(upd.ndim)]
            )
            bad = (view < 0) | (view >= n)
            if np.any(bad):
                raise FuseRuntimeError(format_details(op.check.data, int(view[bad].flat[0]), n), source_loc(op))
            shape.append(n)
            idx.append(view)
        res = np.zeros(shape, dtype=upd.dtype)
        if upd.size:
            np.add.at(res, tuple(np.broadcast_to(i, upd.shape) for i in idx), upd)
        return res

    @EW.impl(ew.HostCallOp)
    def host_call(self, op: ew.HostCallOp) -> Any:
        return host_call(op.fn.data, [self.get(v) for v in op.inputs], te.params_of(op.params))

    @EW.impl(arith.SubiOp, arith.MinSIOp, arith.MaxSIOp, arith.RemUIOp, arith.DivUIOp)
    def index_arith(self, op: Operation) -> int:
        """The index arithmetic of extents and offsets (the reference runs addi and muli)."""
        a, b = self.get(op.operands[0]), self.get(op.operands[1])
        return _INDEX_ARITH[type(op)](a, b)


_INDEX_ARITH: dict[type[Operation], Callable[[int, int], int]] = {
    arith.SubiOp: lambda a, b: a - b,
    arith.MinSIOp: min,
    arith.MaxSIOp: max,
    arith.RemUIOp: lambda a, b: a % b,
    arith.DivUIOp: lambda a, b: a // b,
}


def host_call(fn: str, arrays: list[np.ndarray], params: dict[str, object]) -> Any:
    """The builtins the runtime runs on NumPy for every backend (same code, same results)."""
    if fn == "concat":
        return nb.concat(arrays, int(params["axis"]))
    if fn == "tucker_dense":
        return nb.tucker_dense(arrays[0], rank=params.get("rank"), threshold=float(params.get("threshold", 0.5)))  # type: ignore[arg-type]
    if fn == "topk":
        return nb.topk(arrays[0], int(params["k"]), axis=int(params["axis"]))
    raise FuseRuntimeError(f"unknown host call {fn}")


def _scalar_op(op: Operation, args: list[Any]) -> Any:
    rt = np_scalar_type(op.results[0].type) if op.results else None
    if isinstance(op, arith.ConstantOp):
        v = op.value.value.data
        return np.asarray(v, dtype=rt)
    cls = type(op)
    simple = {
        arith.AddfOp: np.add,
        arith.SubfOp: np.subtract,
        arith.MulfOp: np.multiply,
        arith.DivfOp: np.divide,
        arith.AddiOp: np.add,
        arith.SubiOp: np.subtract,
        arith.MuliOp: np.multiply,
        arith.MaximumfOp: nb.maximum,  # -0 < +0, as arith.maximumf is defined
        arith.MinimumfOp: nb.minimum,
        arith.MaxSIOp: np.maximum,
        arith.MinSIOp: np.minimum,
        arith.AndIOp: np.bitwise_and,
        arith.OrIOp: np.bitwise_or,
        arith.XOrIOp: np.bitwise_xor,
        arith.NegfOp: np.negative,
        xmath.ExpOp: np.exp,
        xmath.LogOp: np.log,
        xmath.SqrtOp: np.sqrt,
        xmath.TanhOp: np.tanh,
        xmath.SinOp: np.sin,
        xmath.CosOp: np.cos,
        xmath.AbsFOp: np.abs,
        xmath.PowFOp: np.power,
        xmath.IPowIOp: np.power,
    }
    if cls in simple:
        return np.asarray(simple[cls](*args)).astype(rt)
    if cls in (arith.MaxUIOp, arith.MinUIOp, arith.DivUIOp, arith.RemUIOp):
        f = {
            arith.MaxUIOp: np.maximum,
            arith.MinUIOp: np.minimum,
            arith.DivUIOp: np.floor_divide,
            arith.RemUIOp: np.remainder,
        }[cls]
        a, b = (_unsigned(np.asarray(x)) for x in args)
        return np.asarray(f(a, b)).astype(rt)
    if isinstance(op, arith.CmpfOp):
        return _CMPF[arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]](*args)
    if isinstance(op, arith.CmpiOp):
        pred = _cmp_name(op)
        if pred.startswith("u"):
            f = {"ult": np.less, "ule": np.less_equal, "ugt": np.greater, "uge": np.greater_equal}[pred]
            return f(*(_unsigned(np.asarray(x)) for x in args))
        return _CMPI[pred](*args)
    if isinstance(op, arith.SelectOp):
        return np.where(args[0], args[1], args[2]).astype(rt)
    if isinstance(op, arith.ExtUIOp):
        return (
            _unsigned(np.asarray(args[0])).astype(rt)
            if np.asarray(args[0]).dtype != bool
            else np.asarray(args[0]).astype(rt)
        )
    if isinstance(op, arith.UIToFPOp):
        return _unsigned(np.asarray(args[0])).astype(rt)
    if isinstance(op, arith.FPToUIOp):
        return np.asarray(args[0]).astype(str(rt).replace("int", "uint")).astype(rt)
    if isinstance(
        op,
        arith.ExtSIOp
        | arith.TruncIOp
        | arith.ExtFOp
        | arith.TruncFOp
        | arith.SIToFPOp
        | arith.FPToSIOp
        | arith.IndexCastOp,
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(args[0]).astype(rt)
    raise FuseRuntimeError(f"the elemwise interpreter cannot run '{op.name}'")


def _cmp_name(op: arith.CmpiOp) -> str:
    return arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]


def run_ew_module(module: ModuleOp, inputs: dict[str, np.ndarray], sources: dict[str, np.ndarray]) -> RunResult:
    """Run an elemwise-level module on NumPy."""
    interp = EwInterpreter(module, inputs, sources)
    return interp.run()
