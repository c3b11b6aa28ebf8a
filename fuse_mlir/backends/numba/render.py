"""Render a loop-level module (docs/native-abi.md) as the Python source of one ``numba.njit`` function.

Each SSA value becomes a local variable, each ``loop.for`` a Python ``for``
over ``range`` (``numba.prange`` for an outermost parallel loop without
carried values), loads and stores become array indexing, scalar ops become
expressions cast back to their IR type (so ``i32`` wraps and ``f32`` stays
``f32``), ``loop.gemm`` calls SciPy's BLAS (:mod:`fuse_mlir.backends.numba.kernels`)
and ``loop.host_call`` leaves nopython mode (``numba.objmode``) for the same
NumPy code the loop interpreter runs. The semantics are those of
:mod:`fuse_mlir.interp.loop_interp`.

A failed ``loop.check`` records ``(code, a, b)`` in the ``err`` argument; a
check outside every loop returns at once, one inside a loop skips the rest
of that iteration (so no guarded load runs) and the function returns after
the loop nest. The caller raises the error from the module's error table.
"""

from __future__ import annotations

from collections.abc import Callable
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
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.abi import LoopAbi
from fuse_mlir.interp.loop_interp import buffer_dtype, main_function
from fuse_mlir.mathlib.ops import is_scalar_op

_CMPI = arith.CMPI_COMPARISON_OPERATIONS
_CMPF = arith.CMPF_COMPARISON_OPERATIONS

_CMPF_EXPR = {
    "false": "False",
    "true": "True",
    "oeq": "({0} == {1})",
    "ogt": "({0} > {1})",
    "oge": "({0} >= {1})",
    "olt": "({0} < {1})",
    "ole": "({0} <= {1})",
    "one": "(({0} != {1}) and ({0} == {0}) and ({1} == {1}))",
    "ord": "(({0} == {0}) and ({1} == {1}))",
    "ueq": "(({0} == {1}) or ({0} != {0}) or ({1} != {1}))",
    "ugt": "(not ({0} <= {1}))",
    "uge": "(not ({0} < {1}))",
    "ult": "(not ({0} >= {1}))",
    "ule": "(not ({0} > {1}))",
    "une": "({0} != {1})",
    "uno": "(({0} != {0}) or ({1} != {1}))",
}

# Scalar ops whose value is an expression of the operands, cast to the result's type.
_EXPR: dict[str, str] = {
    "arith.addi": "{0} + {1}",
    "arith.subi": "{0} - {1}",
    "arith.muli": "{0} * {1}",
    "arith.divsi": "_k.divsi({0}, {1})",
    "arith.remsi": "_k.remsi({0}, {1})",
    "arith.floordivsi": "{0} // {1}",
    "arith.ceildivsi": "-((-{0}) // {1})",
    "arith.divui": "{u0} // {u1}",
    "arith.remui": "{u0} % {u1}",
    "arith.ceildivui": "({u0} + {u1} - 1) // {u1}",
    "arith.maxsi": "max({0}, {1})",
    "arith.minsi": "min({0}, {1})",
    "arith.maxui": "max({u0}, {u1})",
    "arith.minui": "min({u0}, {u1})",
    "arith.andi": "{0} & {1}",
    "arith.ori": "{0} | {1}",
    "arith.xori": "{0} ^ {1}",
    "arith.shli": "{0} << {1}",
    "arith.shrsi": "{0} >> {1}",
    "arith.shrui": "{u0} >> {u1}",
    "arith.select": "({1} if {0} else {2})",
    "arith.addf": "{0} + {1}",
    "arith.subf": "{0} - {1}",
    "arith.mulf": "{0} * {1}",
    "arith.divf": "{0} / {1}",
    "arith.remf": "np.fmod({0}, {1})",
    "arith.negf": "-{0}",
    "arith.maximumf": "_k.maximumf({0}, {1})",
    "arith.minimumf": "_k.minimumf({0}, {1})",
    "arith.maxnumf": "np.fmax({0}, {1})",
    "arith.minnumf": "np.fmin({0}, {1})",
    "arith.extf": "{0}",
    "arith.truncf": "{0}",
    "arith.sitofp": "{0}",
    "arith.uitofp": "{u0}",
    "arith.fptosi": "_k.fptoi({0})",
    "arith.fptoui": "_k.fptoi({0})",
    "arith.extsi": "{0}",
    "arith.extui": "{u0}",
    "arith.trunci": "{0}",
    "arith.index_cast": "{0}",
    "arith.index_castui": "{u0}",
    "math.exp": "np.exp({0})",
    "math.exp2": "np.exp2({0})",
    "math.expm1": "np.expm1({0})",
    "math.log": "np.log({0})",
    "math.log2": "np.log2({0})",
    "math.log10": "np.log10({0})",
    "math.log1p": "np.log1p({0})",
    "math.sqrt": "np.sqrt({0})",
    "math.rsqrt": "1 / np.sqrt({0})",
    "math.cbrt": "np.cbrt({0})",
    "math.sin": "np.sin({0})",
    "math.cos": "np.cos({0})",
    "math.tan": "np.tan({0})",
    "math.asin": "np.arcsin({0})",
    "math.acos": "np.arccos({0})",
    "math.atan": "np.arctan({0})",
    "math.sinh": "np.sinh({0})",
    "math.cosh": "np.cosh({0})",
    "math.tanh": "np.tanh({0})",
    "math.asinh": "np.arcsinh({0})",
    "math.acosh": "np.arccosh({0})",
    "math.atanh": "np.arctanh({0})",
    "math.erf": "math.erf({0})",
    "math.absf": "np.abs({0})",
    "math.floor": "np.floor({0})",
    "math.ceil": "np.ceil({0})",
    "math.trunc": "np.trunc({0})",
    "math.roundeven": "np.rint({0})",
    "math.round": "_k.round_half_away({0})",
    "math.powf": "np.power({0}, {1})",
    "math.atan2": "np.arctan2({0}, {1})",
    "math.copysign": "np.copysign({0}, {1})",
    "math.fpowi": "np.power({0}, {t0}({1}))",
    "math.fma": "{0} * {1} + {2}",
    "mathx.ldexp": "np.ldexp({0}, {1})",
    "math.absi": "abs({0})",
    "math.ipowi": "_k.ipowi({0}, {1})",
}


# Ops whose numba result type may differ from their operands' even when those all have the result's type.
_RETYPING = {"math.rsqrt", "math.erf", "math.fpowi", "arith.divsi", "arith.remsi", "arith.ceildivsi"}


def _keeps_type(op: Operation, template: str) -> bool:
    """Whether numba's type for the rendered expression is already the IR result type, so no cast is needed.

    Casts are calls that numba must type one by one, which dominates its compile time, so they are left out
    where the operands already have the result's type and that type does not promote in numba (64-bit
    integers, floats, booleans).
    """
    t = op.results[0].type
    wide = isinstance(t, IndexType) or (isinstance(t, IntegerType) and t.width.data in (1, 64))
    if not (wide or te.np_dtype(t).kind == "f") or "{u" in template or op.name in _RETYPING:
        return False
    operands = op.operands[1:] if op.name == "arith.select" else op.operands
    return all(o.type == t for o in operands)


def scalar_type(t: Attribute) -> str:
    """The NumPy scalar constructor of an IR scalar type (``index`` is int64, ``i1`` is bool)."""
    if isinstance(t, IndexType):
        return "np.int64"
    if isinstance(t, IntegerType) and t.width.data == 1:
        return "np.bool_"
    return f"np.{te.np_dtype(t).name}"


def _unsigned_type(t: Attribute) -> str:
    if not isinstance(t, IndexType | IntegerType):
        return scalar_type(t)
    width = 64 if isinstance(t, IndexType) else t.width.data
    return "np.bool_" if width == 1 else f"np.uint{width}"


def numba_array_type(t: MemRefType) -> str:
    """A numba type string for a C-contiguous buffer of ``t`` (for ``objmode`` outputs)."""
    rank = len(t.get_shape())
    dtype = buffer_dtype(t).name
    if rank == 0:
        return f"{dtype}[::1]"  # never used: host calls return arrays of rank >= 1
    return f"{dtype}[{', '.join([':'] * (rank - 1) + ['::1'])}]"


class Renderer:
    """Builds the source of ``fuse_main(a0, a1, ..., err)`` and the constants it refers to."""

    def __init__(self, module: ModuleOp, parallel: bool):
        self.module = module
        self.parallel = parallel
        self.main = main_function(module)
        self.names: dict[SSAValue, str] = {}
        self.constants: dict[str, Any] = {}
        self.lines: list[str] = []
        self.slots = len(LoopAbi.read(module).args or ())
        self.result_slots: dict[int, MemRefType] = {}
        for op in self.main.walk():
            if isinstance(op, loop.ResultOp):
                self.result_slots[op.slot.value.data] = op.buffer.type  # type: ignore[assignment]
        self.host_calls: dict[int, Any] = {}
        self.collapses = 0  # perfect nests collapsed into one loop so far (names their counters)

    def name(self, v: SSAValue) -> str:
        n = self.names.get(v)
        if n is None:
            n = self.names[v] = f"v{len(self.names)}"
        return n

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def results_tuple(self) -> str:
        names = [f"r{k}" for k in sorted(self.result_slots)]
        return "(" + "".join(f"{n}, " for n in names) + ")"

    def render(self) -> str:
        args = [f"a{k}" for k in range(self.slots)]
        self.emit(0, f"def fuse_main({', '.join([*args, 'err'])}):")
        for k, t in sorted(self.result_slots.items()):
            rank = len(t.get_shape())
            self.emit(1, f"r{k} = np.empty(({'0, ' * max(rank, 1)}), np.{buffer_dtype(t).name})")
        self.block(self.main.body.block, 1, loops=0, in_prange=False)
        return "\n".join(self.lines) + "\n"

    def block(self, block: Block, depth: int, loops: int, in_prange: bool) -> list[SSAValue]:
        """Render a block's ops; returns the values its ``loop.yield`` yields."""
        for op in block.ops:
            if isinstance(op, loop.YieldOp):
                return list(op.values)
            if isinstance(op, func.ReturnOp):
                self.emit(depth, f"return {self.results_tuple()}")
                return []
            self.op(op, depth, loops, in_prange)
        return []

    def op(self, op: Operation, depth: int, loops: int, in_prange: bool) -> None:
        handler = _LOOP_RENDER.get(type(op))
        if handler is not None:
            handler(self, op, depth, loops, in_prange)
            return
        if op.name == "arith.constant":
            self.constant(op, depth)
            return
        if len(op.results) != 1 or not is_scalar_op(op):
            raise FuseError(f"the numba backend cannot render '{op.name}'")
        result = op.results[0]
        vals = [self.name(v) for v in op.operands]
        if op.name == "arith.cmpi":
            pred = _CMPI[op.properties["predicate"].value.data]  # type: ignore[attr-defined]
            a, b = vals
            if pred[0] == "u":
                u = _unsigned_type(op.operands[0].type)
                a, b = f"{u}({a})", f"{u}({b})"
            sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[pred.lstrip("su") or pred]
            self.emit(depth, f"{self.name(result)} = ({a} {sym} {b})")
            return
        if op.name == "arith.cmpf":
            pred = _CMPF[op.properties["predicate"].value.data]  # type: ignore[attr-defined]
            self.emit(depth, f"{self.name(result)} = {_CMPF_EXPR[pred].format(*vals)}")
            return
        if op.name == "arith.bitcast":
            dt = te.np_dtype(result.type).name
            src = te.np_dtype(op.operands[0].type).name
            self.emit(depth, f"{self.name(result)} = np.array([{vals[0]}], np.{src}).view(np.{dt})[0]")
            return
        template = _EXPR.get(op.name)
        if template is None:
            raise FuseError(f"the numba backend cannot render '{op.name}'")
        fields = {f"u{k}": f"{_unsigned_type(v.type)}({vals[k]})" for k, v in enumerate(op.operands)}
        fields.update({f"t{k}": scalar_type(v.type) for k, v in enumerate(op.operands)})
        expr = template.format(*vals, **fields)
        if _keeps_type(op, template):
            self.emit(depth, f"{self.name(result)} = {expr}")
        else:
            self.emit(depth, f"{self.name(result)} = {scalar_type(result.type)}({expr})")

    def constant(self, op: Operation, depth: int) -> None:
        attr = op.properties.get("value")
        if attr is None:
            attr = op.attributes.get("value")
        t = op.results[0].type
        if isinstance(attr, IntegerAttr):
            value: Any = int(attr.value.data)
            if isinstance(t, IntegerType) and t.width.data == 1:
                value = bool(value & 1)
        elif isinstance(attr, FloatAttr):
            value = float(attr.value.data)
        else:
            raise FuseError(f"the numba backend cannot render the constant {attr}")
        key = f"_c{len(self.constants)}"
        self.constants[key] = getattr(np, scalar_type(t).removeprefix("np."))(value)
        self.emit(depth, f"{self.name(op.results[0])} = {key}")

    # -- loop ops --------------------------------------------------------------------

    def arg(self, op: loop.ArgOp, depth: int, loops: int, in_prange: bool) -> None:
        self.emit(depth, f"{self.name(op.result)} = a{op.slot.value.data}")

    def result(self, op: loop.ResultOp, depth: int, loops: int, in_prange: bool) -> None:
        self.emit(depth, f"r{op.slot.value.data} = {self.name(op.buffer)}")

    def alloc(self, op: loop.AllocOp, depth: int, loops: int, in_prange: bool) -> None:
        extents = "".join(f"{self.name(e)}, " for e in op.extents) or "1, "  # rank 0 as one element (see _index)
        self.emit(depth, f"{self.name(op.result)} = np.empty(({extents}), np.{buffer_dtype(op.result.type).name})")

    def dim(self, op: loop.DimOp, depth: int, loops: int, in_prange: bool) -> None:
        self.emit(depth, f"{self.name(op.result)} = {self.name(op.buffer)}.shape[{op.axis.value.data}]")

    def _index(self, positions: Any) -> str:
        # Rank-0 buffers are one-element vectors: numba's parallel lowering turns 0-d arrays into scalars.
        return ", ".join(self.name(p) for p in positions) if len(positions) else "0"

    def load(self, op: loop.LoadOp, depth: int, loops: int, in_prange: bool) -> None:
        self.emit(depth, f"{self.name(op.result)} = {self.name(op.buffer)}[{self._index(op.positions)}]")

    def store(self, op: loop.StoreOp, depth: int, loops: int, in_prange: bool) -> None:
        self.emit(depth, f"{self.name(op.buffer)}[{self._index(op.positions)}] = {self.name(op.value)}")

    def for_(self, op: loop.ForOp, depth: int, loops: int, in_prange: bool) -> None:
        chain = _perfect_chain(op)
        if loops + len(chain) > MAX_NESTED_LOOPS and len(chain) > 1:
            self.collapsed(chain, depth, loops, in_prange)
            return
        body = op.body.block
        iv, rest = body.args[0], body.args[1:]
        carried = [f"{self.name(r)}" for r in op.results]
        for c, init in zip(carried, op.inits):
            self.emit(depth, f"{c} = {self.name(init)}")
        step_is_one = isinstance(op.step.owner, arith.ConstantOp) and op.step.owner.value.value.data == 1  # type: ignore[union-attr]
        use_prange = self.parallel and op.parallel is not None and not in_prange and not op.inits and step_is_one
        rng = (
            f"prange({self.name(op.lower)}, {self.name(op.upper)})"
            if use_prange
            else (f"range({self.name(op.lower)}, {self.name(op.upper)}, {self.name(op.step)})")
        )
        self.emit(depth, f"for {self.name(iv)} in {rng}:")
        for a, c in zip(rest, carried):
            self.emit(depth + 1, f"{self.name(a)} = {c}")
        yielded = self.block(body, depth + 1, loops + 1, in_prange or use_prange)
        for c, y in zip(carried, yielded):
            self.emit(depth + 1, f"{c} = {self.name(y)}")
        self.emit(depth + 1, "pass")
        if loops == 0:
            self.emit(depth, f"if err[0] != 0: return {self.results_tuple()}")

    def collapsed(self, chain: list[loop.ForOp], depth: int, loops: int, in_prange: bool) -> None:
        """A perfect nest rendered as one Python loop over the product of its trip counts.

        Python refuses more than 20 statically nested loops in one function,
        and an equation may have more indices than that. Each loop's index is
        decoded from the flat counter (the last loop varies fastest, as in
        the nest); the carried values run through the single loop unchanged.
        """
        outer = chain[0]
        self.collapses += 1
        tag = self.collapses
        carried = [self.name(r) for r in outer.results]
        for c, init in zip(carried, outer.inits):
            self.emit(depth, f"{c} = {self.name(init)}")
        trips: list[str] = []
        for f in chain:
            lo, hi, st = self.name(f.lower), self.name(f.upper), self.name(f.step)
            n = f"_n{tag}_{len(trips)}"
            self.emit(depth, f"{n} = max(0, ({hi} - {lo} + {st} - 1) // {st})")
            trips.append(n)
        flat = f"_f{tag}"
        self.emit(depth, f"for {flat} in range({' * '.join(trips)}):")
        rest = f"_r{tag}"
        self.emit(depth + 1, f"{rest} = {flat}")
        for f, n in reversed(list(zip(chain, trips))):
            iv = f.body.block.args[0]
            self.emit(depth + 1, f"{self.name(iv)} = {self.name(f.lower)} + ({rest} % {n}) * {self.name(f.step)}")
            self.emit(depth + 1, f"{rest} = {rest} // {n}")
        for f in chain:
            for a, c in zip(f.body.block.args[1:], carried):
                self.emit(depth + 1, f"{self.name(a)} = {c}")
        yielded = self.block(chain[-1].body.block, depth + 1, loops + 1, in_prange)
        for c, y in zip(carried, yielded):
            self.emit(depth + 1, f"{c} = {self.name(y)}")
        self.emit(depth + 1, "pass")
        if loops == 0:
            self.emit(depth, f"if err[0] != 0: return {self.results_tuple()}")

    def check(self, op: loop.CheckOp, depth: int, loops: int, in_prange: bool) -> None:
        self.emit(depth, f"if not {self.name(op.cond)}:")
        self.emit(depth + 1, "if err[0] == 0:")
        code, a, b = op.code.value.data, self.name(op.a), self.name(op.b)
        self.emit(depth + 2, f"err[0] = {code}; err[1] = {a}; err[2] = {b}")
        self.emit(depth + 1, "continue" if loops else f"return {self.results_tuple()}")

    def gemm(self, op: loop.GemmOp, depth: int, loops: int, in_prange: bool) -> None:
        trans_a, trans_b = bool(op.trans_a.value.data), bool(op.trans_b.value.data)
        sizes = ", ".join(self.name(v) for v in (op.batch, op.m, op.n, op.k))
        m, n, k = (self.name(v) for v in (op.m, op.n, op.k))
        strides = [self.name(v) for v in op.strides] or op.contiguous_strides(m, n, k, lambda x, y: f"{x} * {y}", "0")
        # SciPy's BLAS called from nopython code (numba's own np.dot, or an objmode block, takes seconds to compile).
        bufs = ", ".join(f"{self.name(v)}.reshape(-1)" for v in (op.a, op.bm, op.c))
        kernel = "dgemm" if buffer_dtype(op.c.type) == np.float64 else "sgemm"
        self.emit(depth, f"_k.{kernel}({bufs}, {sizes}, {trans_a}, {trans_b}, {', '.join(strides)})")

    def host_call(self, op: loop.HostCallOp, depth: int, loops: int, in_prange: bool) -> None:
        cid = op.attributes["id"].value.data  # type: ignore[attr-defined]
        outs = [self.name(r) for r in op.outputs]
        # objmode types the outputs that leave the block, and numba rejects a typed one that is never read after
        # it ("Invalid type annotation on non-outgoing variables"): a dead result (an unused concat, kept for its
        # checks) stays an untyped local of the object-mode block.
        types = ", ".join(f"{o}='{numba_array_type(r.type)}'" for o, r in zip(outs, op.outputs) if r.uses)
        ins = "".join(f"{self.name(v)}, " for v in op.inputs)
        self.emit(depth, f"with objmode({types}):")
        self.emit(depth + 1, f"{''.join(o + ', ' for o in outs)}= _host({cid}, ({ins}))")


MAX_NESTED_LOOPS = 16
"""Loops the renderer nests as Python ``for`` statements (Python allows 20 nested blocks); deeper perfect nests
are collapsed into one loop."""


def _perfect_chain(op: loop.ForOp) -> list[loop.ForOp]:
    """``op`` and the loops perfectly nested in it: each body is one loop carrying the outer's values, and a yield
    of its results; inner bounds come from outside the chain."""
    chain = [op]
    inside: set[SSAValue] = set(op.body.block.args)
    while True:
        block = chain[-1].body.block
        ops = list(block.ops)
        if len(ops) != 2 or not isinstance(ops[0], loop.ForOp) or not isinstance(ops[1], loop.YieldOp):
            return chain
        inner, yield_ = ops[0], ops[1]
        if list(inner.inits) != list(block.args[1:]) or list(yield_.values) != list(inner.results):
            return chain
        if any(v in inside for v in (inner.lower, inner.upper, inner.step)):
            return chain
        chain.append(inner)
        inside |= set(inner.body.block.args)


_LOOP_RENDER: dict[type[Operation], Callable[[Renderer, Any, int, int, bool], None]] = {
    loop.ArgOp: Renderer.arg,
    loop.ResultOp: Renderer.result,
    loop.AllocOp: Renderer.alloc,
    loop.DimOp: Renderer.dim,
    loop.LoadOp: Renderer.load,
    loop.StoreOp: Renderer.store,
    loop.ForOp: Renderer.for_,
    loop.CheckOp: Renderer.check,
    loop.GemmOp: Renderer.gemm,
    loop.HostCallOp: Renderer.host_call,
}


def render_module(module: ModuleOp, parallel: bool = True) -> tuple[str, dict[str, Any]]:
    """The Python source of ``fuse_main`` and the constants it names (``_c0``, ...)."""
    r = Renderer(module, parallel)
    return r.render(), r.constants
