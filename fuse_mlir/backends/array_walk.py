"""One tensor_eq walker for the array frameworks (torch, jax), parameterised by an array namespace.

The walker evaluates a tensor_eq module op by op, as the reference
interpreter does and with the same registration shape (one handler per op
class in an :class:`~fuse_mlir.interp.registry.OpTable`, reading the per-op
plans of :mod:`fuse_mlir.interp.plans`), but every array operation goes
through an :class:`ArrayOps` object (the framework's kernel table: einsum,
gathers, reductions, elementwise math, ...). The torch backend runs it
eagerly or wraps it in ``torch.compile``; the jax backend traces it once
inside ``jax.jit`` into one XLA computation.

Shapes are static for the walker (as under ``jax.jit``): extent checks,
positions and empty-axis errors are raised while walking, from shapes alone,
with the reference's messages (:func:`fuse_mlir.interp.plans.access_plan`
is shared). Data-dependent errors (a gathered index out of range, an integer
raised to a negative integer power) cannot be raised inside a traced
function, so the walker clamps the indices, returns ``(bad, value, extent)``
flags beside the results, and :func:`raise_failed_checks` raises the first
failure on the host after the call.
"""

from __future__ import annotations

import math
import string
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import source_loc as _loc
from fuse_mlir.interp import numpy_builtins as nb
from fuse_mlir.interp.contraction import ArrayKit, broadcast_shape, contract_named, distinct
from fuse_mlir.interp.dtypes import accumulate_dtype
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
from fuse_mlir.lowered import Lowered, RunResult
from fuse_mlir.passes.pipeline import Pipeline
from fuse_mlir.targets import normalise_opt_level

Array = Any

# Where the float math of these map functions runs in the result's dtype (as the reference's ``_as_float``).
_COMPUTE_IN_RESULT = {
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "neg",
    "relu",
    "abs",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sin",
    "cos",
    "gelu",
    "gelu_grad",
    "sig",
    "maximum",
    "minimum",
}
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715
_GELU_CLIP = 10.0  # as numpy_builtins: tanh's argument is beyond 43 there, where tanh is exactly +-1


class ArrayOps:
    """A framework's kernel table: the array operations the walker needs, with NumPy's names and semantics.

    Subclasses implement the primitives; the builtins (softmax, gelu, rope,
    attention, ...) are written once here on top of them.
    """

    name = "arrays"

    # -- primitives (framework specific) ------------------------------------------

    def asarray(self, x: np.ndarray) -> Array:
        raise NotImplementedError

    def to_numpy(self, x: Array) -> np.ndarray:
        raise NotImplementedError

    def astype(self, x: Array, dtype: np.dtype) -> Array:
        raise NotImplementedError

    def numpy_dtype(self, x: Array) -> np.dtype:
        raise NotImplementedError

    def argmax_bool(self, flags: Array) -> Array:
        """The position of the first true entry of a 1-d boolean array (0 when none)."""
        raise NotImplementedError

    def zeros(self, shape: Sequence[int], dtype: np.dtype) -> Array:
        raise NotImplementedError

    def arange(self, n: int) -> Array:
        """0..n-1 as int64."""
        raise NotImplementedError

    def transpose(self, x: Array, perm: Sequence[int]) -> Array:
        raise NotImplementedError

    def reshape(self, x: Array, shape: Sequence[int]) -> Array:
        raise NotImplementedError

    def broadcast_to(self, x: Array, shape: Sequence[int]) -> Array:
        raise NotImplementedError

    def einsum(self, spec: str, *xs: Array) -> Array:
        raise NotImplementedError

    def where(self, c: Array, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def reduce(self, x: Array, axes: tuple[int, ...], kind: str, keepdims: bool = False) -> Array:
        """``kind`` in sum/max/min/mean/prod/any over ``axes`` (any gives bool)."""
        raise NotImplementedError

    def unary(self, fn: str, x: Array) -> Array:
        """exp/log/sqrt/abs/tanh/sin/cos/isfinite/floor elementwise."""
        raise NotImplementedError

    def maximum(self, a: Array, b: Array) -> Array:
        """Elementwise maximum: NaN propagates and -0 < +0 (IEEE 754-2019, as ``llvm.maximum``)."""
        raise NotImplementedError

    def minimum(self, a: Array, b: Array) -> Array:
        """Elementwise minimum: NaN propagates and -0 < +0 (IEEE 754-2019, as ``llvm.minimum``)."""
        raise NotImplementedError

    def power(self, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def clip(self, x: Array, lo: float, hi: float) -> Array:
        raise NotImplementedError

    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        raise NotImplementedError

    def stack(self, xs: Sequence[Array], axis: int) -> Array:
        raise NotImplementedError

    def take(self, x: Array, index: tuple[Any, ...]) -> Array:
        """``x[index]`` with NumPy advanced indexing (integer arrays broadcast against each other)."""
        return x[index]

    def set_at(self, x: Array, index: tuple[Any, ...], value: Array) -> Array:
        """A copy of ``x`` with ``x[index] = value``."""
        raise NotImplementedError

    def add_at(self, x: Array, index: tuple[Any, ...], value: Array) -> Array:
        """A copy of ``x`` with ``value`` added at ``index`` (integer arrays of ``value``'s shape); duplicate
        positions accumulate."""
        raise NotImplementedError

    def argsort_stable(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def flip(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def take_along_axis(self, x: Array, idx: Array, axis: int) -> Array:
        raise NotImplementedError

    def svd_u(self, x: Array) -> Array:
        """The left singular vectors of a matrix (reduced)."""
        raise NotImplementedError

    def matmul(self, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def scalar(self, value: float | int, dtype: np.dtype) -> Array:
        return self.asarray(np.asarray(value, dtype=dtype))

    # -- shared helpers --------------------------------------------------------

    def ne0(self, x: Array) -> Array:
        return x != 0

    def align(self, x: Array, names: Sequence[str], target: Sequence[str]) -> Array:
        """``x`` (axes ``names``) with axes in ``target`` order, size-1 axes for names it lacks."""
        names = list(names)
        order = [names.index(n) for n in target if n in names]
        if order != list(range(len(order))):
            x = self.transpose(x, order)
        it = iter(x.shape)
        shape = [next(it) if n in names else 1 for n in target]
        return self.reshape(x, shape) if tuple(shape) != tuple(x.shape) else x

    # -- builtins (numpy_builtins semantics, written once) ------------------------

    def logistic(self, z: Array) -> Array:
        e = self.unary("exp", -self.unary("abs", z))
        return self.where(z >= 0, 1 / (1 + e), e / (1 + e))

    def gelu(self, x: Array) -> Array:
        xc = self.clip(x, -_GELU_CLIP, _GELU_CLIP)
        t = self.unary("tanh", _SQRT_2_OVER_PI * (xc + _GELU_A * xc * xc * xc))
        return 0.5 * self.maximum(x, self.scalar(-_GELU_CLIP, self.numpy_dtype(x))) * (1 + t)

    def gelu_grad(self, x: Array) -> Array:
        xc = self.clip(x, -_GELU_CLIP, _GELU_CLIP)
        x2 = xc * xc
        t = self.unary("tanh", _SQRT_2_OVER_PI * (xc + _GELU_A * x2 * xc))
        sech2 = (1 - t) * (1 + t)
        return 0.5 * (1 + t) + 0.5 * xc * sech2 * (_SQRT_2_OVER_PI * (1 + 3 * _GELU_A * x2))

    def sig(self, x: Array, dtype: np.dtype, t: Array | float | None) -> Array:
        if t is None or (isinstance(t, float) and t == 0):
            return self.astype(x > 0, dtype)
        if isinstance(t, float):
            return self.logistic(x / t)
        tz = t == 0
        soft = self.logistic(x / self.where(tz, self.scalar(1, dtype), t))
        return self.where(tz, self.astype(x > 0, dtype), soft)

    def shifted_exp(self, x: Array, axis: int) -> tuple[Array, Array]:
        m = self.reduce(x, (axis,), "max", keepdims=True)
        m = self.where(self.unary("isfinite", m), m, self.zeros((), self.numpy_dtype(x)))
        return self.unary("exp", x - m), m

    def softmax(self, x: Array, axis: int) -> Array:
        if _size(x) == 0:
            return x
        e, _ = self.shifted_exp(x, axis)
        return e / self.reduce(e, (axis,), "sum", keepdims=True)

    def masked_softmax(self, x: Array, mask: Array, axis: int, fill: float | None = None) -> Array:
        dtype = self.numpy_dtype(x)
        keep = self.ne0(mask)
        fill_v = float(np.finfo(dtype).min) if fill is None else fill
        xm = self.where(keep, x, self.scalar(fill_v, dtype))
        if _size(xm) == 0:
            return xm
        e, _ = self.shifted_exp(xm, axis)
        y = e / self.reduce(e, (axis,), "sum", keepdims=True)
        return self.where(keep, y, self.zeros((), dtype))

    def softmax_grad(self, y: Array, g: Array, axis: int) -> Array:
        return y * (g - self.reduce(y * g, (axis,), "sum", keepdims=True))

    def lnorm(self, x: Array, axis: int, eps: float = 1e-5) -> Array:
        if _size(x) == 0:
            return x
        d = x - self.reduce(x, (axis,), "mean", keepdims=True)
        var = self.reduce(d * d, (axis,), "mean", keepdims=True)
        return d / self.unary("sqrt", var + eps)

    def logsumexp(self, x: Array, axis: int) -> Array:
        shape = [n for k, n in enumerate(x.shape) if k != axis]
        if x.shape[axis] == 0:
            return self.astype(self.zeros(shape, self.numpy_dtype(x)) - np.inf, self.numpy_dtype(x))
        if _size(x) == 0:
            return self.zeros(shape, self.numpy_dtype(x))
        e, m = self.shifted_exp(x, axis)
        return self.unary("log", self.reduce(e, (axis,), "sum")) + self.reshape(m, shape)

    def reduce_checked(self, x: Array, axes: tuple[int, ...], kind: str) -> Array:
        """The reference's ``reduce``: empty axes give the identities (max/min: ``nb.reduce_identity``)."""
        out_shape = [n for k, n in enumerate(x.shape) if k not in axes]
        empty = [k for k in axes if x.shape[k] == 0]
        if kind in ("max", "min") and empty:
            dtype = self.numpy_dtype(x)
            return self.astype(self.zeros(out_shape, dtype) + nb.reduce_identity(kind, dtype), dtype)
        if kind == "any":
            return self.astype(self.reduce(self.ne0(x), axes, "any"), np.dtype(np.int8))
        if kind == "mean" and empty:
            return self.zeros(out_shape, np.dtype(np.float64)) + np.nan
        if not axes:
            return x
        return self.reduce(x, axes, kind)

    def attention(self, q: Array, k: Array, v: Array, mask: Array | None, scale: float | None, causal: bool) -> Array:
        d = q.shape[-1]
        lq, lk = q.shape[-2], k.shape[-2]
        s = (1.0 / math.sqrt(d) if d > 0 else 1.0) if scale is None else scale
        perm = list(range(len(k.shape)))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        scores = self.matmul(q, self.transpose(k, perm)) * self.scalar(s, self.numpy_dtype(q))
        keep: Array | None = None
        if causal:
            keep = self.asarray(np.tri(lq, lk, lk - lq, dtype=bool))
        if mask is not None:
            m = self.ne0(mask)
            keep = m if keep is None else keep & m
        p = self.softmax(scores, len(scores.shape) - 1) if keep is None else self.masked_softmax(scores, keep, -1)
        return self.matmul(p, v)

    def rope(self, x: Array, sa: int, fa: int, base: float) -> Array:
        d = x.shape[fa]
        if sa == fa:
            raise ValueError("rope: the sequence and feature axes must differ")
        if d % 2:
            raise ValueError(f"rope: the feature dimension must be even, got {d}")
        n = x.shape[sa]
        dtype = self.numpy_dtype(x)
        inv_freq = float(base) ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]
        c = self.asarray(np.cos(ang).astype(dtype))
        s = self.asarray(np.sin(ang).astype(dtype))
        rest = [k for k in range(len(x.shape)) if k not in (sa, fa)]
        xm = self.transpose(x, [*rest, sa, fa])
        pairs = self.reshape(xm, [*xm.shape[:-1], d // 2, 2])
        x0 = self.take(pairs, (..., 0))
        x1 = self.take(pairs, (..., 1))
        out = self.reshape(self.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1), xm.shape)
        inverse = np.argsort([*rest, sa, fa]).tolist()
        return self.transpose(out, inverse)

    def tucker_dense(self, x: Array, rank: Any, threshold: float) -> Array:
        from fuse_mlir.interp.numpy_builtins import tucker_ranks

        dtype = self.numpy_dtype(x)
        if len(x.shape) == 0:
            return self.astype(x > threshold, dtype)
        ranks = tucker_ranks(tuple(x.shape), rank)
        if _size(x) == 0:
            return self.zeros(x.shape, dtype)
        us: list[Array | None] = []
        for mode, (n, r) in enumerate(zip(x.shape, ranks)):
            if r >= n:
                us.append(None)
                continue
            order = [mode, *[k for k in range(len(x.shape)) if k != mode]]
            unfolded = self.reshape(self.transpose(x, order), [n, -1])
            us.append(self.take(self.svd_u(unfolded), (slice(None), slice(0, r))))
        approx = x
        for mode, u in enumerate(us):
            if u is not None:
                approx = self._mode_dot(approx, self.matmul(u, self.transpose(u, [1, 0])), mode)
        return self.astype((approx - threshold) > 0, dtype)

    def _mode_dot(self, t: Array, m: Array, mode: int) -> Array:
        letters = string.ascii_letters[: len(t.shape)]
        out = letters.replace(letters[mode], "Z")
        return self.einsum(f"Z{letters[mode]},{letters}->{out}", m, t)

    def topk(self, x: Array, k: int, axis: int) -> tuple[Array, Array]:
        n = x.shape[axis]
        if k < 0 or k > n:
            raise ValueError(f"topk: k = {k} is out of range for an axis of extent {n}")
        order = self.flip(self.argsort_stable(self.flip(x, axis), axis), axis)
        index = [slice(None)] * len(x.shape)
        index[axis] = slice(0, k)
        idx = self.astype((n - 1) - self.take(order, tuple(index)), np.dtype(np.int64))
        return idx, self.take_along_axis(x, idx, axis)


def _size(x: Array) -> int:
    return math.prod(x.shape)


@dataclass
class CheckSpec:
    """A data-dependent check evaluated on the host after the call: ``message.format(value, extent)``."""

    message: str
    loc: Loc | None


@dataclass
class WalkMeta:
    """What a walk found that is not an array: the exports' names, the sinks, the deferred checks."""

    exports: list[str] = field(default_factory=list)
    sinks: list[tuple[str, list[str], Loc | None]] = field(default_factory=list)
    checks: list[CheckSpec] = field(default_factory=list)


WalkOutput = tuple[dict[str, Array], list[list[Array]], list[tuple[Array, Array, Array]]]


class TeWalker:
    """Evaluates a tensor_eq module with an :class:`ArrayOps` table; :meth:`__call__` is traceable."""

    def __init__(self, module: ModuleOp, ops: ArrayOps):
        self.module = module
        self.ops = ops
        self.meta = static_meta(module)

    def __call__(self, inputs: dict[str, Array], sources: dict[str, Array]) -> WalkOutput:
        """Exports by name, sink values in op order, check flags ``(bad, value, extent)`` in op order."""
        env: dict[SSAValue, Any] = {}
        exports: dict[str, Array] = {}
        sinks: list[list[Array]] = []
        checks: list[tuple[Array, Array, Array]] = []
        state = _State(self.ops, env, inputs, sources, exports, sinks, checks)
        for op in self.module.body.block.ops:
            handler = WALK.get(op)
            if handler is None:
                raise FuseRuntimeError(f"the {self.ops.name} backend cannot run '{op.name}'")
            try:
                out = handler(state, op)
            except ValueError as e:
                raise FuseRuntimeError(f"{op.name}: {e}", _loc(op)) from e
            if out is None:
                continue
            if isinstance(out, tuple):
                for r, v in zip(op.results, out):
                    env[r] = v
            else:
                env[op.results[0]] = out
        return exports, sinks, checks


def raise_failed_checks(meta: WalkMeta, flags: Sequence[tuple[Any, Any, Any]]) -> None:
    """Raise the first deferred check whose flag is set (flags converted to host values here)."""
    for spec, (bad, value, extent) in zip(meta.checks, flags):
        if bool(np.asarray(bad)):
            raise FuseRuntimeError(spec.message.format(np.asarray(value).item(), int(np.asarray(extent))), spec.loc)


@dataclass
class _State:
    ops: ArrayOps
    env: dict[SSAValue, Any]
    inputs: dict[str, Array]
    sources: dict[str, Array]
    exports: dict[str, Array]
    sinks: list[list[Array]]
    checks: list[tuple[Array, Array, Array]]

    def get(self, v: SSAValue) -> Any:
        return self.env[v]

    def defer_check(self, bad: Array, values: Array, extent: int) -> None:
        """Record ``any(bad)``, the first bad value (row-major) and the extent for :func:`raise_failed_checks`."""
        xp = self.ops
        ext = xp.asarray(np.asarray(extent, dtype=np.int64))
        if _size(bad) == 0:
            self.checks.append((xp.asarray(np.asarray(False)), xp.asarray(np.asarray(0)), ext))
            return
        flat_bad = xp.reshape(bad, [-1])
        flat = xp.reshape(xp.broadcast_to(values, bad.shape), [-1])
        first = xp.reshape(xp.take(flat, (xp.reshape(xp.argmax_bool(flat_bad), [1]),)), [])
        self.checks.append((xp.reduce(flat_bad, (0,), "any"), first, ext))


def _checked_index(s: _State, g: Array, n: int) -> Array:
    """Index tensor ``g`` into an axis of extent ``n`` as int64 positions clamped into range, its range check deferred.

    The comparison runs on the int64 copy: torch has no comparisons for uint64, and a uint64 value of 2**63 or
    more wraps negative there, so it fails the check too. The run fails after the call; nothing out of range is read.
    """
    xp = s.ops
    gi = xp.astype(g, np.dtype(np.int64))
    s.defer_check((gi < 0) | (gi >= n), g, n)
    return xp.clip(gi, 0, max(n - 1, 0))


def _int_pow(op: Operation) -> bool:
    """An integer power: its negative exponents are a data-dependent error, checked on the host after the call."""
    return isinstance(op, te.MapOp) and (plan := map_plan(op)).fn == "pow" and plan.dtype.kind in "iu"


def static_meta(module: ModuleOp) -> WalkMeta:
    """The exports, sinks and deferred checks of a module, in the order the walker produces their values."""
    meta = WalkMeta()
    for op in module.body.block.ops:
        if isinstance(op, te.AccessOp):
            for k, a in enumerate(access_op_plan(op).axes):
                if a.axis_kind == te.AxisKind.GATHER:
                    meta.checks.append(
                        CheckSpec(f"gathered index {{0}} is out of range for axis {k} (extent {{1}})", _loc(op))
                    )
        elif isinstance(op, te.ScatterAddOp):
            for k, a in enumerate(op.axis_list()):
                if a.axis_kind == te.AxisKind.GATHER:
                    meta.checks.append(CheckSpec(SCATTER_RANGE.format("{0}", k, "{1}"), _loc(op)))
        elif _int_pow(op):
            meta.checks.append(CheckSpec(nb.INT_NEGATIVE_POWER, _loc(op)))
        elif isinstance(op, te.BlockOp) and op.fn.data == "tucker_dense":
            meta.checks.append(CheckSpec(nb.TUCKER_NOT_FINITE, _loc(op)))
        elif isinstance(op, te.SinkOp):
            meta.sinks.append((op.path.data, list(te.names_of(op.names)), _loc(op)))
        elif isinstance(op, te.ExportOp):
            meta.exports.extend(te.names_of(op.names))
    return meta


WALK = OpTable("array walker")
"""The walker's handlers, one function of ``(state, op)`` per op class, registered with ``@WALK.impl``."""


@WALK.impl(te.InputOp)
def _input(s: _State, op: te.InputOp) -> Array:
    return s.inputs[op.tensor_name.data]


@WALK.impl(te.SourceOp)
def _source(s: _State, op: te.SourceOp) -> Array:
    return s.sources[op.tensor_name.data]


@WALK.impl(te.ConstantOp)
def _constant(s: _State, op: te.ConstantOp) -> Array:
    return s.ops.asarray(te.dense_value(op.value))


@WALK.impl(arith.ConstantOp)
def _index_constant(s: _State, op: arith.ConstantOp) -> int:
    return index_constant(op)


@WALK.impl(arith.AddiOp)
def _addi(s: _State, op: arith.AddiOp) -> int:
    return s.get(op.lhs) + s.get(op.rhs)


@WALK.impl(arith.MuliOp)
def _muli(s: _State, op: arith.MuliOp) -> int:
    return s.get(op.lhs) * s.get(op.rhs)


@WALK.impl(te.DimOp)
def _dim(s: _State, op: te.DimOp) -> int:
    return int(s.get(op.source).shape[op.axis.value.data])


@WALK.impl(te.SliceLenOp)
def _slice_len(s: _State, op: te.SliceLenOp) -> int:
    return len(range(s.get(op.extent))[slice(*op.bounds())])


@WALK.impl(te.CheckDimOp)
def _check_dim(s: _State, op: te.CheckDimOp) -> None:
    op.enforce(s.get(op.lhs), s.get(op.rhs))


@WALK.impl(te.AccessOp)
def _access(s: _State, op: te.AccessOp) -> Array:
    xp = s.ops
    src = s.get(op.source)
    plan = access_op_plan(op)
    out, gnames, dtype = plan.out, plan.gather_names, plan.dtype
    loc = _loc(op)
    gathers = [s.get(g) for g in op.gathers]
    parsed, shape = access_plan(op, tuple(src.shape), [tuple(g.shape) for g in gathers], loc)

    def grid(name: str) -> Array:
        p = out.index(name)
        g = [1] * len(out)
        g[p] = shape[p]
        return xp.reshape(xp.arange(shape[p]), g)

    idx: list[Any] = []
    valid: Array | None = None
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
            idx.append(xp.clip(i, 0, max(n - 1, 0)))
        else:
            gi = _checked_index(s, gathers[val], n)
            idx.append(xp.align(gi, gnames[val], out))
    if _size(src) == 0 or 0 in shape:
        return xp.zeros(shape, dtype)
    res = xp.broadcast_to(xp.take(src, tuple(idx)), shape)
    if valid is not None:
        res = xp.where(xp.broadcast_to(valid, shape), res, xp.zeros((), dtype))
    return res


@WALK.impl(te.ContractOp)
def _contract(s: _State, op: te.ContractOp) -> Array:
    """A product projected by name; more distinct names than einsum takes are split (interp/contraction.py)."""
    xp = s.ops
    arrays = [s.get(v) for v in op.inputs]
    plan = contract_plan(op)
    names, out, proj, dtype = plan.names, plan.out, plan.projection, plan.dtype
    if proj in ("sum", "mean"):
        ext: dict[str, int] = {}
        for a, ns in zip(arrays, names):
            for n, size in zip(ns, a.shape):
                ext.setdefault(n, size)
        if proj == "sum" and any(ext[n] == 0 for n in plan.projected):
            # A sum over an empty index is 0 whatever the factors; einsum may sum a factor over its own indices
            # first, and 0 times a NaN or infinite factor would be NaN (contract-order guards its products alike).
            return xp.zeros([ext[n] for n in out], dtype)
        work = accumulate_dtype(plan.mean_work_dtype(plan.in_dtypes) if proj == "mean" else dtype)
        kit = ArrayKit(xp.stack, lambda shape: xp.zeros(shape, work), lambda a, b: a + b)
        res = contract_named(
            [xp.astype(a, work) for a in arrays],
            names,
            out,
            lambda arrs, ns, o: xp.einsum(einsum_spec(tuple(map(tuple, ns)), tuple(o)), *arrs),
            kit,
            linear=True,
        )
        if proj == "mean":
            count = math.prod(ext[n] for n in plan.projected)
            res = res / count if count else xp.zeros(res.shape, work) + np.nan
        return xp.astype(res, dtype)

    def kernel(arrs: list[Array], ns_list: list[tuple[Hashable, ...]], o: tuple[Hashable, ...]) -> Array:
        axes_of = [[str(n) for n in ns] for ns in ns_list]
        every = [str(n) for n in distinct(ns_list)]
        kept = [str(n) for n in o]
        extent: dict[str, int] = {}
        for a, ns in zip(arrs, axes_of):
            for n, size in zip(ns, a.shape):
                extent.setdefault(n, size)
        prod = None
        for a, ns in zip(arrs, axes_of):
            x = xp.align(a, ns, every)
            prod = x if prod is None else prod * x
        assert prod is not None
        prod = xp.broadcast_to(prod, [extent[n] for n in every])
        axes = tuple(k for k, n in enumerate(every) if n not in kept)
        res = xp.reduce_checked(prod, axes, proj)
        return xp.align(res, [n for n in every if n in kept], kept)

    combine = {"max": xp.maximum, "min": xp.minimum, "prod": lambda a, b: a * b}[proj]
    kit = ArrayKit(xp.stack, lambda shape: xp.zeros(shape, dtype), combine)
    return xp.astype(contract_named(arrays, names, out, kernel, kit, linear=False), dtype)


@WALK.impl(te.MapOp)
def _map(s: _State, op: te.MapOp) -> Array:
    xp = s.ops
    plan = map_plan(op)
    fn, dtype, in_dtypes, params = plan.fn, plan.dtype, plan.in_dtypes, plan.params
    args = [xp.align(s.get(v), ns, plan.out) for v, ns in zip(op.inputs, plan.names)]
    if fn in _COMPUTE_IN_RESULT:
        args = [xp.astype(a, dtype) for a in args]
    elif fn == "select":
        args = [args[0], xp.astype(args[1], dtype), xp.astype(args[2], dtype)]
    elif len(args) == 2:
        common = np.result_type(*in_dtypes)
        args = [xp.astype(a, common) for a in args]
    shape = broadcast_shape(*[tuple(a.shape) for a in args]) if args else ()
    if _int_pow(op):  # over the broadcast shape: an empty base checks nothing, as in NumPy
        s.defer_check(xp.broadcast_to(args[1] < 0, shape), args[1], 0)
    res = _map_kernel(xp, fn, args, dtype, params)
    return xp.broadcast_to(xp.astype(res, dtype), shape)


def _map_kernel(xp: ArrayOps, fn: str, a: list[Array], dtype: np.dtype, params: dict[str, object]) -> Array:
    i8 = np.dtype(np.int8)
    if fn == "add":
        return a[0] + a[1]
    if fn == "sub":
        return a[0] - a[1]
    if fn == "mul":
        return a[0] * a[1]
    if fn == "div":
        return a[0] / a[1]
    if fn == "pow":
        return xp.power(a[0], a[1])
    if fn == "neg":
        return -a[0]
    if fn in ("lt", "le", "gt", "ge", "eq", "ne"):
        x, y = a
        cmp = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[fn]
        return xp.astype(cmp, i8)
    if fn == "not":
        return xp.astype(~xp.ne0(a[0]), i8)
    if fn == "and":
        return xp.astype(xp.ne0(a[0]) & xp.ne0(a[1]), i8)
    if fn == "or":
        return xp.astype(xp.ne0(a[0]) | xp.ne0(a[1]), i8)
    if fn == "select":
        return xp.where(xp.ne0(a[0]), a[1], a[2])
    if fn == "relu":
        return xp.maximum(a[0], xp.zeros((), dtype))
    if fn == "step":
        return xp.astype(a[0] > 0, i8)
    if fn == "sig":
        t = a[1] if len(a) > 1 else params.get("T")
        return xp.sig(a[0], dtype, float(t) if isinstance(t, int | float) else t)
    if fn == "gelu":
        return xp.gelu(a[0])
    if fn == "gelu_grad":
        return xp.gelu_grad(a[0])
    if fn in ("exp", "log", "sqrt", "abs", "tanh", "sin", "cos"):
        return xp.unary(fn, a[0])
    if fn == "maximum":
        return xp.maximum(a[0], a[1])
    if fn == "minimum":
        return xp.minimum(a[0], a[1])
    raise FuseRuntimeError(f"the {xp.name} backend has no elementwise function {fn!r}")


@WALK.impl(te.BroadcastOp)
def _broadcast(s: _State, op: te.BroadcastOp) -> Array:
    xp = s.ops
    src = s.get(op.input)
    plan = broadcast_plan(op)
    names, out = plan.names, plan.out
    extents = iter(s.get(e) for e in op.extents)
    shape = [src.shape[names.index(n)] if n in names else next(extents) for n in out]
    return xp.broadcast_to(xp.align(src, names, out), shape)


@WALK.impl(te.ReduceOp)
def _reduce(s: _State, op: te.ReduceOp) -> Array:
    xp = s.ops
    src = s.get(op.input)
    plan = reduce_plan(op)
    axes, kind, dtype = plan.axes, plan.kind, plan.dtype
    if kind == "logsumexp":
        res = xp.astype(src, dtype)
        for ax in sorted(axes, reverse=True):
            res = xp.logsumexp(res, ax)
    else:
        if kind in ("sum", "prod", "mean"):
            src = xp.astype(src, dtype)  # NumPy accumulates small integers in the widened result dtype
        res = xp.reduce_checked(src, axes, kind)
    return xp.astype(xp.align(res, plan.kept, plan.out), dtype)


def _full(s: _State, values: Sequence[SSAValue], names_each: Sequence[Sequence[str]], out: Sequence[str]) -> list:
    xp = s.ops
    args = [xp.align(s.get(v), ns, out) for v, ns in zip(values, names_each)]
    shape = broadcast_shape(*[tuple(a.shape) for a in args])
    return [xp.broadcast_to(a, shape) for a in args]


@WALK.impl(te.AxisOp)
def _axis_fn(s: _State, op: te.AxisOp) -> Array:
    xp = s.ops
    plan = axis_plan(op)
    dtype, axis, params, fn = plan.dtype, plan.axis, plan.params, plan.fn
    args = _full(s, op.inputs, plan.names, plan.out)
    if fn == "masked_softmax":
        res = xp.masked_softmax(xp.astype(args[0], dtype), args[1], axis, params.get("fill"))
    elif fn == "softmax":
        res = xp.softmax(xp.astype(args[0], dtype), axis)
    elif fn == "softmax_grad":
        res = xp.softmax_grad(xp.astype(args[0], dtype), xp.astype(args[1], dtype), axis)
    else:
        res = xp.lnorm(xp.astype(args[0], dtype), axis, **params)
    return xp.astype(res, dtype)


@WALK.impl(te.ConcatOp)
def _concat(s: _State, op: te.ConcatOp) -> Array:
    xp = s.ops
    plan = concat_plan(op)
    dtype, pos = plan.dtype, plan.pos
    arrays = [xp.align(s.get(v), ns, plan.out) for v, ns in zip(op.inputs, plan.names)]
    common = list(broadcast_shape(*[tuple(1 if k == pos else n for k, n in enumerate(a.shape)) for a in arrays]))
    full = []
    for a in arrays:
        shape = list(common)
        shape[pos] = a.shape[pos]
        full.append(xp.astype(xp.broadcast_to(a, shape), dtype))
    return xp.concatenate(full, pos)


@WALK.impl(te.FlattenOp)
def _flatten(s: _State, op: te.FlattenOp) -> Array:
    x = s.get(op.input)
    return s.ops.reshape(x, [*x.shape[:-2], x.shape[-2] * x.shape[-1]])


@WALK.impl(te.GenerateOp)
def _generate(s: _State, op: te.GenerateOp) -> Array:
    from fuse_mlir.interp import numpy_builtins as nb

    ext = [s.get(e) for e in op.extents]
    if op.fn.data == "nonempty":
        return s.ops.asarray(nb.nonempty(ext, te.dtype_of(op.result)))
    if op.fn.data == "causal_mask":
        return s.ops.asarray(nb.causal_mask(ext[0], dtype=te.dtype_of(op.result)))
    if op.fn.data == "iota":
        return s.ops.asarray(np.arange(ext[0], dtype=te.dtype_of(op.result)))
    return s.ops.asarray(nb.index_parity(ext[0], op.fn.data))


@WALK.impl(te.PlaceOp)
def _place(s: _State, op: te.PlaceOp) -> Array:
    xp = s.ops
    src = s.get(op.input)
    plan = place_plan(op)
    names, free = plan.names, plan.free
    extents = iter(s.get(e) for e in op.extents)
    shape: list[int] = []
    index: list[Any] = []
    for k, (n, p) in enumerate(zip(plan.out, plan.positions)):
        if p >= 0:
            size = next(extents)
            if p >= size:
                raise FuseRuntimeError(f"position {p} is outside axis {k} of extent {size}", _loc(op))
            shape.append(size)
            index.append(p)
        else:
            shape.append(src.shape[names.index(n)])
            index.append(slice(None))
    dtype = plan.dtype
    return xp.set_at(xp.zeros(shape, dtype), tuple(index), xp.astype(xp.align(src, names, free), dtype))


@WALK.impl(te.ScatterAddOp)
def _scatter_add(s: _State, op: te.ScatterAddOp) -> Array:
    xp = s.ops
    upd = s.get(op.update)
    names = op.update_names()
    gathers = [s.get(g) for g in op.gathers]
    gnames = te.names_of_each(op.gather_indices)
    shape = scatter_plan(
        op, tuple(upd.shape), [tuple(g.shape) for g in gathers], [s.get(e) for e in op.extents], _loc(op)
    )
    dtype = te.dtype_of(op.result)
    idx: list[Any] = []
    for k, a in enumerate(op.axis_list()):
        if a.axis_kind == te.AxisKind.NAME:
            p = names.index(a.index_name)
            idx.append(xp.reshape(xp.arange(upd.shape[p]), [-1 if q == p else 1 for q in range(len(names))]))
            continue
        gi = _checked_index(s, gathers[a.value], shape[k])
        idx.append(xp.align(gi, gnames[a.value], names))
    if _size(upd) == 0 or 0 in shape:
        return xp.zeros(shape, dtype)
    full = tuple(xp.broadcast_to(i, tuple(upd.shape)) for i in idx)
    return xp.add_at(xp.zeros(shape, dtype), full, xp.astype(upd, dtype))


@WALK.impl(te.BlockOp)
def _block(s: _State, op: te.BlockOp) -> Any:
    xp = s.ops
    plan = block_plan(op)
    fn, names, roles, params, dtype = plan.fn, plan.names, plan.roles, plan.params, plan.dtypes[0]
    arrays = [s.get(v) for v in op.inputs]
    if fn == "attention":
        qn, kn, vn = names[:3]
        batch = list(qn[:-2])
        qs, ks, d, e = roles["query"], roles["key"], roles["feature"], roles["value"]
        qa = xp.astype(xp.align(arrays[0], qn, [*batch, qs, d]), dtype)
        ka = xp.astype(xp.align(arrays[1], kn, [*batch, ks, d]), dtype)
        va = xp.astype(xp.align(arrays[2], vn, [*batch, ks, e]), dtype)
        if ka.shape[-1] != qa.shape[-1]:
            raise ValueError(f"attention: q has feature size {qa.shape[-1]} but k has {ka.shape[-1]}")
        if va.shape[-2] != ka.shape[-2]:
            raise ValueError(f"attention: k has {ka.shape[-2]} keys but v has {va.shape[-2]}")
        mask = xp.align(arrays[3], names[3], [*batch, qs, ks]) if len(arrays) > 3 else None
        res = xp.attention(qa, ka, va, mask, params.get("scale"), bool(params.get("causal", False)))
        batch_shape = broadcast_shape(tuple(qa.shape[:-2]), tuple(ka.shape[:-2]), tuple(va.shape[:-2]))
        return xp.astype(xp.broadcast_to(res, [*batch_shape, qa.shape[-2], va.shape[-1]]), dtype)
    x, xn = arrays[0], names[0]
    if fn == "rope":
        res = xp.rope(
            xp.astype(x, dtype), xn.index(roles["sequence"]), xn.index(roles["feature"]), params.get("base", 10000.0)
        )
        return xp.astype(res, dtype)
    if fn == "tucker_dense":
        # A NaN or infinity is an error (nb.TUCKER_NOT_FINITE), found after the call like a gather's range (jax
        # traces); the SVDs run on the argument with those elements zeroed, so torch's does not raise meanwhile.
        xf = xp.astype(x, dtype)
        finite = xp.unary("isfinite", xf)
        s.defer_check(~finite, xp.asarray(np.asarray(0)), 0)
        xf = xp.where(finite, xf, xp.zeros(xf.shape, dtype))
        res = xp.tucker_dense(xf, params.get("rank"), params.get("threshold", 0.5))
        return xp.astype(res, dtype)
    idx, vals = xp.topk(x, int(params["k"]), xn.index(roles["axis"]))
    return (xp.astype(idx, plan.dtypes[0]), xp.astype(vals, plan.dtypes[1]))


@WALK.impl(te.GroupOp)
def _group(s: _State, op: te.GroupOp) -> Array:
    xp = s.ops
    dtype = te.dtype_of(op.result)
    parts = [s.get(v) for v in op.inputs]
    shape = broadcast_shape(*[tuple(p.shape) for p in parts])
    if op.boolean.value.data:
        acc = xp.broadcast_to(xp.ne0(parts[0]), shape)
        for p in parts[1:]:
            acc = acc | xp.ne0(p)
        return xp.astype(acc, np.dtype(np.int8))
    acc = xp.astype(parts[0], dtype)
    for p in parts[1:]:
        acc = acc + xp.astype(p, dtype)
    return xp.broadcast_to(acc, shape)


@WALK.impl(te.CastOp)
def _cast(s: _State, op: te.CastOp) -> Array:
    return s.ops.astype(s.get(op.input), te.dtype_of(op.result))


@WALK.impl(te.SinkOp)
def _sink(s: _State, op: te.SinkOp) -> None:
    s.sinks.append([s.get(v) for v in op.values])


@WALK.impl(te.ExportOp)
def _export(s: _State, op: te.ExportOp) -> None:
    for name, v in zip(te.names_of(op.names), op.values):
        s.exports[name] = s.get(v)


RETURN_TYPES = ("numpy", "native")


def check_return_type(return_type: str) -> str:
    if return_type not in RETURN_TYPES:
        raise FuseError(f"return_type must be one of {', '.join(RETURN_TYPES)}, not {return_type!r}")
    return return_type


class ArrayExecutor:
    """An executor that runs the walker through a framework: subclasses build the callable per module.

    ``return_type="numpy"`` gives NumPy exports, ``"native"`` the framework's
    own arrays (sinks are always written from NumPy copies).
    """

    ops: ArrayOps
    return_type: str = "numpy"

    def __init__(self, target: str | None = None, opt_level: str | int = "O2") -> None:
        self._programs: weakref.WeakKeyDictionary[Any, tuple[TeWalker, Callable[..., WalkOutput]]] = (
            weakref.WeakKeyDictionary()
        )
        self.target = target
        self.opt_level = normalise_opt_level(opt_level)

    def pipeline_module(self, lowered: Lowered) -> ModuleOp:
        """The module the walker runs: a copy of ``lowered``'s after the target's registered pipeline
        (``<target>-O0`` / ``<target>-O2``, :mod:`fuse_mlir.passes.presets`); the module itself without a target."""
        if self.target is None:
            return lowered.module
        module = lowered.module.clone()
        Pipeline.named(f"{self.target}-{self.opt_level}").run(module)
        return module

    def build(self, walker: TeWalker) -> Callable[..., WalkOutput]:
        """The callable that runs ``walker`` (jitted, compiled or as is)."""
        raise NotImplementedError

    def to_device(self, lowered: Lowered, name: str, array: np.ndarray) -> Array:
        """An input or source array of ``lowered`` on the backend's device."""
        return self.ops.asarray(array)

    def program_for(self, lowered: Lowered) -> tuple[TeWalker, Callable[..., WalkOutput]]:
        key = lowered.module  # held weakly: a module that is gone takes its entry with it (ids are reused)
        hit = self._programs.get(key)
        if hit is None:
            walker = TeWalker(self.pipeline_module(lowered), self.ops)
            hit = self._programs[key] = (walker, self.build(walker))
        return hit

    def __call__(self, lowered: Lowered, arrays: dict[str, np.ndarray]) -> RunResult:
        walker, fn = self.program_for(lowered)
        inputs = {k: self.to_device(lowered, k, v) for k, v in arrays.items()}
        sources = {k: self.to_device(lowered, k, v) for k, v in lowered.sources.items()}
        exports, sinks, flags = fn(inputs, sources)
        raise_failed_checks(walker.meta, flags)
        native = self.return_type == "native"
        # In the program's export order (jax returns dicts with sorted keys).
        result = RunResult({k: exports[k] if native else self.ops.to_numpy(exports[k]) for k in walker.meta.exports})
        for (path, names, loc), values in zip(walker.meta.sinks, sinks):
            host = [self.ops.to_numpy(v) for v in values]
            result.sinks.append((path, host[0] if len(host) == 1 else dict(zip(names, host)), loc))
        return result
