"""te → ew for the pointwise ops: ``te.map``, ``te.broadcast``, ``te.cast``, ``te.group`` (one kernel each)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.locations import loc_text
from fuse_mlir.interp.numpy_builtins import INT_NEGATIVE_POWER
from fuse_mlir.passes.conversions.te_to_ew.lowering import In, TeOpPattern
from fuse_mlir.passes.scalar import Body


class LowerMap(TeOpPattern):
    """A builtin applied pointwise; an integer power checks for a negative exponent (located)."""

    op_type = te.MapOp

    def lower(self, op: te.MapOp) -> SSAValue:
        lo = self.lo
        ins = lo.ins_of(op.inputs, te.names_of_each(op.operand_indices))
        out = te.names_of(op.indices)
        dtype = te.dtype_of(op.result)
        fn, params = op.fn.data, te.params_of(op.params)
        dts = [i.dtype for i in ins]
        if fn == "pow" and dtype.kind in "iu" and dts[1].kind == "i":
            # NumPy refuses an integer raised to a negative integer power; so does every backend (located).
            loc = loc_text(op)

            def checked_pow(b: Body, a: list[SSAValue]) -> SSAValue:
                ok = b.add(arith.CmpiOp(a[1], b.const(0, dts[1]), "sge"))
                b.block.add_op(ew.AssertOp(ok, a[1], INT_NEGATIVE_POWER, loc))
                return b.builtin(fn, a, dts, dtype, params)

            return lo.elementwise(ins, out, dtype, checked_pow)
        return lo.elementwise(ins, out, dtype, lambda b, a: b.builtin(fn, a, dts, dtype, params))


class LowerBroadcast(TeOpPattern):
    """A copy over more names (their extents are the op's operands)."""

    op_type = te.BroadcastOp

    def lower(self, op: te.BroadcastOp) -> SSAValue:
        x = In(op.input, te.names_of_each(op.operand_indices)[0])
        out = te.names_of(op.indices)
        new = [n for n in out if n not in x.names]
        extra = dict(zip(new, op.extents))
        return self.lo.elementwise([x], out, x.dtype, lambda b, a: a[0], extra)


class LowerCast(TeOpPattern):
    """A NumPy ``astype`` per element."""

    op_type = te.CastOp

    def lower(self, op: te.CastOp) -> SSAValue:
        names = te.names_of(op.indices)
        x = In(op.input, names)
        dtype = te.dtype_of(op.result)
        return self.lo.elementwise([x], names, dtype, lambda b, a: b.cast(a[0], x.dtype, dtype))


class LowerGroup(TeOpPattern):
    """The terms of one equation added (or or-ed, for a boolean result); one term of the same dtype is itself."""

    op_type = te.GroupOp

    def lower(self, op: te.GroupOp) -> SSAValue:
        names = te.names_of(op.indices)
        ins = [In(v, names) for v in op.inputs]
        dtype = te.dtype_of(op.result)
        if len(ins) == 1 and not op.boolean.value.data and ins[0].dtype == dtype:
            return ins[0].value
        if op.boolean.value.data:

            def orall(b: Body, a: list[SSAValue]) -> SSAValue:
                acc = b.nonzero(a[0], ins[0].dtype)
                for x, i in zip(a[1:], ins[1:]):
                    acc = b.add(arith.OrIOp(acc, b.nonzero(x, i.dtype)))
                return b.bool_to_i8(acc)

            return self.lo.elementwise(ins, names, np.dtype(np.int8), orall)

        def total(b: Body, a: list[SSAValue]) -> SSAValue:
            acc = b.cast(a[0], ins[0].dtype, dtype)
            for x, i in zip(a[1:], ins[1:]):
                acc = b.binary("add", acc, b.cast(x, i.dtype, dtype), dtype)
            return acc

        return self.lo.elementwise(ins, names, dtype, total)


PATTERNS = (LowerMap, LowerBroadcast, LowerCast, LowerGroup)
