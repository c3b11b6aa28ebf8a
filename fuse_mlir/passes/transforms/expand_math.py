"""Expand transcendental ``math`` ops into branch-free arith code that LLVM vectorises (libm calls are scalar).

``math.exp``, ``expm1``, ``log``, ``log1p``, ``tanh``, ``sin``, ``cos`` and
``powf`` on float32/float64 are replaced by the implementations in
:mod:`fuse_mlir.mathlib` (range reduction, polynomial, selects for the
special cases; float32 computed in float64 and rounded once, except exp, expm1,
tanh and log, which have native float32 forms). Builtins that
are compositions (``sig`` = 1/(1+exp(-x)), ``gelu`` through tanh) vectorise
through these. ``math.sqrt`` is left alone: it lowers to ``llvm.sqrt``,
correctly rounded and vectorisable already. A ``powf`` whose result only
feeds float→integer casts (integer ``pow``, computed in float64) keeps libm's
pow, which is exact whenever the integer result is representable. Accuracy
and ranges: ``docs/vector-math.md``.

The ``strict`` floating-point policy skips this pass and keeps libm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, Float64Type, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from fuse_mlir.mathlib import EXPANSIONS, NATIVE32, Emitter
from fuse_mlir.mathlib.emitter import F64
from fuse_mlir.passes.registry import register_pass


def _feeds_only_int_casts(op: Operation) -> bool:
    uses = list(op.results[0].uses)
    return bool(uses) and all(isinstance(u.operation, arith.FPToSIOp | arith.FPToUIOp) for u in uses)


def expand(op: Operation) -> bool:
    """Replace one transcendental ``math`` op by its arith expansion; False (untouched) when it has none
    (other ops, types other than float32/64, integer pow)."""
    builder = EXPANSIONS.get(op.name)
    t = op.results[0].type if builder is not None and len(op.results) == 1 else None
    if builder is None or not isinstance(t, Float32Type | Float64Type):
        return False
    if op.name == "math.powf" and _feeds_only_int_casts(op):
        return False
    single = isinstance(t, Float32Type)
    if single and op.name in NATIVE32:
        em = Emitter(single=True)
        result = NATIVE32[op.name](em, list(op.operands))
    else:
        em = Emitter()
        args = [em.op(arith.ExtFOp(v, F64)) if single else v for v in op.operands]
        result = builder(em, args, single)
        if single:
            result = em.op(arith.TruncFOp(result, t))
    em.replace(op, result)
    return True


@register_pass
@dataclass(frozen=True)
class ExpandMath(ModulePass):
    """Expand exp, expm1, log, log1p, tanh, sin, cos and pow into vectorisable arith code (range reduction,
    polynomial, selects for special cases; within 1–2 ulp, see docs/vector-math.md)."""

    name = "expand-math"
    level: ClassVar[str] = "any"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in list(op.walk()):
            if inner.name in EXPANSIONS:
                expand(inner)


__all__ = ["ExpandMath", "expand"]
