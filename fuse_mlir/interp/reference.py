"""The reference interpreter: runs a tensor_eq module on NumPy, op by op, in module order.

It is the ground truth every backend and pipeline is tested against, so it
favours directness over speed, except that sum contractions go through
``np.einsum`` with an optimised contraction path. Index names are aligned
by name at every op; extents are checked by the module's ``te.check_dim``
ops before any tensor work; out-of-range positions and gathered indices
raise :class:`FuseRuntimeError` with the source location.
"""

from __future__ import annotations

import string
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
    """A sum contraction by ``np.einsum`` (at most 52 distinct names), with an optimised path for 3+ operands."""
    letters = {n: string.ascii_letters[k] for k, n in enumerate(distinct(names))}
    spec = ",".join("".join(letters[n] for n in ns) for ns in names) + "->" + "".join(letters[n] for n in out)
    return np.einsum(spec, *arrays, optimize=len(arrays) > 2)


def _reduce_kernel(
    arrays: list[np.ndarray], names: list[tuple[Hashable, ...]], out: tuple[Hashable, ...], proj: str
) -> np.ndarray:
    """A max/min/prod-projected product: the broadcast product of the operands, reduced over what ``out`` lacks."""
    axes_of = [[str(n) for n in ns] for ns in names]
    full = [str(n) for n in distinct(names)]
    ext: dict[str, int] = {}
    for a, ns in zip(arrays, axes_of):
        for n, s in zip(ns, a.shape):
            ext.setdefault(n, s)
    prod = None
    for a, ns in zip(arrays, axes_of):
        x = align(a, ns, full)
        prod = x if prod is None else prod * x
    assert prod is not None
    prod = np.broadcast_to(prod, [ext[n] for n in full])
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


AccessAxis = tuple[str, Any]


def access_plan(
    op: te.AccessOp, src_shape: Sequence[int], gather_shapes: Sequence[Sequence[int]], loc: Loc | None
) -> tuple[list[AccessAxis], list[int]]:
    """How a ``te.access`` reads its source: one ``(kind, value)`` per source axis, and the result's shape.

    Kinds: ``name`` (value: the index), ``pos`` (a fixed position), ``slice``
    (value: (index, range)), ``offset`` (value: (index, offset); out of range
    reads 0) and ``gather`` (value: the gather operand's number). Extents are
    checked against each other here, from shapes alone, so every backend that
    walks tensor_eq reports the same errors.
    """
    out = te.names_of(op.indices)
    gnames = te.names_of_each(op.gather_indices)
    ext: dict[str, int] = {}

    def set_ext(name: str, n: int, what: str) -> None:
        if name in ext and ext[name] != n:
            raise FuseRuntimeError(f"index {name} is {ext[name]} but {n} in {what}", loc)
        ext[name] = n

    parsed: list[AccessAxis] = []
    for k, a in enumerate(op.axis_list()):
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
    for shape, names in zip(gather_shapes, gnames):
        for n, size in zip(names, shape):
            set_ext(n, size, "an index tensor")
    for k, (kind, val) in enumerate(parsed):
        if kind == "pos" and not 0 <= val < src_shape[k]:
            raise FuseRuntimeError(f"position {val} is out of range for axis {k} (extent {src_shape[k]})", loc)
    return parsed, [ext[n] for n in out]


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


class Interpreter:
    """Evaluates one module; create one per run."""

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
        handler = self.handlers.get(type(op))
        if handler is None:
            raise FuseRuntimeError(f"the reference interpreter cannot run '{op.name}'")
        try:
            out = handler(self, op)
        except ValueError as e:  # a NumPy kernel refused (e.g. an array too big to index)
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

    def input(self, op: te.InputOp) -> np.ndarray:
        return self.inputs[op.tensor_name.data]

    def source(self, op: te.SourceOp) -> np.ndarray:
        return self.sources[op.tensor_name.data]

    def constant(self, op: te.ConstantOp) -> np.ndarray:
        return te.dense_value(op.value)

    def index_constant(self, op: arith.ConstantOp) -> int:
        return int(op.value.value.data)

    def addi(self, op: arith.AddiOp) -> int:
        return self.get(op.lhs) + self.get(op.rhs)

    def muli(self, op: arith.MuliOp) -> int:
        return self.get(op.lhs) * self.get(op.rhs)

    def dim(self, op: te.DimOp) -> int:
        return int(self.get(op.source).shape[op.axis.value.data])

    def slice_len(self, op: te.SliceLenOp) -> int:
        return len(range(self.get(op.extent))[slice(*op.bounds())])

    def check_dim(self, op: te.CheckDimOp) -> None:
        a, b = self.get(op.lhs), self.get(op.rhs)
        if not te.CHECK_PREDICATES[op.predicate_name()](a, b):
            raise FuseRuntimeError(op.message.data.format(a, b), _loc(op))

    def access(self, op: te.AccessOp) -> np.ndarray:
        src = self.get(op.source)
        out = te.names_of(op.indices)
        loc = _loc(op)
        gathers = [self.get(g) for g in op.gathers]
        gnames = te.names_of_each(op.gather_indices)
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
                idx.append(align(g.astype(np.intp), gnames[val], out))
        if src.size == 0 or 0 in shape:
            return np.zeros(shape, dtype=src.dtype)
        res = np.broadcast_to(src[tuple(idx)], shape)
        if valid is not None:
            res = np.where(np.broadcast_to(valid, shape), res, np.zeros((), dtype=src.dtype))
        return np.array(res, dtype=src.dtype)

    def contract(self, op: te.ContractOp) -> np.ndarray:
        arrays = [self.get(v) for v in op.inputs]
        names = te.names_of_each(op.operand_indices)
        out = te.names_of(op.indices)
        proj = op.projection.data
        dtype = te.dtype_of(op.result)
        allnames: dict[str, None] = {}
        for ns in names:
            for n in ns:
                allnames.setdefault(n, None)
        ext: dict[str, int] = {}
        for a, ns in zip(arrays, names):
            for n, s in zip(ns, a.shape):
                ext.setdefault(n, s)
        if proj == "sum" or (proj == "mean"):
            work = accumulate_dtype(
                dtype
                if proj == "sum"
                else np.result_type(*[a.dtype for a in arrays], np.float64 if dtype.kind != "f" else dtype)
            )
            kit = ArrayKit(np.stack, lambda shape: np.zeros(shape, work), np.add)
            res = contract_named(
                [a.astype(work, copy=False) for a in arrays], names, out, _einsum_kernel, kit, linear=True
            )
            if proj == "mean":
                count = int(np.prod([ext[n] for n in allnames if n not in out]))
                res = res / count if count else np.full_like(res, np.nan)
            return np.asarray(res, dtype=dtype)
        combine = {"max": np.maximum, "min": np.minimum, "prod": np.multiply}[proj]
        kit = ArrayKit(np.stack, lambda shape: np.zeros(shape, dtype), combine)
        res = contract_named(arrays, names, out, lambda a, n, o: _reduce_kernel(a, n, o, proj), kit, linear=False)
        return np.asarray(res, dtype=dtype)

    def map(self, op: te.MapOp) -> np.ndarray:
        out = te.names_of(op.indices)
        args = [align(self.get(v), ns, out) for v, ns in zip(op.inputs, te.names_of_each(op.operand_indices))]
        params = te.params_of(op.params)
        if op.fn.data == "pow" and (bad := nb.negative_int_exponent(*args)) is not None:
            raise FuseRuntimeError(nb.INT_NEGATIVE_POWER.format(bad), _loc(op))
        res = np.asarray(MAP_FNS[op.fn.data](*args, **params))
        shape = broadcast_shape(*[a.shape for a in args]) if args else ()
        return np.array(np.broadcast_to(res, shape), dtype=te.dtype_of(op.result))

    def broadcast(self, op: te.BroadcastOp) -> np.ndarray:
        src = self.get(op.input)
        names = te.names_of_each(op.operand_indices)[0]
        out = te.names_of(op.indices)
        extents = iter(self.get(e) for e in op.extents)
        shape = [src.shape[names.index(n)] if n in names else next(extents) for n in out]
        return np.broadcast_to(align(src, names, out), shape)

    def reduce(self, op: te.ReduceOp) -> np.ndarray:
        src = self.get(op.input)
        names = te.names_of_each(op.operand_indices)[0]
        out = te.names_of(op.indices)
        axes = tuple(k for k, n in enumerate(names) if n not in out)
        kind = op.kind.data
        if kind == "logsumexp":
            res = src
            for ax in sorted(axes, reverse=True):
                res = nb.logsumexp(res, ax)
        else:
            res = nb.reduce(src, axes, kind)
        kept = [n for n in names if n in out]
        return np.asarray(align(res, kept, out), dtype=te.dtype_of(op.result))

    def _full(self, values, names_each, out) -> list[np.ndarray]:
        args = [align(self.get(v), ns, out) for v, ns in zip(values, names_each)]
        shape = broadcast_shape(*[a.shape for a in args])
        return [np.broadcast_to(a, shape) for a in args]

    def axis_fn(self, op: te.AxisOp) -> np.ndarray:
        out = te.names_of(op.indices)
        args = self._full(op.inputs, te.names_of_each(op.operand_indices), out)
        axis = out.index(op.axis.data)
        params = te.params_of(op.params)
        fn = {
            "softmax": nb.softmax,
            "masked_softmax": nb.masked_softmax,
            "softmax_grad": nb.softmax_grad,
            "lnorm": nb.lnorm,
        }
        return np.asarray(fn[op.fn.data](*args, axis=axis, **params), dtype=te.dtype_of(op.result))

    def concat(self, op: te.ConcatOp) -> np.ndarray:
        out = te.names_of(op.indices)
        axis = op.axis.data
        parts = te.names_of(op.operand_axes)
        arrays = []
        for v, ns, part in zip(op.inputs, te.names_of_each(op.operand_indices), parts):
            ns = [axis if n == part else n for n in ns]
            arrays.append(align(self.get(v), ns, out))
        pos = out.index(axis)
        # Broadcast every other axis to a common extent before joining.
        common = list(broadcast_shape(*[tuple(1 if k == pos else s for k, s in enumerate(a.shape)) for a in arrays]))
        full = []
        for a in arrays:
            shape = list(common)
            shape[pos] = a.shape[pos]
            full.append(np.broadcast_to(a, shape))
        return np.asarray(nb.concat(full, pos), dtype=te.dtype_of(op.result))

    def flatten(self, op: te.FlattenOp) -> np.ndarray:
        return np.ascontiguousarray(nb.flatten_last2(self.get(op.input)))

    def generate(self, op: te.GenerateOp) -> np.ndarray:
        ext = [self.get(e) for e in op.extents]
        if op.fn.data == "causal_mask":
            return nb.causal_mask(ext[0], dtype=te.dtype_of(op.result))
        if op.fn.data == "iota":
            return np.arange(ext[0], dtype=te.dtype_of(op.result))
        return nb.index_parity(ext[0], op.fn.data)

    def place(self, op: te.PlaceOp) -> np.ndarray:
        src = self.get(op.input)
        names = te.names_of_each(op.operand_indices)[0]
        out = te.names_of(op.indices)
        pos = op.position_list()
        extents = iter(self.get(e) for e in op.extents)
        shape = []
        index: list[Any] = []
        free = [n for n, p in zip(out, pos) if p < 0]
        for k, (n, p) in enumerate(zip(out, pos)):
            if p >= 0:
                size = next(extents)
                if p >= size:
                    raise FuseRuntimeError(f"position {p} is outside axis {k} of extent {size}", _loc(op))
                shape.append(size)
                index.append(p)
            else:
                shape.append(src.shape[names.index(n)])
                index.append(slice(None))
        res = np.zeros(shape, dtype=src.dtype)
        res[tuple(index)] = align(src, names, free)
        return res

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

    def block(self, op: te.BlockOp) -> Any:
        fn = op.fn.data
        arrays = [self.get(v) for v in op.inputs]
        names = te.names_of_each(op.operand_indices)
        roles = te.params_of(op.roles)
        params = te.params_of(op.params)
        out = te.names_of(op.indices)
        if fn == "attention":
            q, k, v = arrays[:3]
            qn, kn, vn = names[:3]
            batch = list(qn[:-2])
            qs, ks, d, e = roles["query"], roles["key"], roles["feature"], roles["value"]
            qa = align(q, qn, [*batch, qs, d])
            ka = align(k, kn, [*batch, ks, d])
            va = align(v, vn, [*batch, ks, e])
            mask = align(arrays[3], names[3], [*batch, qs, ks]) if len(arrays) > 3 else None
            dtype = te.dtype_of(op.outputs[0])
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
                dtype=te.dtype_of(op.outputs[0]),
            )
        if fn == "tucker_dense":
            return np.asarray(
                nb.tucker_dense(x, rank=params.get("rank"), threshold=params.get("threshold", 0.5)),
                dtype=te.dtype_of(op.outputs[0]),
            )
        ax = xn.index(roles["axis"])
        idx, vals = nb.topk(x, params["k"], axis=ax)
        del out
        return (idx, vals)

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

    def cast(self, op: te.CastOp) -> np.ndarray:
        return self.get(op.input).astype(te.dtype_of(op.result))

    def sink(self, op: te.SinkOp) -> None:
        names = te.names_of(op.names)
        vals = [np.array(self.get(v)) for v in op.values]
        value: Any = vals[0] if len(vals) == 1 else dict(zip(names, vals))
        self.result.sinks.append((op.path.data, value, _loc(op)))

    def export(self, op: te.ExportOp) -> None:
        for name, v in zip(te.names_of(op.names), op.values):
            self.result.exports[name] = np.array(self.get(v))


_HANDLERS: dict[type, Callable[[Interpreter, Any], Any]] = {
    te.InputOp: Interpreter.input,
    te.SourceOp: Interpreter.source,
    te.ConstantOp: Interpreter.constant,
    arith.ConstantOp: Interpreter.index_constant,
    arith.AddiOp: Interpreter.addi,
    arith.MuliOp: Interpreter.muli,
    te.DimOp: Interpreter.dim,
    te.SliceLenOp: Interpreter.slice_len,
    te.CheckDimOp: Interpreter.check_dim,
    te.AccessOp: Interpreter.access,
    te.ContractOp: Interpreter.contract,
    te.MapOp: Interpreter.map,
    te.BroadcastOp: Interpreter.broadcast,
    te.ReduceOp: Interpreter.reduce,
    te.AxisOp: Interpreter.axis_fn,
    te.ConcatOp: Interpreter.concat,
    te.FlattenOp: Interpreter.flatten,
    te.GenerateOp: Interpreter.generate,
    te.PlaceOp: Interpreter.place,
    te.ScatterAddOp: Interpreter.scatter_add,
    te.BlockOp: Interpreter.block,
    te.GroupOp: Interpreter.group,
    te.CastOp: Interpreter.cast,
    te.FixpointOp: Interpreter.fixpoint,
    te.SinkOp: Interpreter.sink,
    te.ExportOp: Interpreter.export,
}


Interpreter.handlers = _HANDLERS


def run_module(module: ModuleOp, inputs: dict[str, np.ndarray], sources: dict[str, np.ndarray]) -> RunResult:
    """Run a tensor_eq module on NumPy arrays; returns the exports and the pending sink writes."""
    return Interpreter(module, inputs, sources).run()
