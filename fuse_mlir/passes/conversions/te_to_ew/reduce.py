"""te → ew for reductions and normalisations: ``te.reduce`` (logsumexp too) and the axis builtins.

Axis builtins decompose into reductions and maps: softmax is max, Σ exp(x -
max), exp(x - max) · (1/Σ); masked softmax masks before and after; layer norm is
mean, variance, (x - mean) · (1/sqrt(var + eps)). The per-row reciprocal
replaces a vector division per element (:func:`reciprocal`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.ir import SSAValue

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.conversions.te_to_ew.lowering import In, TeLowering, TeOpPattern, finite_or_zero
from fuse_mlir.passes.scalar import Body


def logsumexp(lo: TeLowering, x: In, keep: Sequence[str], dtype: np.dtype) -> SSAValue:
    """log Σ exp(x - m) + m with m the max (a finite stand-in when m is ±inf, as the reference does)."""
    xf = lo.cast_to(x, dtype)
    m = lo.reduce(xf, keep, "max", dtype)
    ext = lo.name_extents([xf])

    def safe(b: Body, mv: SSAValue) -> SSAValue:
        return finite_or_zero(b, mv, dtype)

    def shifted(b: Body, a: list[SSAValue], t: list[SSAValue], i: Callable[[str], SSAValue]) -> SSAValue:
        return b.unary_math("exp", b.binary("sub", a[0], safe(b, a[1]), dtype))

    red = [n for n in x.names if n not in keep]
    s = lo.generic([xf, In(m, tuple(keep))], [], keep, red, "sum", ext, dtype, shifted)
    return lo.elementwise(
        [In(s, tuple(keep)), In(m, tuple(keep))],
        keep,
        dtype,
        lambda b, a: b.binary("add", b.unary_math("log", a[0]), safe(b, a[1]), dtype),
        ext,
    )


def softmax(lo: TeLowering, x: In, axis: str, dtype: np.dtype) -> SSAValue:
    """Three kernels over x, no full-size temporary: row max, Σ exp(x - max), exp(x - max) · (1/Σ).

    The max is replaced by 0 where it is not finite (:func:`finite_or_zero`), as the reference does.

    The exponential is recomputed in the last kernel rather than stored:
    with a vectorised exp that is cheaper than writing and re-reading a
    temporary the size of the input.
    """
    keep = tuple(n for n in x.names if n != axis)
    m = lo.reduce(x, keep, "max", dtype)
    ext = lo.name_extents([x])

    def shifted(b: Body, a: list[SSAValue]) -> SSAValue:
        return b.unary_math("exp", b.binary("sub", a[0], finite_or_zero(b, a[1], dtype), dtype))

    s = lo.generic([x, In(m, keep)], [], keep, [axis], "sum", ext, dtype, lambda b, a, t, i: shifted(b, a))
    return lo.elementwise(
        [x, In(m, keep), In(reciprocal(lo, s, keep, dtype), keep)],
        x.names,
        dtype,
        lambda b, a: b.binary("mul", shifted(b, a[:2]), a[2], dtype),
    )


def reciprocal(lo: TeLowering, d: SSAValue, keep: tuple[str, ...], dtype: np.dtype) -> SSAValue:
    """1 / d per row, so a row's elements are multiplied by it instead of each divided by d.

    A vector division costs about ten multiplies (``vdivpd``: 1.2 cycles per float64 element on AVX-512);
    x·(1/d) differs from x/d by at most one rounding. Only for divisors whose reciprocal is a normal number
    or inf/0/NaN exactly where the quotient needs it: softmax's sum (1 ≤ Σ ≤ n for a finite row max; 0, inf
    or NaN give 0·inf, x·0, NaN as x/d does) and layer norm's sqrt(var + eps) (never subnormal).
    """
    return lo.elementwise([In(d, keep)], keep, dtype, lambda b, a: b.binary("div", b.const(1.0, dtype), a[0], dtype))


class LowerReduce(TeOpPattern):
    """A reduction builtin over the names the result lacks (sum, max, mean, any, logsumexp, …)."""

    op_type = te.ReduceOp

    def lower(self, op: te.ReduceOp) -> SSAValue:
        x = In(op.input, te.names_of_each(op.operand_indices)[0])
        keep = te.names_of(op.indices)
        dtype = te.dtype_of(op.result)
        kind = op.kind.data
        if kind == "logsumexp":
            return logsumexp(self.lo, x, keep, dtype)
        return self.lo.reduce(x, keep, kind, dtype)


class LowerAxis(TeOpPattern):
    """An axis builtin (softmax, masked_softmax, softmax_grad, lnorm) as reductions and maps over its axis."""

    op_type = te.AxisOp

    def lower(self, op: te.AxisOp) -> SSAValue:
        lo = self.lo
        names = te.names_of(op.indices)
        dtype = te.dtype_of(op.result)
        axis = op.axis.data
        params = te.params_of(op.params)
        ins = lo.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        ext = lo.name_extents(ins)
        # Bring every operand to the full index set, in the result's dtype.
        full = [
            In(lo.cast_kernel(i, names, dtype, ext), names) if (i.names != names or i.dtype != dtype) else i
            for i in ins
        ]
        keep = tuple(n for n in names if n != axis)
        fn = op.fn.data
        if fn == "softmax":
            return softmax(lo, full[0], axis, dtype)
        if fn == "masked_softmax":
            fill = params.get("fill", float(np.finfo(dtype).min))
            mask = ins[1]

            def masked(b: Body, a: list[SSAValue]) -> SSAValue:
                keep_it = b.nonzero(a[1], mask.dtype)
                return b.select(keep_it, a[0], b.const(fill, dtype))  # type: ignore[arg-type]

            xm = lo.elementwise([full[0], mask], names, dtype, masked, ext)
            sm = softmax(lo, In(xm, names), axis, dtype)

            def zero_masked(b: Body, a: list[SSAValue]) -> SSAValue:
                return b.select(b.nonzero(a[1], mask.dtype), a[0], b.const(0.0, dtype))

            return lo.elementwise([In(sm, names), mask], names, dtype, zero_masked, ext)
        if fn == "softmax_grad":
            y, g = full
            s = lo.reduce(
                In(lo.elementwise([y, g], names, dtype, lambda b, a: b.binary("mul", a[0], a[1], dtype)), names),
                keep,
                "sum",
                dtype,
            )
            return lo.elementwise(
                [y, g, In(s, keep)],
                names,
                dtype,
                lambda b, a: b.binary("mul", a[0], b.binary("sub", a[1], a[2], dtype), dtype),
            )
        if fn == "lnorm":
            # Two passes over x and the output, no centred temporary: x - mean is recomputed.
            eps = float(params.get("eps", 1e-5))  # type: ignore[arg-type]
            x = full[0]
            mean = In(lo.reduce(x, keep, "mean", dtype), keep)
            sq = lo.generic(
                [x, mean],
                [],
                keep,
                [axis],
                "sum",
                ext,
                dtype,
                lambda b, a, t, i: (lambda d: b.binary("mul", d, d, dtype))(b.binary("sub", a[0], a[1], dtype)),
            )
            var = In(lo.divide_by_count(sq, keep, [ext[axis]], dtype, ext), keep)
            std = lo.elementwise(
                [var], keep, dtype, lambda b, a: b.unary_math("sqrt", b.binary("add", a[0], b.const(eps, dtype), dtype))
            )
            return lo.elementwise(
                [x, mean, In(reciprocal(lo, std, keep, dtype), keep)],
                names,
                dtype,
                lambda b, a: b.binary("mul", b.binary("sub", a[0], a[1], dtype), a[2], dtype),
            )
        raise NotImplementedError(f"lower-te-to-ew: axis builtin {fn}")


PATTERNS = (LowerReduce, LowerAxis)
