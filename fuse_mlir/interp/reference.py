"""The reference interpreter: runs a tensor_eq module on NumPy, op by op, in module order.

It is the ground truth every backend and pipeline is tested against, so it
favours directness over speed, except that sum contractions go through
``np.einsum`` with an optimised contraction path. Index names are aligned
by name at every op; extents are checked by the module's ``te.check_dim``
ops before any tensor work; out-of-range positions and gathered indices
raise :class:`FuseRuntimeError` with the source location.

Handlers are methods registered per op class in :data:`REFERENCE` (an
:class:`~fuse_mlir.interp.registry.OpTable`, the registration shape every
walker uses); the attribute decoding comes from the shared per-op plans of
:mod:`fuse_mlir.interp.plans`. Values are computed here alone, with NumPy:
nothing here calls a backend or the array walker.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseRuntimeError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import source_loc
from fuse_mlir.interp import numpy_builtins as nb
from fuse_mlir.interp.contraction import ArrayKit, broadcast_shape, contract_named, distinct
from fuse_mlir.interp.dtypes import MAP_FNS, accumulate_dtype
from fuse_mlir.interp.loop_interp import host_call_error
from fuse_mlir.interp.plans import (
    SCATTER_RANGE,
    access_op_plan,
    access_plan,
    axis_plan,
    block_plan,
    broadcast_plan,
    concat_plan,
    contract_plan,
    einsum_spec,
    index_constant,
    map_plan,
    place_plan,
    reduce_plan,
    scatter_plan,
)
from fuse_mlir.interp.registry import OpTable
from fuse_mlir.lowered import RunResult


def _loc(op: Operation) -> Loc | None:
    """Where ``op`` comes from in the program (its location), for run-time errors."""
    return source_loc(op)


def align(arr: np.ndarray, names: Sequence[str], target: Sequence[str]) -> np.ndarray:
    """View ``arr`` (axes ``names``) with axes in ``target`` order, size-1 axes for names it lacks."""
    names = list(names)
    order = [names.index(n) for n in target if n in names]
    out = np.transpose(arr, order) if order != list(range(len(order))) else arr
    shape = []
    it = iter(out.shape)
    for n in target:
        shape.append(next(it) if n in names else 1)
    return out.reshape(shape)


def _einsum_kernel(arrays: list[np.ndarray], names: list[tuple], out: tuple) -> np.ndarray:
    """A sum contraction by ``np.einsum`` (at most 52 distinct names), with an optimised path for 3+ operands.

    A product that projects nothing (every name kept, none repeated in an operand) is the broadcast product
    itself, as the native and hand-off backends compute it: einsum adds each product to a zero, which turns a
    negative zero (``-1.5 * 0``) into +0, and ``1 / that`` into +inf instead of -inf."""
    if arrays and all(n in out for ns in names for n in ns) and all(len(set(ns)) == len(ns) for ns in names):
        return np.array(_broadcast_product(arrays, names, out))
    return np.einsum(einsum_spec(tuple(map(tuple, names)), tuple(out)), *arrays, optimize=len(arrays) > 2)


def _broadcast_product(
    arrays: Sequence[np.ndarray], names: Sequence[Sequence[str]], target: Sequence[str]
) -> np.ndarray:
    """The product of ``arrays`` (axes ``names``) over the axes ``target``, which holds every name: each operand
    aligned to ``target`` and multiplied by NumPy, broadcast to the full shape (a read-only view)."""
    ext: dict[str, int] = {}
    for a, ns in zip(arrays, names):
        for n, size in zip(ns, a.shape):
            ext.setdefault(n, size)
    prod = align(arrays[0], names[0], target)
    for a, ns in zip(arrays[1:], names[1:]):
        prod = prod * align(a, ns, target)
    return np.broadcast_to(prod, [ext[n] for n in target])


def _reduce_kernel(
    arrays: list[np.ndarray], names: list[tuple[Hashable, ...]], out: tuple[Hashable, ...], proj: str
) -> np.ndarray:
    """A max/min/prod-projected product: the broadcast product of the operands, reduced over what ``out`` lacks."""
    axes_of = [[str(n) for n in ns] for ns in names]
    full = [str(n) for n in distinct(names)]
    prod = _broadcast_product(arrays, axes_of, full)
    kept = [str(n) for n in out]
    res = nb.reduce(prod, tuple(k for k, n in enumerate(full) if n not in kept), proj)
    return align(res, [n for n in full if n in kept], kept)


def unchanged(old: np.ndarray, new: np.ndarray, atol: float, rtol: float) -> bool:
    """The fixpoint convergence test: floats within ``atol + rtol * |new|`` (NaN matching NaN), others equal."""
    if new.dtype.kind == "f":
        with np.errstate(all="ignore"):
            close = (old == new) | (np.abs(new - old) <= atol + rtol * np.abs(new)) | (np.isnan(old) & np.isnan(new))
        return bool(np.all(close))
    return bool(np.array_equal(old, new))


REFERENCE = OpTable("reference interpreter")
"""The reference interpreter's handlers (methods of :class:`Interpreter`, registered with ``@REFERENCE.impl``)."""


class Interpreter:
    """Evaluates one module; create one per run. Subclasses with more ops set :attr:`handlers` to a larger table."""

    handlers: OpTable = REFERENCE

    def __init__(self, module: ModuleOp, inputs: dict[str, np.ndarray], sources: dict[str, np.ndarray]):
        self.module = module
        self.inputs = inputs
        self.sources = sources
        self.env: dict[SSAValue, Any] = {}
        self.result = RunResult({})

    def run(self) -> RunResult:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with np.errstate(all="ignore"):
                self.run_ops(self.module.body.block.ops)
        return self.result

    def run_ops(self, ops: Iterable[Operation]) -> list[Any]:
        """Run ops in order; returns the values of a ``te.yield`` that ends them (else nothing)."""
        for op in ops:
            if isinstance(op, te.YieldOp):
                return [self.get(v) for v in op.values]
            self.step(op)
        return []

    @REFERENCE.impl(te.FixpointOp)
    def fixpoint(self, op: te.FixpointOp) -> tuple:
        """Run the body until the checked carried values stop changing, or ``max_iters`` times."""
        block = op.body.block
        current = [self.get(v) for v in op.inits]
        checked = op.checked_list()
        atol, rtol = op.atol.value.data, op.rtol.value.data
        limit = op.max_iters.value.data
        runs, converged = 0, False
        while runs < limit and not converged:
            self.env[block.args[0]] = np.array(runs, dtype=np.int64)
            for arg, v in zip(block.args[1:], current):
                self.env[arg] = v
            nxt = self.run_ops(block.ops)
            converged = all(unchanged(a, b, atol, rtol) for a, b, c in zip(current, nxt, checked) if c)
            current = nxt
            runs += 1
        return (*current, np.array(runs, dtype=np.int64), np.array(int(converged), dtype=np.int8))

    def step(self, op: Operation) -> None:
        """Run one op and bind its results (a hook for subclasses that observe each op, e.g. the run trace)."""
        handler = self.handlers.lookup(op)
        try:
            out = handler(self, op)
        except ValueError as e:  # a NumPy kernel refused (e.g. an array too big to index)
            if isinstance(op, te.BlockOp):  # a builtin's own error (tucker_dense of a NaN): worded as natively
                raise host_call_error(op.fn.data, e, _loc(op)) from e
            raise FuseRuntimeError(f"{op.name}: {e}", _loc(op)) from e
        except MemoryError as e:
            raise FuseRuntimeError(f"{op.name}: out of memory: {e}", _loc(op)) from None
        if out is None:
            return
        if isinstance(out, tuple):
            for r, v in zip(op.results, out):
                self.env[r] = v
        else:
            self.env[op.results[0]] = out

    def get(self, v: SSAValue) -> Any:
        return self.env[v]

    # -- handlers ------------------------------------------------------------

    @REFERENCE.impl(te.InputOp)
    def input(self, op: te.InputOp) -> np.ndarray:
        return self.inputs[op.tensor_name.data]

    @REFERENCE.impl(te.SourceOp)
    def source(self, op: te.SourceOp) -> np.ndarray:
        return self.sources[op.tensor_name.data]

    @REFERENCE.impl(te.ConstantOp)
    def constant(self, op: te.ConstantOp) -> np.ndarray:
        return te.dense_value(op.value)

    @REFERENCE.impl(arith.ConstantOp)
    def index_constant(self, op: arith.ConstantOp) -> int:
        return index_constant(op)

    @REFERENCE.impl(arith.AddiOp)
    def addi(self, op: arith.AddiOp) -> int:
        return self.get(op.lhs) + self.get(op.rhs)

    @REFERENCE.impl(arith.MuliOp)
    def muli(self, op: arith.MuliOp) -> int:
        return self.get(op.lhs) * self.get(op.rhs)

    @REFERENCE.impl(te.DimOp)
    def dim(self, op: te.DimOp) -> int:
        return int(self.get(op.source).shape[op.axis.value.data])

    @REFERENCE.impl(te.SliceLenOp)
    def slice_len(self, op: te.SliceLenOp) -> int:
        return len(range(self.get(op.extent))[slice(*op.bounds())])

    @REFERENCE.impl(te.CheckDimOp)
    def check_dim(self, op: te.CheckDimOp) -> None:
        op.enforce(self.get(op.lhs), self.get(op.rhs))

    @REFERENCE.impl(te.AccessOp)
    def access(self, op: te.AccessOp) -> np.ndarray:
        src = self.get(op.source)
        plan = access_op_plan(op)
        out = plan.out
        loc = _loc(op)
        gathers = [self.get(g) for g in op.gathers]
        parsed, shape = access_plan(op, src.shape, [g.shape for g in gathers], loc)

        def grid(name: str) -> np.ndarray:
            s = [1] * len(out)
            p = out.index(name)
            s[p] = shape[p]
            return np.arange(shape[p]).reshape(s)

        idx: list[Any] = []
        valid: np.ndarray | None = None
        for k, (kind, val) in enumerate(parsed):
            n = src.shape[k]
            if kind == "name":
                idx.append(grid(val))
            elif kind == "pos":
                idx.append(val)
            elif kind == "slice":
                text, r = val
                idx.append(r.start + r.step * grid(text))
            elif kind == "offset":
                name, off = val
                i = grid(name) + off
                ok = (i >= 0) & (i < n)
                valid = ok if valid is None else valid & ok
                idx.append(np.clip(i, 0, max(n - 1, 0)))
            else:
                g = gathers[val]
                bad = (g < 0) | (g >= n)
                if np.any(bad):
                    first = g[bad].flat[0]
                    raise FuseRuntimeError(f"gathered index {first} is out of range for axis {k} (extent {n})", loc)
                idx.append(align(g.astype(np.intp), plan.gather_names[val], out))
        if src.size == 0 or 0 in shape:
            return np.zeros(shape, dtype=src.dtype)
        res = np.broadcast_to(src[tuple(idx)], shape)
        if valid is not None:
            res = np.where(np.broadcast_to(valid, shape), res, np.zeros((), dtype=src.dtype))
        return np.array(res, dtype=src.dtype)

    @REFERENCE.impl(te.ContractOp)
    def contract(self, op: te.ContractOp) -> np.ndarray:
        arrays = [self.get(v) for v in op.inputs]
        plan = contract_plan(op)
        names, out, proj, dtype = plan.names, plan.out, plan.projection, plan.dtype
        if proj == "sum" or (proj == "mean"):
            work = accumulate_dtype(dtype if proj == "sum" else plan.mean_work_dtype([a.dtype for a in arrays]))
            kit = ArrayKit(np.stack, lambda shape: np.zeros(shape, work), np.add)
            res = contract_named(
                [a.astype(work, copy=False) for a in arrays], names, out, _einsum_kernel, kit, linear=True
            )
            if proj == "mean":
                ext: dict[str, int] = {}
                for a, ns in zip(arrays, names):
                    for n, s in zip(ns, a.shape):
                        ext.setdefault(n, s)
                count = int(np.prod([ext[n] for n in plan.projected]))
                res = res / count if count else np.full_like(res, np.nan)
            return np.asarray(res, dtype=dtype)
        combines: dict[str, Callable[[Any, Any], Any]] = {"max": nb.maximum, "min": nb.minimum, "prod": np.multiply}
        combine = combines[proj]
        kit = ArrayKit(np.stack, lambda shape: np.zeros(shape, dtype), combine)
        res = contract_named(arrays, names, out, lambda a, n, o: _reduce_kernel(a, n, o, proj), kit, linear=False)
        return np.asarray(res, dtype=dtype)

    @REFERENCE.impl(te.MapOp)
    def map(self, op: te.MapOp) -> np.ndarray:
        plan = map_plan(op)
        args = [align(self.get(v), ns, plan.out) for v, ns in zip(op.inputs, plan.names)]
        if plan.fn == "pow" and (bad := nb.negative_int_exponent(*args)) is not None:
            raise FuseRuntimeError(nb.INT_NEGATIVE_POWER.format(bad), _loc(op))
        res = np.asarray(MAP_FNS[plan.fn](*args, **plan.params))
        shape = broadcast_shape(*[a.shape for a in args]) if args else ()
        return np.array(np.broadcast_to(res, shape), dtype=plan.dtype)

    @REFERENCE.impl(te.BroadcastOp)
    def broadcast(self, op: te.BroadcastOp) -> np.ndarray:
        src = self.get(op.input)
        plan = broadcast_plan(op)
        names, out = plan.names, plan.out
        extents = iter(self.get(e) for e in op.extents)
        shape = [src.shape[names.index(n)] if n in names else next(extents) for n in out]
        return np.broadcast_to(align(src, names, out), shape)

    @REFERENCE.impl(te.ReduceOp)
    def reduce(self, op: te.ReduceOp) -> np.ndarray:
        src = self.get(op.input)
        plan = reduce_plan(op)
        if plan.kind == "logsumexp":
            res = src
            for ax in sorted(plan.axes, reverse=True):
                res = nb.logsumexp(res, ax)
        else:
            res = nb.reduce(src, plan.axes, plan.kind)
        return np.asarray(align(res, plan.kept, plan.out), dtype=plan.dtype)

    def _full(self, values, names_each, out) -> list[np.ndarray]:
        args = [align(self.get(v), ns, out) for v, ns in zip(values, names_each)]
        shape = broadcast_shape(*[a.shape for a in args])
        return [np.broadcast_to(a, shape) for a in args]

    @REFERENCE.impl(te.AxisOp)
    def axis_fn(self, op: te.AxisOp) -> np.ndarray:
        plan = axis_plan(op)
        args = self._full(op.inputs, plan.names, plan.out)
        fn: dict[str, Callable[..., np.ndarray]] = {
            "softmax": nb.softmax,
            "masked_softmax": nb.masked_softmax,
            "softmax_grad": nb.softmax_grad,
            "lnorm": nb.lnorm,
        }
        return np.asarray(fn[plan.fn](*args, axis=plan.axis, **plan.params), dtype=plan.dtype)

    @REFERENCE.impl(te.ConcatOp)
    def concat(self, op: te.ConcatOp) -> np.ndarray:
        plan = concat_plan(op)
        arrays = [align(self.get(v), ns, plan.out) for v, ns in zip(op.inputs, plan.names)]
        pos = plan.pos
        # Broadcast every other axis to a common extent before joining.
        common = list(broadcast_shape(*[tuple(1 if k == pos else s for k, s in enumerate(a.shape)) for a in arrays]))
        full = []
        for a in arrays:
            shape = list(common)
            shape[pos] = a.shape[pos]
            full.append(np.broadcast_to(a, shape))
        return np.asarray(nb.concat(full, pos), dtype=plan.dtype)

    @REFERENCE.impl(te.FlattenOp)
    def flatten(self, op: te.FlattenOp) -> np.ndarray:
        return np.ascontiguousarray(nb.flatten_last2(self.get(op.input)))

    @REFERENCE.impl(te.GenerateOp)
    def generate(self, op: te.GenerateOp) -> np.ndarray:
        ext = [self.get(e) for e in op.extents]
        if op.fn.data == "nonempty":
            return nb.nonempty(ext, te.dtype_of(op.result))
        if op.fn.data == "causal_mask":
            return nb.causal_mask(ext[0], dtype=te.dtype_of(op.result))
        if op.fn.data == "iota":
            return np.arange(ext[0], dtype=te.dtype_of(op.result))
        return nb.index_parity(ext[0], op.fn.data)

    @REFERENCE.impl(te.PlaceOp)
    def place(self, op: te.PlaceOp) -> np.ndarray:
        src = self.get(op.input)
        plan = place_plan(op)
        extents = iter(self.get(e) for e in op.extents)
        shape = []
        index: list[Any] = []
        for k, (n, p) in enumerate(zip(plan.out, plan.positions)):
            if p >= 0:
                size = next(extents)
                if p >= size:
                    raise FuseRuntimeError(f"position {p} is outside axis {k} of extent {size}", _loc(op))
                shape.append(size)
                index.append(p)
            else:
                shape.append(src.shape[plan.names.index(n)])
                index.append(slice(None))
        res = np.zeros(shape, dtype=src.dtype)
        res[tuple(index)] = align(src, plan.names, plan.free)
        return res

    @REFERENCE.impl(te.ScatterAddOp)
    def scatter_add(self, op: te.ScatterAddOp) -> np.ndarray:
        upd = self.get(op.update)
        names = op.update_names()
        loc = _loc(op)
        gathers = [self.get(g) for g in op.gathers]
        gnames = te.names_of_each(op.gather_indices)
        shape = scatter_plan(op, upd.shape, [g.shape for g in gathers], [self.get(e) for e in op.extents], loc)
        idx: list[np.ndarray] = []
        for k, a in enumerate(op.axis_list()):
            if a.axis_kind == te.AxisKind.NAME:
                p = names.index(a.index_name)
                idx.append(np.arange(upd.shape[p]).reshape([-1 if q == p else 1 for q in range(len(names))]))
                continue
            g = gathers[a.value]
            bad = (g < 0) | (g >= shape[k])
            if np.any(bad):
                raise FuseRuntimeError(SCATTER_RANGE.format(g[bad].flat[0], k, shape[k]), loc)
            idx.append(align(g.astype(np.intp), gnames[a.value], names))
        res = np.zeros(shape, dtype=upd.dtype)
        if upd.size:
            np.add.at(res, tuple(np.broadcast_to(i, upd.shape) for i in idx), upd)
        return res

    @REFERENCE.impl(te.BlockOp)
    def block(self, op: te.BlockOp) -> Any:
        plan = block_plan(op)
        fn, names, roles, params = plan.fn, plan.names, plan.roles, plan.params
        arrays = [self.get(v) for v in op.inputs]
        if fn == "attention":
            q, k, v = arrays[:3]
            qn, kn, vn = names[:3]
            batch = list(qn[:-2])
            qs, ks, d, e = roles["query"], roles["key"], roles["feature"], roles["value"]
            qa = align(q, qn, [*batch, qs, d])
            ka = align(k, kn, [*batch, ks, d])
            va = align(v, vn, [*batch, ks, e])
            mask = align(arrays[3], names[3], [*batch, qs, ks]) if len(arrays) > 3 else None
            dtype = plan.dtypes[0]
            res = nb.attention(
                qa.astype(dtype, copy=False),
                ka.astype(dtype, copy=False),
                va.astype(dtype, copy=False),
                mask=mask,
                scale=params.get("scale"),
                causal=bool(params.get("causal", False)),
            )
            shape = [*broadcast_shape(qa.shape[:-2], ka.shape[:-2], va.shape[:-2]), qa.shape[-2], va.shape[-1]]
            return np.asarray(np.broadcast_to(res, shape), dtype=dtype)
        x, xn = arrays[0], names[0]
        if fn == "rope":
            return np.asarray(
                nb.rope(x, xn.index(roles["sequence"]), xn.index(roles["feature"]), base=params.get("base", 10000.0)),
                dtype=plan.dtypes[0],
            )
        if fn == "tucker_dense":
            return np.asarray(
                nb.tucker_dense(x, rank=params.get("rank"), threshold=params.get("threshold", 0.5)),
                dtype=plan.dtypes[0],
            )
        ax = xn.index(roles["axis"])
        idx, vals = nb.topk(x, params["k"], axis=ax)
        return (idx, vals)

    @REFERENCE.impl(te.GroupOp)
    def group(self, op: te.GroupOp) -> np.ndarray:
        dtype = te.dtype_of(op.result)
        parts = [self.get(v) for v in op.inputs]
        if op.boolean.value.data:
            acc = np.zeros(broadcast_shape(*[p.shape for p in parts]), dtype=bool)
            for p in parts:
                acc |= p != 0
            return acc.astype(np.int8)
        acc = np.array(parts[0], dtype=dtype)
        for p in parts[1:]:
            acc = acc + p.astype(dtype, copy=False)
        return np.asarray(acc, dtype=dtype)

    @REFERENCE.impl(te.CastOp)
    def cast(self, op: te.CastOp) -> np.ndarray:
        return self.get(op.input).astype(te.dtype_of(op.result))

    @REFERENCE.impl(te.SinkOp)
    def sink(self, op: te.SinkOp) -> None:
        names = te.names_of(op.names)
        vals = [np.array(self.get(v)) for v in op.values]
        value: Any = vals[0] if len(vals) == 1 else dict(zip(names, vals))
        self.result.sinks.append((op.path.data, value, _loc(op)))

    @REFERENCE.impl(te.ExportOp)
    def export(self, op: te.ExportOp) -> None:
        for name, v in zip(te.names_of(op.names), op.values):
            self.result.exports[name] = np.array(self.get(v))


def run_module(module: ModuleOp, inputs: dict[str, np.ndarray], sources: dict[str, np.ndarray]) -> RunResult:
    """Run a tensor_eq module on NumPy arrays; returns the exports and the pending sink writes."""
    return Interpreter(module, inputs, sources).run()
