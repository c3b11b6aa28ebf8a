"""Scalar code for kernel bodies: every builtin and operator as arith/math ops, with NumPy's casting rules.

The lowering from tensor_eq to elemwise builds ``ew.generic`` bodies through
:class:`Body`. Each builtin's scalar formula lives here once, written to give
what the reference NumPy kernels give (same dtype rules, NaN propagation,
stable formulas), so every native backend inherits the same semantics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Block, Operation, SSAValue

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.elemwise import signless
from fuse_mlir.dialects.types import I1, I8


class Body:
    """Appends scalar ops to a block. Values carry NumPy dtypes so casts follow NumPy."""

    def __init__(self, block: Block):
        self.block = block

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    # -- constants and casts -------------------------------------------------

    def const(self, value: float | int | bool, dtype: np.dtype) -> SSAValue:
        dtype = np.dtype(dtype)
        t = signless(te.element_type(dtype if dtype != np.bool_ else np.int8))
        if dtype.kind == "f":
            return self.add(arith.ConstantOp(FloatAttr(float(value), t)))
        return self.add(arith.ConstantOp(IntegerAttr(int(value), t)))

    def index(self, value: int) -> SSAValue:
        return self.add(arith.ConstantOp(IntegerAttr(value, IndexType())))

    def cast(self, v: SSAValue, src: np.dtype, dst: np.dtype) -> SSAValue:
        """NumPy ``astype`` for scalars (float→int truncates toward zero)."""
        src, dst = np.dtype(src), np.dtype(dst)
        if src == dst:
            return v
        ts, td = signless(te.element_type(src)), signless(te.element_type(dst))
        if src.kind == "f" and dst.kind == "f":
            if src.itemsize < dst.itemsize:
                return self.add(arith.ExtFOp(v, td))
            return self.add(arith.TruncFOp(v, td))
        if src.kind in "iub" and dst.kind == "f":
            cls = arith.UIToFPOp if src.kind == "u" else arith.SIToFPOp
            return self.add(cls(v, td))  # type: ignore[arg-type]
        if src.kind == "f" and dst.kind in "iu":
            cls = arith.FPToUIOp if dst.kind == "u" else arith.FPToSIOp
            return self.add(cls(v, td))  # type: ignore[arg-type]
        if src.itemsize == dst.itemsize:
            return v
        if src.itemsize < dst.itemsize:
            cls = arith.ExtUIOp if src.kind == "u" else arith.ExtSIOp
            return self.add(cls(v, td))  # type: ignore[arg-type]
        return self.add(arith.TruncIOp(v, td))  # type: ignore[arg-type]
        del ts

    def to_index(self, v: SSAValue, src: np.dtype) -> SSAValue:
        v = self.cast(v, src, np.dtype(np.int64))
        return self.add(arith.IndexCastOp(v, IndexType()))

    def index_to(self, v: SSAValue, dst: np.dtype) -> SSAValue:
        i = self.add(arith.IndexCastOp(v, IntegerType(64)))
        return self.cast(i, np.dtype(np.int64), dst)

    def bool_to_i8(self, b: SSAValue) -> SSAValue:
        return self.add(arith.ExtUIOp(b, I8))

    def nonzero(self, v: SSAValue, dtype: np.dtype) -> SSAValue:
        zero = self.const(0, dtype)
        if np.dtype(dtype).kind == "f":
            return self.add(arith.CmpfOp(v, zero, "une"))
        return self.add(arith.CmpiOp(v, zero, "ne"))

    # -- arithmetic ----------------------------------------------------------

    def binary(self, op: str, a: SSAValue, b: SSAValue, dtype: np.dtype) -> SSAValue:
        """``a op b`` with both operands already of ``dtype``."""
        f = np.dtype(dtype).kind == "f"
        u = np.dtype(dtype).kind == "u"
        table = {
            "add": (arith.AddfOp, arith.AddiOp),
            "sub": (arith.SubfOp, arith.SubiOp),
            "mul": (arith.MulfOp, arith.MuliOp),
            "max": (arith.MaximumfOp, arith.MaxUIOp if u else arith.MaxSIOp),
            "min": (arith.MinimumfOp, arith.MinUIOp if u else arith.MinSIOp),
        }
        if op in table:
            cls = table[op][0 if f else 1]
            return self.add(cls(a, b))
        if op == "div":
            assert f, "integer true division is lowered through float"
            return self.add(arith.DivfOp(a, b))
        if op == "pow":
            k = constant_of(b)
            if k is not None and float(k) in (1.0, 2.0, 3.0, 4.0):
                # Small integer exponents are products: what pow returns for them, and vectorisable.
                n = int(k)
                if n == 1:
                    return a
                sq = self.binary("mul", a, a, dtype)
                if n == 2:
                    return sq
                return self.binary("mul", sq, a if n == 3 else sq, dtype)
            if f:
                return self.add(xmath.PowFOp(a, b))
            # Integer powers go through float64: exact while the result fits in 53 bits.
            f64 = np.dtype(np.float64)
            r = self.add(xmath.PowFOp(self.cast(a, dtype, f64), self.cast(b, dtype, f64)))
            return self.cast(r, f64, dtype)
        raise ValueError(op)

    def compare(self, op: str, a: SSAValue, b: SSAValue, dtype: np.dtype) -> SSAValue:
        """An i1 comparison; NaN compares false except for ``ne``, as in NumPy."""
        kind = np.dtype(dtype).kind
        if kind == "f":
            pred = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}[op]
            return self.add(arith.CmpfOp(a, b, pred))
        s = "u" if kind == "u" else "s"
        pred = {"lt": f"{s}lt", "le": f"{s}le", "gt": f"{s}gt", "ge": f"{s}ge", "eq": "eq", "ne": "ne"}[op]
        return self.add(arith.CmpiOp(a, b, pred))

    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(arith.SelectOp(c, a, b))

    def unary_math(self, fn: str, x: SSAValue) -> SSAValue:
        cls = {
            "exp": xmath.ExpOp,
            "log": xmath.LogOp,
            "sqrt": xmath.SqrtOp,
            "tanh": xmath.TanhOp,
            "sin": xmath.SinOp,
            "cos": xmath.CosOp,
            "abs": xmath.AbsFOp,
        }[fn]
        return self.add(cls(x))

    def neg(self, x: SSAValue, dtype: np.dtype) -> SSAValue:
        if np.dtype(dtype).kind == "f":
            return self.add(arith.NegfOp(x))
        return self.binary("sub", self.const(0, dtype), x, dtype)

    def clamp(self, x: SSAValue, lo: float, hi: float, dtype: np.dtype) -> SSAValue:
        x = self.binary("max", x, self.const(lo, dtype), dtype)
        return self.binary("min", x, self.const(hi, dtype), dtype)

    # -- builtins ------------------------------------------------------------

    def builtin(
        self,
        fn: str,
        args: Sequence[SSAValue],
        dtypes: Sequence[np.dtype],
        out: np.dtype,
        params: dict[str, object],
    ) -> SSAValue:
        """The scalar value of map builtin ``fn`` (te.map's ``fn``) producing ``out``."""
        out = np.dtype(out)
        if fn in ("lt", "le", "gt", "ge", "eq", "ne"):
            common = np.result_type(*dtypes)
            a, b = (self.cast(v, d, common) for v, d in zip(args, dtypes))
            return self.bool_to_i8(self.compare(fn, a, b, common))
        if fn in ("and", "or"):
            a, b = (self.nonzero(v, d) for v, d in zip(args, dtypes))
            cls = arith.AndIOp if fn == "and" else arith.OrIOp
            return self.bool_to_i8(self.add(cls(a, b)))
        if fn == "not":
            nz = self.nonzero(args[0], dtypes[0])
            return self.bool_to_i8(self.add(arith.XOrIOp(nz, self.add(arith.ConstantOp(IntegerAttr(1, I1))))))
        if fn == "step":
            return self.bool_to_i8(self.compare("gt", args[0], self.const(0, dtypes[0]), dtypes[0]))
        if fn == "select":
            c = self.nonzero(args[0], dtypes[0])
            a, b = (self.cast(v, d, out) for v, d in zip(args[1:], dtypes[1:]))
            return self.select(c, a, b)
        # Everything else computes in the output dtype.
        xs = [self.cast(v, d, out) for v, d in zip(args, dtypes)]
        if fn in ("add", "sub", "mul", "pow"):
            return self.binary(fn, xs[0], xs[1], out)
        if fn == "div":
            return self.binary("div", xs[0], xs[1], out)
        if fn in ("maximum", "minimum"):
            return self.binary("max" if fn == "maximum" else "min", xs[0], xs[1], out)
        if fn == "neg":
            return self.neg(xs[0], out)
        if fn == "relu":
            return self.binary("max", xs[0], self.const(0, out), out)
        if fn == "abs":
            if out.kind == "f":
                return self.unary_math("abs", xs[0])
            return self.binary("max", xs[0], self.neg(xs[0], out), out)
        if fn in ("exp", "log", "sqrt", "tanh", "sin", "cos"):
            return self.unary_math(fn, xs[0])
        if fn == "sig":
            return self.sig(xs[0], xs[1] if len(xs) > 1 else None, params.get("T"), out)
        if fn == "gelu":
            return self.gelu(xs[0], out)
        if fn == "gelu_grad":
            return self.gelu_grad(xs[0], out)
        raise ValueError(f"no scalar lowering for {fn}")

    def logistic(self, z: SSAValue, dtype: np.dtype) -> SSAValue:
        """1 / (1 + exp(-z)), which saturates cleanly (exp overflow gives 0, not NaN)."""
        one = self.const(1.0, dtype)
        e = self.unary_math("exp", self.neg(z, dtype))
        return self.binary("div", one, self.binary("add", one, e, dtype), dtype)

    def hard_step(self, x: SSAValue, dtype: np.dtype) -> SSAValue:
        gt = self.compare("gt", x, self.const(0.0, dtype), dtype)
        return self.select(gt, self.const(1.0, dtype), self.const(0.0, dtype))

    def sig(self, x: SSAValue, t: SSAValue | None, t_static: object, dtype: np.dtype) -> SSAValue:
        if t is None:
            if t_static is None or float(t_static) == 0.0:  # type: ignore[arg-type]
                return self.hard_step(x, dtype)
            z = self.binary("div", x, self.const(float(t_static), dtype), dtype)  # type: ignore[arg-type]
            return self.logistic(z, dtype)
        zero_t = self.compare("eq", t, self.const(0.0, dtype), dtype)
        soft = self.logistic(self.binary("div", x, t, dtype), dtype)
        return self.select(zero_t, self.hard_step(x, dtype), soft)

    def _gelu_inner(self, x: SSAValue, dtype: np.dtype) -> tuple[SSAValue, SSAValue]:
        c = math.sqrt(2.0 / math.pi)
        xc = self.clamp(x, -10.0, 10.0, dtype)  # tanh is exactly ±1 beyond; avoids x³ overflow
        x3 = self.binary("mul", self.binary("mul", xc, xc, dtype), xc, dtype)
        inner = self.binary(
            "mul",
            self.const(c, dtype),
            self.binary("add", xc, self.binary("mul", self.const(0.044715, dtype), x3, dtype), dtype),
            dtype,
        )
        return xc, self.unary_math("tanh", inner)

    def gelu(self, x: SSAValue, dtype: np.dtype) -> SSAValue:
        _, t = self._gelu_inner(x, dtype)
        xm = self.binary("max", x, self.const(-10.0, dtype), dtype)  # gelu(-inf) = -0, not NaN
        half_x = self.binary("mul", self.const(0.5, dtype), xm, dtype)
        return self.binary("mul", half_x, self.binary("add", self.const(1.0, dtype), t, dtype), dtype)

    def gelu_grad(self, x: SSAValue, dtype: np.dtype) -> SSAValue:
        c = math.sqrt(2.0 / math.pi)
        xc, t = self._gelu_inner(x, dtype)
        one = self.const(1.0, dtype)
        left = self.binary("mul", self.const(0.5, dtype), self.binary("add", one, t, dtype), dtype)
        sech2 = self.binary("mul", self.binary("sub", one, t, dtype), self.binary("add", one, t, dtype), dtype)
        dinner = self.binary(
            "mul",
            self.const(c, dtype),
            self.binary(
                "add",
                one,
                self.binary("mul", self.const(3 * 0.044715, dtype), self.binary("mul", xc, xc, dtype), dtype),
                dtype,
            ),
            dtype,
        )
        right = self.binary(
            "mul",
            self.binary("mul", self.const(0.5, dtype), xc, dtype),
            self.binary("mul", sech2, dinner, dtype),
            dtype,
        )
        return self.binary("add", left, right, dtype)


def constant_of(v: SSAValue) -> float | int | None:
    """The value of an ``arith.constant`` scalar, else None."""
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr | IntegerAttr):
        return op.value.value.data
    return None


def float_type(dtype: np.dtype) -> AnyFloat:
    return te.element_type(dtype)  # type: ignore[return-value]
