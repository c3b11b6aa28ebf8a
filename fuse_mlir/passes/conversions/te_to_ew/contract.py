"""te → ew for contractions: ``te.contract`` as an ``ew.contract`` (a BLAS-able matrix product) or a generic.

Sum contractions of two float tensors that are matrix products stay whole as
``ew.contract``; every other product (dots, matrix-vector, other projections,
more operands) becomes an ``ew.generic`` whose body multiplies the operands.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.conversions.te_to_ew.lowering import In, TeLowering, TeOpPattern
from fuse_mlir.passes.scalar import Body


def contract(lo: TeLowering, ins: Sequence[In], out: Sequence[str], proj: str, dtype: np.dtype) -> SSAValue:
    """Product of ``ins`` joined by name, projected onto ``out`` with ``proj``."""
    out = list(out)
    ext = lo.name_extents(ins)
    red = [n for n in ext if n not in out]
    if (
        proj == "sum"
        and len(ins) == 2
        and dtype.kind == "f"
        and all(i.dtype == dtype for i in ins)
        and red
        and all(len(set(i.names)) == len(i.names) for i in ins)
        # A matrix product: each side keeps an index the other lacks. Dots and matrix-vector
        # products are memory-bound and better as generics that fusion can feed.
        and any(n in out and n not in ins[1].names for n in ins[0].names)
        and any(n in out and n not in ins[0].names for n in ins[1].names)
    ):
        dims = out + red
        c = lo.emit(
            ew.ContractOp(
                ins[0].value,
                ins[1].value,
                [ext[n] for n in dims],
                [[dims.index(n) for n in i.names] for i in ins],
                list(range(len(out))),
                te.tensor_type(dtype, [te.DYNAMIC] * len(out)),
            )
        )
        lo.extents[c.results[0]] = [ext[n] for n in out]
        return c.results[0]

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


class LowerContract(TeOpPattern):
    """A named-index product with a projection (sum, max, mean, …) over the indices the result lacks."""

    op_type = te.ContractOp

    def lower(self, op: te.ContractOp) -> SSAValue:
        ins = self.lo.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        return contract(self.lo, ins, te.names_of(op.indices), op.projection.data, te.dtype_of(op.result))


PATTERNS = (LowerContract,)
