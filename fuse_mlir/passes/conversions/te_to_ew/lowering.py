"""The state and kernel builders every te → ew pattern shares, and the pattern base class.

A pattern lowers one ``te`` op in place: it emits the new ops before the op
(through the driver's rewriter) and replaces the op's results. What the
patterns share is :class:`TeLowering`: the extents met so far (one ``te.dim``
per axis of a value, emitted once) and the builders of ``ew.generic`` kernels.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.scalar import Body

BodyFn = Callable[[Body, list[SSAValue], list[SSAValue], Callable[[str], SSAValue]], SSAValue]


def finite_or_zero(b: Body, m: SSAValue, dtype: np.dtype) -> SSAValue:
    """``m`` where finite, else 0: the shift of softmax and logsumexp (as the reference's ``_shifted_exp``).

    Shifting by an infinite max would give inf - inf = NaN at every position;
    shifting by 0 keeps IEEE's answer (NaN where x is +inf, 0 elsewhere).
    """
    finite = b.compare("lt", b.unary_math("abs", m), b.const(np.inf, dtype), dtype)
    return b.select(finite, m, b.const(0.0, dtype))


@dataclass
class In:
    """A mapped generic input: a tensor value with its axes named."""

    value: SSAValue
    names: tuple[str, ...]

    @property
    def dtype(self) -> np.dtype:
        return te.dtype_of(self.value)


def scalar_constant(value: SSAValue) -> float | int | None:
    """The value of a rank-0 ``te.constant`` (a literal), else None."""
    op = value.owner
    if isinstance(op, te.ConstantOp) and op.result.type.get_num_dims() == 0:
        return te.dense_value(op.value).item()
    return None


class TeLowering:
    """What the te → ew patterns of one module share: the rewriter's insertion point and the extents met."""

    def __init__(self) -> None:
        self.rewriter: PatternRewriter | None = None
        self.extents: dict[SSAValue, list[SSAValue]] = {}

    # -- plumbing --------------------------------------------------------------

    def emit(self, op: Operation) -> Operation:
        """Insert ``op`` before the op being lowered."""
        assert self.rewriter is not None
        self.rewriter.insert(op)
        return op

    def index(self, value: int) -> SSAValue:
        """An ``index`` constant before the op being lowered."""
        return self.emit(arith.ConstantOp(IntegerAttr(value, IndexType()))).results[0]

    def ext(self, value: SSAValue) -> list[SSAValue]:
        """The extents of a (new) tensor value, emitting ``te.dim`` once per axis."""
        if value not in self.extents:
            t = value.type
            assert isinstance(t, TensorType)
            self.extents[value] = [self.emit(te.DimOp(value, k)).results[0] for k in range(t.get_num_dims())]
        return self.extents[value]

    def forget_inside(self, op: Operation) -> None:
        """Drop the extents met inside ``op``'s regions: they are not visible after it (a fixpoint body)."""
        inner: set[SSAValue] = set()
        for region in op.regions:
            for block in region.blocks:
                inner.update(block.args)
        for o in op.walk():
            if o is op:
                continue
            inner.update(o.results)
            if isinstance(o, te.DimOp) and o.source not in inner:
                dims = self.extents.get(o.source)
                if dims is not None and o.results[0] in dims:
                    del self.extents[o.source]
        for value in inner:
            self.extents.pop(value, None)

    def name_extents(self, ins: Sequence[In], extra: dict[str, SSAValue] | None = None) -> dict[str, SSAValue]:
        out: dict[str, SSAValue] = dict(extra or {})
        for i in ins:
            for n, e in zip(i.names, self.ext(i.value)):
                out.setdefault(n, e)
        return out

    def ins_of(self, operands: Sequence[SSAValue], names: Sequence[Sequence[str]]) -> list[In]:
        return [In(o, tuple(n)) for o, n in zip(operands, names)]

    # -- kernel builders ---------------------------------------------------------

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
        scalars = {k: scalar_constant(i.value) for k, i in enumerate(ins)}
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
        self,
        ins: Sequence[In],
        out: Sequence[str],
        out_dtype: np.dtype,
        fn: Callable[[Body, list[SSAValue]], SSAValue],
        extents: dict[str, SSAValue] | None = None,
    ) -> SSAValue:
        """A pure map over ``out`` (fn(body, args) → scalar)."""
        ext = self.name_extents(ins, extents)
        return self.generic(ins, [], out, [], "none", ext, out_dtype, lambda b, a, t, i: fn(b, a))

    def cast_kernel(
        self, x: In, names: Sequence[str], dtype: np.dtype, extents: dict[str, SSAValue] | None = None
    ) -> SSAValue:
        """A kernel over ``names`` casting ``x`` to ``dtype`` (broadcast over the names it lacks)."""
        return self.elementwise([x], names, dtype, lambda b, a: b.cast(a[0], x.dtype, dtype), extents)

    def cast_to(self, x: In, dtype: np.dtype) -> In:
        """``x`` in ``dtype``: itself, or a cast kernel over its names."""
        if x.dtype == dtype:
            return x
        return In(self.cast_kernel(x, x.names, dtype), x.names)

    def reduce(
        self,
        x: In,
        keep: Sequence[str],
        kind: str,
        out_dtype: np.dtype,
        prep: Callable[[Body, SSAValue], SSAValue] | None = None,
    ) -> SSAValue:
        """Reduce ``x`` over its names not in ``keep`` (``prep`` maps each element first)."""
        ext = self.name_extents([x])
        red = [n for n in x.names if n not in keep]

        def body(b: Body, a: list[SSAValue], t: list[SSAValue], i: Callable[[str], SSAValue]) -> SSAValue:
            v = b.cast(a[0], x.dtype, out_dtype)
            return prep(b, v) if prep else v

        if kind == "mean":
            total = self.generic([x], [], keep, red, "sum", ext, out_dtype, body)
            return self.divide_by_count(total, keep, [ext[n] for n in red], out_dtype, ext)
        if kind == "any":

            def any_body(b: Body, a: list[SSAValue], t: list[SSAValue], i: Callable[[str], SSAValue]) -> SSAValue:
                return b.bool_to_i8(b.nonzero(a[0], x.dtype))

            return self.generic([x], [], keep, red, "any", ext, np.dtype(np.int8), any_body)
        return self.generic([x], [], keep, red, kind, ext, out_dtype, body)

    def divide_by_count(
        self,
        total: SSAValue,
        names: Sequence[str],
        counted: Sequence[SSAValue],
        dtype: np.dtype,
        ext: dict[str, SSAValue],
    ) -> SSAValue:
        """``total`` (over ``names``) divided by the product of the ``counted`` extents: a mean's last step."""
        count = self.count(counted)
        return self.elementwise(
            [In(total, tuple(names))],
            names,
            dtype,
            lambda b, a: b.binary("div", a[0], b.index_to(count, dtype), dtype),
            ext,
        )

    def count(self, extents: Sequence[SSAValue]) -> SSAValue:
        """The product of ``extents`` (an ``index``)."""
        acc = self.index(1)
        for e in extents:
            acc = self.emit(arith.MuliOp(acc, e)).results[0]
        return acc


class TeOpPattern(RewritePattern):
    """Lowers ops of one ``te`` class: :meth:`lower` emits the kernels and returns the replacement values."""

    op_type: ClassVar[type[Operation]]

    def __init__(self, lowering: TeLowering) -> None:
        self.lo = lowering

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, self.op_type):
            return
        self.lo.rewriter = rewriter
        results = self.lower(op)
        rewriter.replace(op, [], list(results) if isinstance(results, list | tuple) else [results])

    @abstractmethod
    def lower(self, op: Any) -> SSAValue | list[SSAValue]:
        """Emit the ew ops for ``op`` (before it) and return the values that replace its results."""
