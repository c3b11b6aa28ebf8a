"""Lower tensor_eq to elemwise: named-index ops become positional kernels with scalar bodies.

Each ``te`` compute op becomes one or more ``ew.generic`` kernels whose
iteration space is the op's index names (result indices parallel, projected
ones reduction). Axis builtins decompose into reductions and maps (softmax is
max, exp-shift, sum, divide), attention into two contractions around a
masked softmax, and sum contractions of two float tensors stay whole as
``ew.contract`` for BLAS. Boundary and extent ops (inputs, constants,
``te.dim``, ``te.check_dim``, sinks, exports) are kept. Data-movement
builtins that have no arithmetic to compile (``concat``, numeric-position
writes, ``tucker_dense``, ``topk``) become ``ew.host_call``s run by the
runtime on NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.dtypes import accumulate_dtype
from fuse_mlir.interp.numpy_builtins import INT_NEGATIVE_POWER
from fuse_mlir.passes.gemm import blas_product, gemm_layout
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.scalar import Body


def _finite_or_zero(b: Body, m: SSAValue, dtype: np.dtype) -> SSAValue:
    """``m`` where finite, else 0: the shift of softmax and logsumexp (as the reference's ``_shifted_exp``).

    Shifting by an infinite max would give inf - inf = NaN at every position;
    shifting by 0 keeps IEEE's answer (NaN where x is +inf, 0 elsewhere).
    """
    finite = b.compare("lt", b.unary_math("abs", m), b.const(np.inf, dtype), dtype)
    return b.select(finite, m, b.const(0.0, dtype))


BodyFn = Callable[[Body, list[SSAValue], list[SSAValue], Callable[[str], SSAValue]], SSAValue]


@dataclass
class In:
    """A mapped generic input: a tensor value with its axes named."""

    value: SSAValue
    names: tuple[str, ...]

    @property
    def dtype(self) -> np.dtype:
        return te.dtype_of(self.value)


def _static(ins: Sequence[In]) -> dict[str, int]:
    """The extents of ``ins``' index names known at compile time."""
    return {n: e for i in ins for n, e in zip(i.names, i.value.type.get_shape()) if e >= 0}  # type: ignore[attr-defined]


class TeToEw:
    """Rewrites one module; see the module docstring."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.ops: list[Operation] = []
        self.vmap: dict[SSAValue, SSAValue] = {}
        self.extents: dict[SSAValue, list[SSAValue]] = {}

    # -- plumbing --------------------------------------------------------------

    def emit(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op

    def v(self, old: SSAValue) -> SSAValue:
        return self.vmap[old]

    def ext(self, value: SSAValue) -> list[SSAValue]:
        """The extents of a (new) tensor value, emitting ``te.dim`` once per axis."""
        if value not in self.extents:
            t = value.type
            assert isinstance(t, TensorType)
            self.extents[value] = [self.emit(te.DimOp(value, k)).results[0] for k in range(t.get_num_dims())]
        return self.extents[value]

    def name_extents(self, ins: Sequence[In], extra: dict[str, SSAValue] | None = None) -> dict[str, SSAValue]:
        out: dict[str, SSAValue] = dict(extra or {})
        for i in ins:
            for n, e in zip(i.names, self.ext(i.value)):
                out.setdefault(n, e)
        return out

    def generic(
        self,
        ins: Sequence[In],
        tables: Sequence[SSAValue],
        parallel: Sequence[str],
        reduction: Sequence[str],
        kind: str,
        extents: dict[str, SSAValue],
        out_dtype: np.dtype,
        body_fn: BodyFn,
        loc: str = "",
    ) -> SSAValue:
        dims = list(parallel) + list(reduction)
        # Scalar constants become immediates in the body (so `x ** 2` can be `x * x`, and nothing is loaded).
        scalars = {k: _scalar_constant(i.value) for k, i in enumerate(ins)}
        mapped = [i for k, i in enumerate(ins) if scalars[k] is None]
        maps = [[dims.index(n) for n in i.names] for i in mapped]
        region, block = ew.GenericOp.make_body([i.value for i in mapped], list(tables))
        body = Body(block)
        nin = len(mapped)

        def idx(name: str) -> SSAValue:
            return body.add(ew.IndexOp(dims.index(name)))

        args: list[SSAValue] = []
        it = iter(block.args[:nin])
        for k, i in enumerate(ins):
            c = scalars[k]
            args.append(next(it) if c is None else body.const(c, i.dtype))
        result = body_fn(body, args, list(block.args[nin:]), idx)
        block.add_op(ew.YieldOp(result))
        shape = [te.DYNAMIC] * len(parallel)
        op = self.emit(
            ew.GenericOp(
                [i.value for i in mapped],
                list(tables),
                [extents[n] for n in dims],
                maps,
                ["parallel"] * len(parallel) + ["reduction"] * len(reduction),
                kind if reduction else "none",
                region,
                te.tensor_type(out_dtype, shape),
                loc,
            )
        )
        res = op.results[0]
        self.extents[res] = [extents[n] for n in parallel]
        return res

    def elementwise(
        self, ins: Sequence[In], out: Sequence[str], out_dtype: np.dtype, fn, extents: dict[str, SSAValue] | None = None
    ) -> SSAValue:
        """A pure map over ``out`` (fn(body, args) → scalar)."""
        ext = self.name_extents(ins, extents)
        return self.generic(ins, [], out, [], "none", ext, out_dtype, lambda b, a, t, i: fn(b, a))

    def reduce(self, x: In, keep: Sequence[str], kind: str, out_dtype: np.dtype, prep=None) -> SSAValue:
        """Reduce ``x`` over its names not in ``keep`` (``prep`` maps each element first)."""
        ext = self.name_extents([x])
        red = [n for n in x.names if n not in keep]

        def body(b: Body, a, t, i):
            v = b.cast(a[0], x.dtype, out_dtype)
            return prep(b, v) if prep else v

        if kind == "mean":
            total = self.generic([x], [], keep, red, "sum", ext, out_dtype, body)
            count = self._count([ext[n] for n in red])
            return self.elementwise(
                [In(total, tuple(keep))],
                keep,
                out_dtype,
                lambda b, a: b.binary("div", a[0], b.index_to(count, out_dtype), out_dtype),
                ext,
            )
        if kind == "any":

            def any_body(b: Body, a, t, i):
                return b.bool_to_i8(b.nonzero(a[0], x.dtype))

            return self.generic([x], [], keep, red, "any", ext, np.dtype(np.int8), any_body)
        return self.generic([x], [], keep, red, kind, ext, out_dtype, body)

    def _count(self, extents: Sequence[SSAValue]) -> SSAValue:
        acc = self.emit(arith.ConstantOp(IntegerAttr(1, IndexType()))).results[0]
        for e in extents:
            acc = self.emit(arith.MuliOp(acc, e)).results[0]
        return acc

    # -- driver --------------------------------------------------------------

    def run(self) -> ModuleOp:
        self.lower_ops(list(self.module.body.block.ops))
        return ModuleOp(self.ops)

    KEEP: ClassVar[tuple[type, ...]] = te.STRUCTURAL_OPS

    def lower_ops(self, ops: Sequence[Operation]) -> None:
        """Lower ops in order, appending the results to ``self.ops``."""
        keep = self.KEEP
        for op in ops:
            if isinstance(op, keep):
                new = op.clone(value_mapper=self.vmap)
                self.emit(new)
                for a, b in zip(op.results, new.results):
                    self.vmap[a] = b
                continue
            handler = getattr(self, "lower_" + type(op).__name__, None)
            if handler is None:
                raise NotImplementedError(f"lower-te-to-ew: no lowering for {op.name}")
            results = handler(op)
            if not isinstance(results, list | tuple):
                results = [results]
            for a, b in zip(op.results, results):
                self.vmap[a] = b

    def lower_FixpointOp(self, op: te.FixpointOp) -> list[SSAValue]:
        """The same ``te.fixpoint`` around the lowered body (extents met inside stay inside)."""
        inits = [self.v(v) for v in op.inits]
        region, block = te.FixpointOp.make_body(inits)
        for old, new in zip(op.body.block.args, block.args):
            self.vmap[old] = new
        saved_ops, saved_ext = self.ops, dict(self.extents)
        self.ops = []
        try:
            body = list(op.body.block.ops)
            self.lower_ops(body[:-1])
            term = body[-1]
            assert isinstance(term, te.YieldOp)
            self.emit(te.YieldOp([self.v(v) for v in term.values]))
            for o in self.ops:
                block.add_op(o)
        finally:
            self.ops, self.extents = saved_ops, saved_ext
        new = te.FixpointOp(
            op.label.data,
            inits,
            te.names_of(op.names),
            region,
            op.max_iters.value.data,
            op.atol.value.data,
            op.rtol.value.data,
            op.checked_list(),
        )
        self.emit(new)
        return list(new.outputs)

    def ins_of(self, operands: Sequence[SSAValue], names: Sequence[Sequence[str]]) -> list[In]:
        return [In(self.v(o), tuple(n)) for o, n in zip(operands, names)]

    # -- te ops --------------------------------------------------------------

    def lower_ContractOp(self, op: te.ContractOp) -> SSAValue:
        ins = self.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        return self.contract(ins, te.names_of(op.indices), op.projection.data, te.dtype_of(op.result))

    def contract(self, ins: Sequence[In], out: Sequence[str], proj: str, dtype: np.dtype) -> SSAValue:
        """Product of ``ins`` joined by name, projected onto ``out`` with ``proj``."""
        out = list(out)
        ext = self.name_extents(ins)
        red = [n for n in ext if n not in out]
        work = accumulate_dtype(dtype) if proj in ("sum", "mean") else dtype
        if work != dtype:  # float16: accumulate in float32, round once (as the reference does)
            res = self.contract(ins, out, proj, work)
            return self.elementwise([In(res, tuple(out))], out, dtype, lambda b, a: b.cast(a[0], work, dtype))
        if proj == "sum" and blas_product([i.names for i in ins], out, [i.dtype for i in ins], dtype, _static(ins)):
            return self.matmul(ins, out, ext, dtype)

        def product(b: Body, a: list[SSAValue]) -> SSAValue:
            vals = [b.cast(x, i.dtype, dtype) for x, i in zip(a, ins)]
            acc = vals[0]
            for x in vals[1:]:
                acc = b.binary("mul", acc, x, dtype)
            return acc

        if not red:
            return self.elementwise(ins, out, dtype, product)
        if proj == "mean":
            total = self.generic(ins, [], out, red, "sum", ext, dtype, lambda b, a, t, i: product(b, a))
            count = self._count([ext[n] for n in red])
            return self.elementwise(
                [In(total, tuple(out))],
                out,
                dtype,
                lambda b, a: b.binary("div", a[0], b.index_to(count, dtype), dtype),
                ext,
            )
        return self.generic(ins, [], out, red, proj, ext, dtype, lambda b, a, t, i: product(b, a))

    def matmul(self, ins: Sequence[In], out: list[str], ext: dict[str, SSAValue], dtype: np.dtype) -> SSAValue:
        """A float matrix product as ``ew.contract`` (BLAS), with operands or result copied first where the layouts
        do not fit one GEMM (:func:`~fuse_mlir.passes.gemm.gemm_layout`)."""
        layout = gemm_layout(ins[0].names, ins[1].names, out, _static(ins))
        ops = list(ins)
        if layout is not None:
            ops = [x if x.names == want else self.permuted(x, want) for x, want in zip(ins, (layout.a, layout.b))]
        c_names = list(layout.c) if layout is not None else out
        dims = c_names + [n for n in ext if n not in out]
        c = self.emit(
            ew.ContractOp(
                ops[0].value,
                ops[1].value,
                [ext[n] for n in dims],
                [[dims.index(n) for n in i.names] for i in ops],
                list(range(len(out))),
                te.tensor_type(dtype, [te.DYNAMIC] * len(out)),
            )
        )
        self.extents[c.results[0]] = [ext[n] for n in c_names]
        if c_names == out:
            return c.results[0]
        return self.permuted(In(c.results[0], tuple(c_names)), tuple(out)).value

    def permuted(self, x: In, names: tuple[str, ...]) -> In:
        """A copy of ``x`` with its axes in the order ``names``."""
        return In(self.elementwise([x], names, x.dtype, lambda b, a: a[0]), names)

    def lower_MapOp(self, op: te.MapOp) -> SSAValue:
        ins = self.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        out = te.names_of(op.indices)
        dtype = te.dtype_of(op.result)
        fn, params = op.fn.data, te.params_of(op.params)
        dts = [i.dtype for i in ins]
        if fn == "pow" and dtype.kind in "iu" and dts[1].kind == "i":
            # NumPy refuses an integer raised to a negative integer power; so does every backend (located).
            loc_attr = op.attributes.get("loc")
            loc = loc_attr.data if isinstance(loc_attr, StringAttr) else ""

            def checked_pow(b: Body, a: list[SSAValue]) -> SSAValue:
                ok = b.add(arith.CmpiOp(a[1], b.const(0, dts[1]), "sge"))
                b.block.add_op(ew.AssertOp(ok, a[1], INT_NEGATIVE_POWER, loc))
                return b.builtin(fn, a, dts, dtype, params)

            return self.elementwise(ins, out, dtype, checked_pow)
        return self.elementwise(ins, out, dtype, lambda b, a: b.builtin(fn, a, dts, dtype, params))

    def lower_BroadcastOp(self, op: te.BroadcastOp) -> SSAValue:
        x = In(self.v(op.input), te.names_of_each(op.operand_indices)[0])
        out = te.names_of(op.indices)
        new = [n for n in out if n not in x.names]
        extra = {n: self.v(e) for n, e in zip(new, op.extents)}
        return self.elementwise([x], out, x.dtype, lambda b, a: a[0], extra)

    def lower_CastOp(self, op: te.CastOp) -> SSAValue:
        names = te.names_of(op.indices)
        x = In(self.v(op.input), names)
        dtype = te.dtype_of(op.result)
        return self.elementwise([x], names, dtype, lambda b, a: b.cast(a[0], x.dtype, dtype))

    def lower_GroupOp(self, op: te.GroupOp) -> SSAValue:
        names = te.names_of(op.indices)
        ins = [In(self.v(v), names) for v in op.inputs]
        dtype = te.dtype_of(op.result)
        if len(ins) == 1 and not op.boolean.value.data and ins[0].dtype == dtype:
            return ins[0].value
        if op.boolean.value.data:

            def orall(b: Body, a):
                acc = b.nonzero(a[0], ins[0].dtype)
                for x, i in zip(a[1:], ins[1:]):
                    acc = b.add(arith.OrIOp(acc, b.nonzero(x, i.dtype)))
                return b.bool_to_i8(acc)

            return self.elementwise(ins, names, np.dtype(np.int8), orall)

        def total(b: Body, a):
            acc = b.cast(a[0], ins[0].dtype, dtype)
            for x, i in zip(a[1:], ins[1:]):
                acc = b.binary("add", acc, b.cast(x, i.dtype, dtype), dtype)
            return acc

        return self.elementwise(ins, names, dtype, total)

    def lower_ReduceOp(self, op: te.ReduceOp) -> SSAValue:
        x = In(self.v(op.input), te.names_of_each(op.operand_indices)[0])
        keep = te.names_of(op.indices)
        dtype = te.dtype_of(op.result)
        kind = op.kind.data
        if kind == "logsumexp":
            return self.logsumexp(x, keep, dtype)
        return self.reduce(x, keep, kind, dtype)

    def logsumexp(self, x: In, keep: Sequence[str], dtype: np.dtype) -> SSAValue:
        """log Σ exp(x - m) + m with m the max (a finite stand-in when m is ±inf, as the reference does)."""
        xf = (
            x
            if x.dtype == dtype
            else In(self.elementwise([x], x.names, dtype, lambda b, a: b.cast(a[0], x.dtype, dtype)), x.names)
        )
        m = self.reduce(xf, keep, "max", dtype)
        ext = self.name_extents([xf])

        def safe(b: Body, mv: SSAValue) -> SSAValue:
            return _finite_or_zero(b, mv, dtype)

        def shifted(b: Body, a, t, i):
            return b.unary_math("exp", b.binary("sub", a[0], safe(b, a[1]), dtype))

        red = [n for n in x.names if n not in keep]
        s = self.generic([xf, In(m, tuple(keep))], [], keep, red, "sum", ext, dtype, shifted)
        return self.elementwise(
            [In(s, tuple(keep)), In(m, tuple(keep))],
            keep,
            dtype,
            lambda b, a: b.binary("add", b.unary_math("log", a[0]), safe(b, a[1]), dtype),
            ext,
        )

    def softmax(self, x: In, axis: str, dtype: np.dtype) -> SSAValue:
        """Three kernels over x, no full-size temporary: row max, Σ exp(x - max), exp(x - max) / Σ.

        The max is replaced by 0 where it is not finite (:func:`_finite_or_zero`), as the reference does.

        The exponential is recomputed in the last kernel rather than stored:
        with a vectorised exp that is cheaper than writing and re-reading a
        temporary the size of the input.
        """
        keep = tuple(n for n in x.names if n != axis)
        m = self.reduce(x, keep, "max", dtype)
        ext = self.name_extents([x])

        def shifted(b: Body, a):
            return b.unary_math("exp", b.binary("sub", a[0], _finite_or_zero(b, a[1], dtype), dtype))

        s = self.generic([x, In(m, keep)], [], keep, [axis], "sum", ext, dtype, lambda b, a, t, i: shifted(b, a))
        return self.elementwise(
            [x, In(m, keep), In(s, keep)],
            x.names,
            dtype,
            lambda b, a: b.binary("div", shifted(b, a[:2]), a[2], dtype),
        )

    def lower_AxisOp(self, op: te.AxisOp) -> SSAValue:
        names = te.names_of(op.indices)
        dtype = te.dtype_of(op.result)
        axis = op.axis.data
        params = te.params_of(op.params)
        ins = self.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        ext = self.name_extents(ins)
        # Bring every operand to the full index set, in the result's dtype.
        full = [
            In(self.elementwise([i], names, dtype, lambda b, a, i=i: b.cast(a[0], i.dtype, dtype), ext), names)
            if (i.names != names or i.dtype != dtype)
            else i
            for i in ins
        ]
        keep = tuple(n for n in names if n != axis)
        fn = op.fn.data
        if fn == "softmax":
            return self.softmax(full[0], axis, dtype)
        if fn == "masked_softmax":
            fill = params.get("fill", float(np.finfo(dtype).min))
            mask = ins[1]

            def masked(b: Body, a):
                keep_it = b.nonzero(a[1], mask.dtype)
                return b.select(keep_it, a[0], b.const(fill, dtype))  # type: ignore[arg-type]

            xm = self.elementwise([full[0], mask], names, dtype, masked, ext)
            y = self.softmax(In(xm, names), axis, dtype)

            def zero_masked(b: Body, a):
                return b.select(b.nonzero(a[1], mask.dtype), a[0], b.const(0.0, dtype))

            return self.elementwise([In(y, names), mask], names, dtype, zero_masked, ext)
        if fn == "softmax_grad":
            y, g = full
            s = self.reduce(
                In(self.elementwise([y, g], names, dtype, lambda b, a: b.binary("mul", a[0], a[1], dtype)), names),
                keep,
                "sum",
                dtype,
            )
            return self.elementwise(
                [y, g, In(s, keep)],
                names,
                dtype,
                lambda b, a: b.binary("mul", a[0], b.binary("sub", a[1], a[2], dtype), dtype),
            )
        if fn == "lnorm":
            # Two passes over x and the output, no centred temporary: x - mean is recomputed.
            eps = float(params.get("eps", 1e-5))  # type: ignore[arg-type]
            x = full[0]
            mean = In(self.reduce(x, keep, "mean", dtype), keep)
            sq = self.generic(
                [x, mean],
                [],
                keep,
                [axis],
                "sum",
                ext,
                dtype,
                lambda b, a, t, i: (lambda d: b.binary("mul", d, d, dtype))(b.binary("sub", a[0], a[1], dtype)),
            )
            count = self._count([ext[axis]])
            var = In(
                self.elementwise(
                    [In(sq, keep)],
                    keep,
                    dtype,
                    lambda b, a: b.binary("div", a[0], b.index_to(count, dtype), dtype),
                    ext,
                ),
                keep,
            )
            return self.elementwise(
                [x, mean, var],
                names,
                dtype,
                lambda b, a: b.binary(
                    "div",
                    b.binary("sub", a[0], a[1], dtype),
                    b.unary_math("sqrt", b.binary("add", a[2], b.const(eps, dtype), dtype)),
                    dtype,
                ),
            )
        raise NotImplementedError(f"lower-te-to-ew: axis builtin {fn}")

    def lower_AccessOp(self, op: te.AccessOp) -> SSAValue:
        """A read through index expressions: a generic over the output names reading the source as a table.

        Offsets read a clamped position and select 0 outside the axis; numeric
        positions and gathered values are checked (a located run-time error).
        The body uses the source's extents from outside the kernel.
        """
        src = self.v(op.source)
        axes = te.names_of(op.axes)
        out = te.names_of(op.indices)
        loc = op.loc.data if op.loc else ""
        gathers = [In(self.v(g), n) for g, n in zip(op.gathers, te.names_of_each(op.gather_indices))]
        src_ext = self.ext(src)
        ext: dict[str, SSAValue] = {}
        starts: dict[int, tuple[SSAValue, int]] = {}
        for k, a in enumerate(axes):
            if a.startswith("s:"):
                spec, text = a[2:].split("@", 1)
                parts = [int(x) if x else None for x in spec.split(":")]
                ext.setdefault(text, self.emit(te.SliceLenOp(src_ext[k], *parts)).results[0])
                step = parts[2] if parts[2] is not None else 1
                starts[k] = (self._slice_start(src_ext[k], parts[0], step), step)
            elif not (a.startswith("#") or a.startswith("$")):
                ext.setdefault(_offset_base(a)[0], src_ext[k])
        ext = self.name_extents(gathers, ext)
        dtype = te.dtype_of(op.result)
        for k, a in enumerate(axes):
            if a.startswith("#"):
                # Checked before the kernel, once: an error whether or not the kernel's loop space is empty.
                position = self.emit(arith.ConstantOp(IntegerAttr(int(a[1:]), IndexType()))).results[0]
                message = f"position {{0}} is out of range for axis {k} (extent {{1}})"
                self.emit(te.CheckDimOp(position, src_ext[k], message, loc, "lt"))
        checked = any(a.startswith("$") for a in axes)

        def body(b: Body, args, tables, idx):
            positions: list[SSAValue] = []
            valid: SSAValue | None = None
            for k, a in enumerate(axes):
                if a.startswith("#"):
                    positions.append(b.index(int(a[1:])))
                elif a.startswith("$"):
                    g = int(a[1:])
                    positions.append(b.to_index(args[g], gathers[g].dtype))
                elif a.startswith("s:"):
                    s0, step = starts[k]
                    i = idx(a[2:].split("@", 1)[1])
                    positions.append(b.add(arith.AddiOp(s0, b.add(arith.MuliOp(i, b.index(step))))))
                else:
                    base, off = _offset_base(a)
                    i = idx(base)
                    if not off:
                        positions.append(i)
                        continue
                    shifted = b.add(arith.AddiOp(i, b.index(off)))
                    lo = b.add(arith.CmpiOp(shifted, b.index(0), "sge"))
                    hi = b.add(arith.CmpiOp(shifted, src_ext[k], "slt"))
                    ok = b.add(arith.AndIOp(lo, hi))
                    valid = ok if valid is None else b.add(arith.AndIOp(valid, ok))
                    top = b.add(arith.SubiOp(src_ext[k], b.index(1)))
                    clamped = b.add(arith.MinSIOp(b.add(arith.MaxSIOp(shifted, b.index(0))), top))
                    positions.append(clamped)
            if checked:
                # A uint64 index travels as a signed detail value: `{0:u}` prints it unsigned (format_details).
                unsigned = all(g.dtype.kind == "u" for g in gathers)
                message = f"index {{0{':u' if unsigned else ''}}} is out of range for an axis of extent {{1}}"
                value = b.add(ew.ExtractOp(tables[0], positions, check=message, loc=loc))
            else:
                value = b.add(ew.ExtractOp(tables[0], positions))
            if valid is not None:
                value = b.select(valid, value, b.const(0, dtype))
            return value

        return self.generic(gathers, [src], out, [], "none", ext, dtype, body, loc)

    # -- constructors, reshapes, data movement ----------------------------------

    def lower_GenerateOp(self, op: te.GenerateOp) -> SSAValue:
        names = te.names_of(op.indices)
        ext = {n: self.v(e) for n, e in zip(names, op.extents)}
        dtype = te.dtype_of(op.result)
        if op.fn.data == "causal_mask":
            p, q = names

            def mask(b: Body, a, t, idx):
                below = b.add(arith.CmpiOp(idx(q), idx(p), "ule"))
                return b.select(below, b.const(1, dtype), b.const(0, dtype))

            return self.generic([], [], names, [], "none", ext, dtype, mask)
        want = 0 if op.fn.data == "even" else 1

        def parity(b: Body, a, t, idx):
            r = b.add(arith.RemUIOp(idx(names[0]), b.index(2)))
            return b.bool_to_i8(b.add(arith.CmpiOp(r, b.index(want), "eq")))

        return self.generic([], [], names, [], "none", ext, dtype, parity)

    def lower_FlattenOp(self, op: te.FlattenOp) -> SSAValue:
        src = self.v(op.input)
        names = te.names_of_each(op.operand_indices)[0]
        out = te.names_of(op.indices)
        src_ext = self.ext(src)
        inner = src_ext[-1]
        ext = dict(zip(out[:-1], src_ext[:-2]))
        ext[out[-1]] = self.emit(arith.MuliOp(src_ext[-2], inner)).results[0]
        dtype = te.dtype_of(op.result)
        del names

        def body(b: Body, a, tables, idx):
            k = idx(out[-1])
            hi = b.add(arith.DivUIOp(k, inner))
            lo = b.add(arith.RemUIOp(k, inner))
            return b.add(ew.ExtractOp(tables[0], [*(idx(n) for n in out[:-1]), hi, lo]))

        return self.generic([], [src], out, [], "none", ext, dtype, body)

    def lower_ConcatOp(self, op: te.ConcatOp) -> SSAValue:
        """Each part is brought to the result's index order (broadcasting), then joined by the runtime."""
        out = te.names_of(op.indices)
        axis = op.axis.data
        parts = te.names_of(op.operand_axes)
        dtype = te.dtype_of(op.result)
        ins = [
            In(self.v(v), tuple(axis if n == part else n for n in ns))
            for v, ns, part in zip(op.inputs, te.names_of_each(op.operand_indices), parts)
        ]
        # Every index but the joined axis has one extent across the parts (the frontend checks it); a part
        # that lacks an index is broadcast over it.
        shared = {n: e for n, e in self.name_extents(ins).items() if n != axis}
        aligned = []
        for i in ins:
            ext = dict(shared)
            ext[axis] = self.ext(i.value)[i.names.index(axis)]
            aligned.append(self.elementwise([i], out, dtype, lambda b, a, i=i: b.cast(a[0], i.dtype, dtype), ext))
        call = self.emit(
            ew.HostCallOp(
                "concat", aligned, [te.tensor_type(dtype, [te.DYNAMIC] * len(out))], {"axis": out.index(axis)}
            )
        )
        return call.results[0]

    def lower_PlaceOp(self, op: te.PlaceOp) -> SSAValue:
        x = In(self.v(op.input), te.names_of_each(op.operand_indices)[0])
        out = te.names_of(op.indices)
        pos = op.position_list()
        fixed = [n for n, p in zip(out, pos) if p >= 0]
        ext = self.name_extents([x], {n: self.v(e) for n, e in zip(fixed, op.extents)})
        dtype = te.dtype_of(op.result)

        def body(b: Body, a, t, idx):
            cond = None
            for n, p in zip(out, pos):
                if p >= 0:
                    eq = b.add(arith.CmpiOp(idx(n), b.index(p), "eq"))
                    cond = eq if cond is None else b.add(arith.AndIOp(cond, eq))
            assert cond is not None
            return b.select(cond, a[0], b.const(0, dtype))

        return self.generic([x], [], out, [], "none", ext, dtype, body)

    # -- model blocks ------------------------------------------------------------

    def lower_BlockOp(self, op: te.BlockOp) -> list[SSAValue]:
        fn = op.fn.data
        ins = self.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        roles = te.params_of(op.roles)
        params = te.params_of(op.params)
        out = te.names_of(op.indices)
        if fn == "attention":
            return [self.attention(ins, roles, params, out, te.dtype_of(op.outputs[0]))]
        if fn == "rope":
            return [self.rope(ins[0], roles, params, te.dtype_of(op.outputs[0]))]
        # tucker_dense (an SVD) and topk (a sort) run in the runtime on NumPy.
        host_params = dict(params)
        if fn == "topk":
            host_params["axis"] = ins[0].names.index(roles["axis"])  # type: ignore[arg-type]
        x = ins[0]
        if fn == "tucker_dense" and x.dtype != te.dtype_of(op.outputs[0]):
            dt = te.dtype_of(op.outputs[0])
            x = In(self.elementwise([x], x.names, dt, lambda b, a: b.cast(a[0], ins[0].dtype, dt)), x.names)
        call = self.emit(ew.HostCallOp(fn, [x.value], [r.type for r in op.outputs], host_params))  # type: ignore[misc]
        return list(call.results)

    def attention(self, ins: list[In], roles, params, out: Sequence[str], dtype: np.dtype) -> SSAValue:
        """softmax(Q·Kᵀ·scale, masked) · V, as two contractions around a masked softmax over the key axis."""
        qs, ks, d = roles["query"], roles["key"], roles["feature"]
        cast = [
            i
            if i.dtype == dtype
            else In(self.elementwise([i], i.names, dtype, lambda b, a, i=i: b.cast(a[0], i.dtype, dtype)), i.names)
            for i in ins[:3]
        ]
        q, k, v = cast
        batch = [n for n in q.names[:-2]]
        score_names = (*batch, qs, ks)
        scores = self.contract([q, k], score_names, "sum", dtype)
        ext = self.name_extents([q, k, v])
        scale = params.get("scale")
        d_ext = ext[d]

        def scaled(b: Body, a):
            if scale is not None:
                factor = b.const(float(scale), dtype)  # type: ignore[arg-type]
            else:
                factor = b.binary("div", b.const(1.0, dtype), b.unary_math("sqrt", b.index_to(d_ext, dtype)), dtype)
            return b.binary("mul", a[0], factor, dtype)

        s = self.elementwise([In(scores, score_names)], score_names, dtype, scaled, ext)
        causal = bool(params.get("causal", False))
        mask_in = ins[3] if len(ins) > 3 else None
        if causal or mask_in is not None:
            mins = [In(s, score_names)] + ([mask_in] if mask_in is not None else [])
            lq, lk = ext[qs], ext[ks]
            fill = float(np.finfo(dtype).min)

            def keep(b: Body, a, t, idx):
                ok = None
                if causal:  # key j is visible to query i when j <= i + (Lk - Lq)
                    shift = b.add(arith.SubiOp(lk, lq))
                    lim = b.add(arith.AddiOp(idx(qs), shift))
                    ok = b.add(arith.CmpiOp(idx(ks), lim, "sle"))
                if mask_in is not None:
                    nz = b.nonzero(a[1], mask_in.dtype)
                    ok = nz if ok is None else b.add(arith.AndIOp(ok, nz))
                assert ok is not None
                return b.bool_to_i8(ok)

            mask = self.generic(mins, [], score_names, [], "none", ext, np.dtype(np.int8), keep)
            xm = self.elementwise(
                [In(s, score_names), In(mask, score_names)],
                score_names,
                dtype,
                lambda b, a: b.select(b.nonzero(a[1], np.dtype(np.int8)), a[0], b.const(fill, dtype)),
            )
            w = self.softmax(In(xm, score_names), ks, dtype)
            w = self.elementwise(
                [In(w, score_names), In(mask, score_names)],
                score_names,
                dtype,
                lambda b, a: b.select(b.nonzero(a[1], np.dtype(np.int8)), a[0], b.const(0.0, dtype)),
            )
        else:
            w = self.softmax(In(s, score_names), ks, dtype)
        return self.contract([In(w, score_names), v], out, "sum", dtype)

    def rope(self, x: In, roles, params, dtype: np.dtype) -> SSAValue:
        """Rotate interleaved feature pairs (2m, 2m+1) by position · base^(-2m/d) (the reference's convention)."""
        f, seq = roles["feature"], roles["sequence"]
        base = float(params.get("base", 10000.0))  # type: ignore[arg-type]
        ext = self.name_extents([x])
        d = ext[f]
        two = self.emit(arith.ConstantOp(IntegerAttr(2, IndexType()))).results[0]
        zero = self.emit(arith.ConstantOp(IntegerAttr(0, IndexType()))).results[0]
        odd = self.emit(arith.RemUIOp(d, two)).results[0]
        self.emit(te.CheckDimOp(odd, zero, "rope needs an even feature extent (extent mod 2 is {0})"))
        f64 = np.dtype(np.float64)
        if x.dtype != dtype:
            x = In(self.elementwise([x], x.names, dtype, lambda b, a: b.cast(a[0], x.dtype, dtype)), x.names)
        names = x.names

        def body(b: Body, a, tables, idx):
            i = idx(f)
            partner_pos = b.add(arith.XOrIOp(i, b.index(1)))
            positions = [partner_pos if n == f else idx(n) for n in names]
            partner = b.add(ew.ExtractOp(tables[0], positions))
            m2 = b.add(arith.SubiOp(i, b.add(arith.RemUIOp(i, b.index(2)))))  # 2m
            expo = b.binary("div", b.index_to(m2, f64), b.index_to(d, f64), f64)
            inv = b.unary_math("exp", b.binary("mul", b.neg(expo, f64), b.const(float(np.log(base)), f64), f64))
            theta = b.binary("mul", b.index_to(idx(seq), f64), inv, f64)
            c = b.cast(b.unary_math("cos", theta), f64, dtype)
            s = b.cast(b.unary_math("sin", theta), f64, dtype)
            even = b.add(arith.CmpiOp(b.add(arith.RemUIOp(i, b.index(2))), b.index(0), "eq"))
            first = b.binary("sub", b.binary("mul", a[0], c, dtype), b.binary("mul", partner, s, dtype), dtype)
            second = b.binary("add", b.binary("mul", partner, s, dtype), b.binary("mul", a[0], c, dtype), dtype)
            return b.select(even, first, second)

        return self.generic([x], [x.value], names, [], "none", ext, dtype, body)

    def _slice_start(self, n: SSAValue, start: int | None, step: int) -> SSAValue:
        """``range(n)[start::step].start`` as index arithmetic (Python's clamping rules)."""

        def c(v: int) -> SSAValue:
            return self.emit(arith.ConstantOp(IntegerAttr(v, IndexType()))).results[0]

        if step > 0:
            if start is None:
                return c(0)
            if start >= 0:
                return self.emit(arith.MinSIOp(c(start), n)).results[0]
            shifted = self.emit(arith.AddiOp(n, c(start))).results[0]
            return self.emit(arith.MaxSIOp(shifted, c(0))).results[0]
        last = self.emit(arith.SubiOp(n, c(1))).results[0]
        if start is None:
            return last
        if start >= 0:
            return self.emit(arith.MinSIOp(c(start), last)).results[0]
        shifted = self.emit(arith.AddiOp(n, c(start))).results[0]
        return self.emit(arith.MaxSIOp(shifted, c(-1))).results[0]


def _scalar_constant(value: SSAValue) -> float | int | None:
    """The value of a rank-0 ``te.constant`` (a literal), else None."""
    op = value.owner
    if isinstance(op, te.ConstantOp) and op.result.type.get_num_dims() == 0:  # type: ignore[attr-defined]
        return te.dense_value(op.value).item()
    return None


def _offset_base(a: str) -> tuple[str, int]:
    if "+" in a:
        name, off = a.rsplit("+", 1)
        return name, int(off)
    if "-" in a and a.rsplit("-", 1)[1].isdigit():
        name, off = a.rsplit("-", 1)
        return name, -int(off)
    return a, 0


@register_pass
@dataclass(frozen=True)
class LowerTeToEw(ModulePass):
    """Lower tensor_eq compute ops to elemwise kernels (ew.generic / ew.contract / ew.host_call)."""

    name = "lower-te-to-ew"
    level: ClassVar[str] = "tensor_eq"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        new = TeToEw(op).run()
        block = op.body.block
        for old in list(block.ops):
            old.detach()
        for o in list(new.body.block.ops):
            o.detach()
            block.add_op(o)
