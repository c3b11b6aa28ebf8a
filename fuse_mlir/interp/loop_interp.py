"""A reference interpreter for the loop level: scalar loops in Python over NumPy buffers.

It runs ``func.func @fuse_main`` of a loop-level module (docs/native-abi.md)
op by op, so tests can check ``lower-ew-to-loop`` (and later loop-level
passes) against NumPy without the llvm backend. It is for tiny sizes, not
speed. Values are Python ints (``index``) and NumPy scalars (``f64``,
``i32``, ``i1`` as ``np.bool_``, ...) with the IR's wrap-around integer
semantics; ``loop.check`` failures raise :class:`FuseRuntimeError` from the
module's ``fuse.errors`` table, as the native runtime does. Newly allocated
buffers are filled with garbage (NaN, 99) so a read of an unwritten element
shows up in results.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuse_mlir.diagnostics import FuseRuntimeError, Loc, format_details
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.abi import HostCallEntry, LoopAbi
from fuse_mlir.dialects.locations import source_loc
from fuse_mlir.interp import numpy_builtins as nb
from fuse_mlir.interp.registry import OpTable
from fuse_mlir.lowered import RunResult

Env = dict[SSAValue, Any]

_CMPI = arith.CMPI_COMPARISON_OPERATIONS  # predicate names by number (xDSL owns the table)
_CMPF = arith.CMPF_COMPARISON_OPERATIONS


class LoopError(AssertionError):
    """The loop module itself is wrong (an access outside a buffer, a bad argument): a compiler bug."""


# --------------------------------------------------------------------------
# Scalar semantics
# --------------------------------------------------------------------------


def _width(t: Attribute) -> int:
    if isinstance(t, IndexType):
        return 64
    assert isinstance(t, IntegerType), t
    return t.width.data


def _unsigned(x: Any, t: Attribute) -> int:
    """The value as an unsigned integer of ``t``'s width."""
    return int(x) & ((1 << _width(t)) - 1)


def _signed(x: Any, t: Attribute) -> int:
    """The value as a signed integer of ``t``'s width (``i1`` true is -1, as in MLIR)."""
    w = _width(t)
    v = int(x) & ((1 << w) - 1)
    return v - (1 << w) if v >= 1 << (w - 1) else v


def make_int(v: int, t: Attribute) -> Any:
    """``v`` wrapped to type ``t``: a Python int for ``index``, a NumPy scalar otherwise."""
    if isinstance(t, IndexType):
        return _signed(v, t)
    assert isinstance(t, IntegerType), t
    w = t.width.data
    if w == 1:
        return np.bool_(v & 1)
    if t.signedness.data == Signedness.UNSIGNED:
        return np.dtype(f"u{w // 8}").type(_unsigned(v, t))
    return np.dtype(f"i{w // 8}").type(_signed(v, t))


def _float(v: Any, t: Attribute) -> Any:
    return te.np_dtype(t).type(v)


def _rtype(op: Operation) -> Attribute:
    return op.results[0].type


def _int_binary(fn: Callable[[int, int], int], signed: bool = True) -> Callable[[Operation, list[Any]], Any]:
    def run(op: Operation, v: list[Any]) -> Any:
        t = _rtype(op)
        conv = _signed if signed else _unsigned
        return make_int(fn(conv(v[0], t), conv(v[1], t)), t)

    return run


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _ceildiv(a: int, b: int) -> int:
    return -((-a) // b)


def _float_binary(fn: Callable[[Any, Any], Any]) -> Callable[[Operation, list[Any]], Any]:
    return lambda op, v: _float(fn(v[0], v[1]), _rtype(op))


def _float_unary(fn: Callable[[Any], Any]) -> Callable[[Operation, list[Any]], Any]:
    return lambda op, v: _float(fn(v[0]), _rtype(op))


def _constant(op: Operation, v: list[Any]) -> Any:
    attr = op.properties.get("value")
    if attr is None:
        attr = op.attributes.get("value")
    if isinstance(attr, IntegerAttr):
        return make_int(attr.value.data, _rtype(op))
    if isinstance(attr, FloatAttr):
        return _float(attr.value.data, _rtype(op))
    raise LoopError(f"loop_interp: unsupported constant {attr}")


def _cmpi(op: Operation, v: list[Any]) -> Any:
    pred = _CMPI[op.properties["predicate"].value.data]  # type: ignore[attr-defined]
    t = op.operands[0].type
    conv = _unsigned if pred[0] == "u" else _signed
    a, b = conv(v[0], t), conv(v[1], t)
    key = pred if pred in ("eq", "ne") else pred[1:]
    res = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[key]
    return np.bool_(res)


def _cmpf(op: Operation, v: list[Any]) -> Any:
    pred = _CMPF[op.properties["predicate"].value.data]  # type: ignore[attr-defined]
    a, b = v
    if pred in ("false", "true"):
        return np.bool_(pred == "true")
    unordered = bool(np.isnan(a) or np.isnan(b))
    if pred == "ord":
        return np.bool_(not unordered)
    if pred == "uno":
        return np.bool_(unordered)
    cmp = {"eq": a == b, "ne": a != b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[pred[1:]]
    if pred[0] == "o":
        return np.bool_(not unordered and bool(cmp))
    return np.bool_(unordered or bool(cmp))


def _fp_to_int(signed: bool) -> Callable[[Operation, list[Any]], Any]:
    def run(op: Operation, v: list[Any]) -> Any:
        x = float(v[0])
        return make_int(int(x) if math.isfinite(x) else 0, _rtype(op))  # out of range is UB in LLVM

    del signed
    return run


def _int_to_fp(signed: bool) -> Callable[[Operation, list[Any]], Any]:
    def run(op: Operation, v: list[Any]) -> Any:
        t = op.operands[0].type
        return _float((_signed if signed else _unsigned)(v[0], t), _rtype(op))

    return run


def _int_cast(signed: bool) -> Callable[[Operation, list[Any]], Any]:
    def run(op: Operation, v: list[Any]) -> Any:
        t = op.operands[0].type
        return make_int((_signed if signed else _unsigned)(v[0], t), _rtype(op))

    return run


def _bitcast(op: Operation, v: list[Any]) -> Any:
    return np.array(v[0]).view(te.np_dtype(_rtype(op)))[()]


def _round_half_away(x: Any) -> Any:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _ipowi(op: Operation, v: list[Any]) -> Any:
    t = _rtype(op)
    base, exp = _signed(v[0], t), _signed(v[1], t)
    if exp >= 0:
        return make_int(pow(base, exp, 1 << _width(t)), t)
    if base == 1:
        return make_int(1, t)
    if base == -1:
        return make_int(-1 if exp % 2 else 1, t)
    return make_int(0, t)  # integer reciprocal truncates to 0


SCALAR_OPS: dict[str, Callable[[Operation, list[Any]], Any]] = {
    "arith.constant": _constant,
    "arith.addi": _int_binary(lambda a, b: a + b),
    "arith.subi": _int_binary(lambda a, b: a - b),
    "arith.muli": _int_binary(lambda a, b: a * b),
    "arith.divsi": _int_binary(_tdiv),
    "arith.divui": _int_binary(lambda a, b: a // b, signed=False),
    "arith.remsi": _int_binary(lambda a, b: a - b * _tdiv(a, b)),
    "arith.remui": _int_binary(lambda a, b: a % b, signed=False),
    "arith.floordivsi": _int_binary(lambda a, b: a // b),
    "arith.ceildivsi": _int_binary(_ceildiv),
    "arith.ceildivui": _int_binary(_ceildiv, signed=False),
    "arith.maxsi": _int_binary(max),
    "arith.minsi": _int_binary(min),
    "arith.maxui": _int_binary(max, signed=False),
    "arith.minui": _int_binary(min, signed=False),
    "arith.andi": _int_binary(lambda a, b: a & b, signed=False),
    "arith.ori": _int_binary(lambda a, b: a | b, signed=False),
    "arith.xori": _int_binary(lambda a, b: a ^ b, signed=False),
    "arith.shli": _int_binary(lambda a, b: a << b, signed=False),
    "arith.shrui": _int_binary(lambda a, b: a >> b, signed=False),
    "arith.shrsi": lambda op, v: make_int(_signed(v[0], _rtype(op)) >> _unsigned(v[1], _rtype(op)), _rtype(op)),
    "arith.cmpi": _cmpi,
    "arith.cmpf": _cmpf,
    "arith.select": lambda op, v: v[1] if v[0] else v[2],
    "arith.addf": _float_binary(lambda a, b: a + b),
    "arith.subf": _float_binary(lambda a, b: a - b),
    "arith.mulf": _float_binary(lambda a, b: a * b),
    "arith.divf": _float_binary(lambda a, b: a / b),
    "arith.remf": _float_binary(np.fmod),
    "arith.negf": _float_unary(lambda a: -a),
    "arith.maximumf": _float_binary(nb.maximum),  # -0 < +0, as arith.maximumf is defined
    "arith.minimumf": _float_binary(nb.minimum),
    "arith.maxnumf": _float_binary(np.fmax),
    "arith.minnumf": _float_binary(np.fmin),
    "arith.extf": _float_unary(lambda a: a),
    "arith.truncf": _float_unary(lambda a: a),
    "arith.sitofp": _int_to_fp(True),
    "arith.uitofp": _int_to_fp(False),
    "arith.fptosi": _fp_to_int(True),
    "arith.fptoui": _fp_to_int(False),
    "arith.extsi": _int_cast(True),
    "arith.extui": _int_cast(False),
    "arith.trunci": _int_cast(True),
    "arith.index_cast": _int_cast(True),
    "arith.index_castui": _int_cast(False),
    "arith.bitcast": _bitcast,
    "math.exp": _float_unary(np.exp),
    "math.exp2": _float_unary(np.exp2),
    "math.expm1": _float_unary(np.expm1),
    "math.log": _float_unary(np.log),
    "math.log2": _float_unary(np.log2),
    "math.log10": _float_unary(np.log10),
    "math.log1p": _float_unary(np.log1p),
    "math.sqrt": _float_unary(np.sqrt),
    "math.rsqrt": _float_unary(lambda a: 1 / np.sqrt(a)),
    "math.cbrt": _float_unary(np.cbrt),
    "math.sin": _float_unary(np.sin),
    "math.cos": _float_unary(np.cos),
    "math.tan": _float_unary(np.tan),
    "math.asin": _float_unary(np.arcsin),
    "math.acos": _float_unary(np.arccos),
    "math.atan": _float_unary(np.arctan),
    "math.sinh": _float_unary(np.sinh),
    "math.cosh": _float_unary(np.cosh),
    "math.tanh": _float_unary(np.tanh),
    "math.asinh": _float_unary(np.arcsinh),
    "math.acosh": _float_unary(np.arccosh),
    "math.atanh": _float_unary(np.arctanh),
    "math.erf": _float_unary(lambda a: math.erf(float(a))),
    "math.absf": _float_unary(np.abs),
    "math.floor": _float_unary(np.floor),
    "math.ceil": _float_unary(np.ceil),
    "math.trunc": _float_unary(np.trunc),
    "math.roundeven": _float_unary(np.rint),
    "math.round": _float_unary(_round_half_away),
    "math.powf": _float_binary(np.power),
    "math.atan2": _float_binary(np.arctan2),
    "math.copysign": _float_binary(np.copysign),
    "math.fpowi": lambda op, v: _float(np.power(v[0], _signed(v[1], op.operands[1].type)), _rtype(op)),
    "math.fma": lambda op, v: _float(v[0] * v[1] + v[2], _rtype(op)),
    "mathx.ldexp": lambda op, v: _float(np.ldexp(v[0], _signed(v[1], op.operands[1].type)), _rtype(op)),
    "math.absi": lambda op, v: make_int(abs(_signed(v[0], _rtype(op))), _rtype(op)),
    "math.ipowi": _ipowi,
}


# --------------------------------------------------------------------------
# The interpreter
# --------------------------------------------------------------------------


def buffer_dtype(t: Attribute) -> np.dtype:
    assert isinstance(t, MemRefType), t
    return te.np_dtype(t.element_type)


def _ints(env: Env, values: Sequence[SSAValue]) -> tuple[int, ...]:
    return tuple(int(env[v]) for v in values)


def main_function(module: ModuleOp) -> func.FuncOp:
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == "fuse_main":
            return op
    raise LoopError("loop_interp: the module has no func.func @fuse_main")


LOOP = OpTable("loop interpreter")
"""The loop level's structural ops (methods of :class:`LoopInterpreter`); scalar arith/math ops: ``SCALAR_OPS``."""


class LoopInterpreter:
    """Runs one loop-level module; :meth:`run` may be called several times."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.main = main_function(module)
        self.abi = LoopAbi.read(module)
        self.errors = [(e.message, e.loc) for e in self.abi.errors]
        self.host_calls = self.abi.host_calls
        self.arg_types: dict[int, MemRefType] = {}
        for op in self.main.walk():
            if isinstance(op, loop.ArgOp):
                self.arg_types[op.slot.value.data] = op.result.type
        self.args: Sequence[np.ndarray] = ()
        self.results: list[np.ndarray | None] = []

    def run(self, args: Sequence[np.ndarray]) -> list[np.ndarray | None]:
        """Run with the argument buffers by slot; returns the result buffers by slot."""
        self.args = args
        self.results = [None] * len(self.abi.results or ())
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            self.block(self.main.body.block, {})
        return self.results

    def block(self, block: Block, env: Env) -> list[Any]:
        """Run a block; returns the values of its ``loop.yield`` (empty at ``func.return``)."""
        for op in block.ops:
            if isinstance(op, loop.YieldOp):
                return [env[v] for v in op.values]
            if isinstance(op, func.ReturnOp):
                return []
            handler = LOOP.get(op)
            if handler is not None:
                out = handler(self, op, env)
            else:
                scalar = SCALAR_OPS.get(op.name)
                if scalar is None:
                    raise LoopError(f"loop_interp: cannot run '{op.name}'")
                out = scalar(op, [env[v] for v in op.operands])
            if isinstance(op, _MULTI_RESULT):
                for r, v in zip(op.results, out, strict=True):
                    env[r] = v
            elif op.results:
                env[op.results[0]] = out
        return []

    # -- loop ops ----------------------------------------------------------------

    @LOOP.impl(loop.ArgOp)
    def arg(self, op: loop.ArgOp, env: Env) -> np.ndarray:
        slot = op.slot.value.data
        arr = self.args[slot]
        want = buffer_dtype(op.result.type)
        shape = op.result.type.get_shape()
        if arr.dtype != want or arr.ndim != len(shape) or not arr.flags.c_contiguous:
            raise LoopError(f"loop_interp: argument {slot} should be a contiguous {want} array of rank {len(shape)}")
        if any(s >= 0 and s != n for s, n in zip(shape, arr.shape)):
            raise LoopError(f"loop_interp: argument {slot} has shape {arr.shape}, not {shape}")
        return arr

    @LOOP.impl(loop.ResultOp)
    def result(self, op: loop.ResultOp, env: Env) -> None:
        self.results[op.slot.value.data] = env[op.buffer]

    @LOOP.impl(loop.AllocOp)
    def alloc(self, op: loop.AllocOp, env: Env) -> np.ndarray:
        dtype = buffer_dtype(op.result.type)
        shape = _ints(env, op.extents)
        if any(n < 0 for n in shape):
            raise LoopError(f"loop_interp: negative extent in loop.alloc {shape}")
        return np.full(shape, np.nan if dtype.kind == "f" else 99, dtype=dtype)

    @LOOP.impl(loop.DimOp)
    def dim(self, op: loop.DimOp, env: Env) -> int:
        return int(env[op.buffer].shape[op.axis.value.data])

    def _pos(self, buf: np.ndarray, env: Env, positions: Sequence[SSAValue], what: str) -> tuple[int, ...]:
        pos = _ints(env, positions)
        if len(pos) != buf.ndim or any(not 0 <= p < n for p, n in zip(pos, buf.shape)):
            raise LoopError(f"loop_interp: {what} at {pos} outside a buffer of shape {buf.shape}")
        return pos

    @LOOP.impl(loop.LoadOp)
    def load(self, op: loop.LoadOp, env: Env) -> Any:
        buf = env[op.buffer]
        return buf[self._pos(buf, env, op.positions, "loop.load")]

    @LOOP.impl(loop.StoreOp)
    def store(self, op: loop.StoreOp, env: Env) -> None:
        buf = env[op.buffer]
        value = env[op.value]
        if isinstance(value, np.generic) and value.dtype != buf.dtype:
            value = value.astype(buf.dtype)  # a signless scalar into an unsigned buffer: same bits
        buf[self._pos(buf, env, op.positions, "loop.store")] = value

    @LOOP.impl(loop.ForOp)
    def for_(self, op: loop.ForOp, env: Env) -> list[Any]:
        lo, hi, step = _ints(env, [op.lower, op.upper, op.step])
        if step <= 0:
            raise LoopError(f"loop_interp: loop.for step {step} must be positive")
        carried = [env[v] for v in op.inits]
        body = op.body.block
        iv, rest = body.args[0], body.args[1:]
        for i in range(lo, hi, step):
            env[iv] = i
            for a, c in zip(rest, carried):
                env[a] = c
            carried = self.block(body, env)
        return carried

    @LOOP.impl(loop.WhileOp)
    def while_(self, op: loop.WhileOp, env: Env) -> list[Any]:
        carried = [env[v] for v in op.inits]
        body = op.body.block
        while True:
            for a, c in zip(body.args, carried):
                env[a] = c
            cond, *carried = self.block(body, env)
            if not bool(cond):
                return carried

    @LOOP.impl(loop.CheckOp)
    def check(self, op: loop.CheckOp, env: Env) -> None:
        if bool(env[op.cond]):
            return
        code = op.code.value.data
        message, loc = self.errors[code - 1]
        a, b = int(env[op.a]), int(env[op.b])
        raise FuseRuntimeError(format_details(message, a, b), Loc.decode(loc) if loc else None)

    @LOOP.impl(loop.GemmOp)
    def gemm(self, op: loop.GemmOp, env: Env) -> None:
        ta, tb = bool(op.trans_a.value.data), bool(op.trans_b.value.data)
        batch, m, n, k = _ints(env, [op.batch, op.m, op.n, op.k])
        strides = _ints(env, list(op.strides)) or op.contiguous_strides(m, n, k, operator.mul, 0)
        gemm(env[op.a], env[op.bm], env[op.c], batch, op.shapes(m, n, k), ta, tb, strides)

    @LOOP.impl(loop.HostCallOp)
    def host_call(self, op: loop.HostCallOp, env: Env) -> list[np.ndarray]:
        cid = op.attributes["id"].value.data  # type: ignore[attr-defined]
        ins = [env[v] for v in op.inputs]
        return run_host_call(self.host_calls[cid], ins, [r.type for r in op.outputs], source_loc(op))


def gemm(
    a: np.ndarray,
    bm: np.ndarray,
    c: np.ndarray,
    batch: int,
    shapes: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
    ta: bool,
    tb: bool,
    strides: Sequence[int],
) -> None:
    """``loop.gemm``: ``c[b] = op(a[b]) @ op(bm[b])``; like a BLAS call with beta = 0 that is skipped when a size is 0.

    ``shapes``: (rows, columns) of each operand's matrices as stored (:meth:`GemmOp.shapes`); ``strides``: the
    batch and row stride of a, bm and c (the op's, else :meth:`GemmOp.contiguous_strides`). When k == 0 nothing
    is written (the lowering must zero-fill C itself); every matrix must lie inside its buffer.
    """
    (rows_a, cols_a), _, (m, n) = shapes
    if batch * m * n == 0 or rows_a * cols_a == 0:  # nothing to write, or k == 0
        return
    views = []
    for buf, (rows, cols), (step, row), name in zip(
        (a, bm, c), shapes, zip(strides[0::2], strides[1::2], strict=True), ("a", "bm", "c"), strict=True
    ):
        flat = buf.reshape(-1)
        span = (batch - 1) * step + (rows - 1) * row + cols
        if min(step, row) < 0 or row < cols or span > flat.size:
            raise LoopError(
                f"loop_interp: loop.gemm operand {name} (size {flat.size}) does not hold batch={batch} "
                f"{rows}×{cols} matrices at batch stride {step}, row stride {row}"
            )
        item = flat.itemsize
        views.append(np.lib.stride_tricks.as_strided(flat, (batch, rows, cols), (step * item, row * item, item)))
    am, bmat, cv = views
    if ta:
        am = am.transpose(0, 2, 1)
    if tb:
        bmat = bmat.transpose(0, 2, 1)
    cv[...] = np.matmul(am, bmat)


def host_call_error(fn: str, err: BaseException, loc: Loc | None) -> FuseRuntimeError:
    """The located run-time error of host call ``fn`` that raised ``err`` (a builtin's ValueError: tucker_dense
    of a NaN), worded the same on every native backend."""
    msg = str(err)
    return FuseRuntimeError(msg if msg.startswith(fn) else f"{fn}: {msg}", loc)


def run_host_call(
    entry: HostCallEntry, ins: Sequence[np.ndarray], output_types: Sequence[Attribute], loc: Loc | None = None
) -> list[np.ndarray]:
    """Run one entry of a module's ``fuse.host_calls`` table on NumPy: the builtins the loop level cannot express.
    A builtin's ValueError becomes :func:`host_call_error` at ``loc`` (the call's location)."""
    fn = entry.fn
    params = entry.param_values()
    try:
        if fn == "topk":
            outs: Sequence[np.ndarray] = nb.topk(ins[0], int(params["k"]), axis=int(params.get("axis", -1)))
        elif fn == "tucker_dense":
            outs = [nb.tucker_dense(ins[0], rank=params.get("rank"), threshold=params.get("threshold", 0.5))]
        elif fn == "concat":
            outs = [nb.concat(ins, int(params["axis"]))]
        else:
            raise LoopError(f"loop_interp: unknown host call {fn!r}")
    except ValueError as e:
        raise host_call_error(fn, e, loc) from e
    return [np.asarray(o, dtype=buffer_dtype(t), order="C") for o, t in zip(outs, output_types, strict=True)]


_MULTI_RESULT = (loop.ForOp, loop.WhileOp, loop.HostCallOp)


def slot_arguments(
    module: ModuleOp, arg_types: dict[int, MemRefType], inputs: dict[str, np.ndarray], sources: dict[str, np.ndarray]
) -> list[np.ndarray]:
    """The argument buffers by slot: inputs and sources converted to each slot's dtype and made contiguous."""
    args = []
    for slot, entry in enumerate(LoopAbi.read(module).args or ()):
        if entry.kind == "constant":
            args.append(np.asarray(entry.value(), order="C"))
            continue
        arr = (inputs if entry.kind == "input" else sources)[entry.name]
        args.append(np.asarray(arr, dtype=buffer_dtype(arg_types[slot]), order="C"))
    return args


def slot_results(module: ModuleOp, results: Sequence[np.ndarray | None]) -> RunResult:
    """Exports and sink writes by name from the result buffers by slot (a sink's several values form a dict)."""
    out = RunResult({})
    groups: dict[int, tuple[str, str, list[tuple[str, np.ndarray]]]] = {}
    for entry, value in zip(LoopAbi.read(module).results or (), results):
        assert value is not None, "a result slot was never written"
        if entry.kind == "export":
            out.exports[entry.name] = np.array(value)
        else:
            groups.setdefault(entry.sink, (entry.name, entry.loc, []))[2].append((entry.value_name, np.array(value)))
    for path, loc, values in groups.values():
        sink_value: Any = values[0][1] if len(values) == 1 else dict(values)
        out.sinks.append((path, sink_value, Loc.decode(loc) if loc else None))
    return out


def run_loop_module(
    module: ModuleOp, inputs: dict[str, np.ndarray], sources: dict[str, np.ndarray] | None = None
) -> RunResult:
    """Run a loop-level module as the runtime would: arguments by name, exports and sink writes by name.

    Inputs are converted to each slot's dtype and made contiguous (the
    runtime's validation); sink values of one ``te.sink`` (same sink number)
    form a dict when there are several, as in the reference interpreter.
    """
    interp = LoopInterpreter(module)
    return slot_results(module, interp.run(slot_arguments(module, interp.arg_types, inputs, sources or {})))
