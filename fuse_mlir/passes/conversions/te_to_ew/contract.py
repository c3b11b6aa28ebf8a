"""te → ew for contractions: ``te.contract`` as an ``ew.contract`` (a BLAS-able matrix product) or a generic.

Sum contractions of two float tensors that are matrix products stay whole as
``ew.contract``; every other product (dots, matrix-vector, other projections,
more operands) becomes an ``ew.generic`` whose body multiplies the operands.
A ``gemm_result`` attribute on the ``te.contract`` (:data:`RESULT_ATTR`,
written by the per-shape planner) is the axis order its GEMM writes before
the copy into the result's order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.gemm import blas_product, gemm_layout
from fuse_mlir.interp.dtypes import accumulate_dtype
from fuse_mlir.passes.conversions.te_to_ew.lowering import In, TeLowering, TeOpPattern
from fuse_mlir.passes.scalar import Body

RESULT_ATTR = "gemm_result"
"""The ``te.contract`` attribute naming the axis order its GEMM writes (an array of index names; the result is
then copied into the op's own order): the per-shape planner's choice of which way round BLAS runs faster."""


def result_order_of(op: te.ContractOp) -> tuple[str, ...] | None:
    """The order :data:`RESULT_ATTR` names on ``op``, or None (absent, or not an array of names)."""
    attr = op.attributes.get(RESULT_ATTR)
    if attr is None:
        return None
    try:
        return te.names_of(attr)
    except TypeError:
        return None


def contract(
    lo: TeLowering,
    ins: Sequence[In],
    out: Sequence[str],
    proj: str,
    dtype: np.dtype,
    result: Sequence[str] | None = None,
) -> SSAValue:
    """Product of ``ins`` joined by name, projected onto ``out`` with ``proj`` (``result``: the order a GEMM
    writes, :data:`RESULT_ATTR`)."""
    out = list(out)
    ext = lo.name_extents(ins)
    red = [n for n in ext if n not in out]
    work = accumulate_dtype(dtype) if proj in ("sum", "mean") else dtype
    if work != dtype:  # float16: accumulate in float32, round once (as the reference does)
        res = contract(lo, ins, out, proj, work)
        return lo.elementwise([In(res, tuple(out))], out, dtype, lambda b, a: b.cast(a[0], work, dtype))
    if proj == "sum" and blas_product([i.names for i in ins], out, [i.dtype for i in ins], dtype, _static(ins)):
        return matmul(lo, ins, out, ext, dtype, result)

    def product(b: Body, a: list[SSAValue]) -> SSAValue:
        vals = [b.cast(x, i.dtype, dtype) for x, i in zip(a, ins)]
        acc = vals[0]
        for x in vals[1:]:
            acc = b.binary("mul", acc, x, dtype)
        return acc

    if not red:
        return lo.elementwise(ins, out, dtype, product)
    if proj == "mean":
        total = lo.generic(ins, [], out, red, "sum", ext, dtype, lambda b, a, t, i: product(b, a))
        return lo.divide_by_count(total, out, [ext[n] for n in red], dtype, ext)
    return lo.generic(ins, [], out, red, proj, ext, dtype, lambda b, a, t, i: product(b, a))


def _static(ins: Sequence[In]) -> dict[str, int]:
    """The extents of ``ins``' index names known at compile time."""
    return {n: e for i in ins for n, e in zip(i.names, i.value.type.get_shape()) if e >= 0}  # type: ignore[attr-defined]


def matmul(
    lo: TeLowering,
    ins: Sequence[In],
    out: list[str],
    ext: dict[str, SSAValue],
    dtype: np.dtype,
    result: Sequence[str] | None = None,
) -> SSAValue:
    """A float matrix product as ``ew.contract`` (BLAS), with operands copied first where the layouts do not fit
    one GEMM, and the result copied after where the GEMM writes another order: one that fits, or ``result``, or the
    way round BLAS runs faster on static extents (:func:`~fuse_mlir.gemm.gemm_layout`)."""
    layout = gemm_layout(ins[0].names, ins[1].names, out, _static(ins), dtype=dtype, result=result)
    ops = list(ins)
    if layout is not None:
        ops = [x if x.names == want else permuted(lo, x, want) for x, want in zip(ins, (layout.a, layout.b))]
    c_names = list(layout.c) if layout is not None else out
    dims = c_names + [n for n in ext if n not in out]
    c = lo.emit(
        ew.ContractOp(
            ops[0].value,
            ops[1].value,
            [ext[n] for n in dims],
            [[dims.index(n) for n in i.names] for i in ops],
            list(range(len(out))),
            te.tensor_type(dtype, [te.DYNAMIC] * len(out)),
        )
    )
    lo.extents[c.results[0]] = [ext[n] for n in c_names]
    if c_names == out:
        return c.results[0]
    return permuted(lo, In(c.results[0], tuple(c_names)), tuple(out)).value


def permuted(lo: TeLowering, x: In, names: tuple[str, ...]) -> In:
    """A copy of ``x`` with its axes in the order ``names``."""
    return In(lo.elementwise([x], names, x.dtype, lambda b, a: a[0]), names)


class LowerContract(TeOpPattern):
    """A named-index product with a projection (sum, max, mean, …) over the indices the result lacks."""

    op_type = te.ContractOp

    def lower(self, op: te.ContractOp) -> SSAValue:
        ins = self.lo.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        return contract(
            self.lo, ins, te.names_of(op.indices), op.projection.data, te.dtype_of(op.result), result_order_of(op)
        )


PATTERNS = (LowerContract,)
