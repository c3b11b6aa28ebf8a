"""``mathx``: the scalar op the expansions need beyond upstream MLIR's ``math`` dialect (``mathx.ldexp``).

Every expansion ends by scaling a polynomial's value by 2^n. As arith code that
is nine integer and float ops (two halves, each a power of two built from
exponent bits); AVX-512 does it in one ``vscalefpd``, which LLVM's
``llvm.ldexp`` lowers to and vectorises. Upstream's ``math`` dialect has no
such op (``math.fpowi`` is x^n), so it lives here, below the dialects layer,
where the emitter can build it; the loop→llvm lowering picks the native form
or the two-half one per host.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import Float32Type, Float64Type, i32
from xdsl.ir import Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure


@irdl_op_definition
class LdexpOp(IRDLOperation):
    """``x · 2^n`` rounded once, for a float32/float64 ``x`` and an i32 ``n`` (C's ``ldexp``).

    Domain: the native lowering (``llvm.ldexp``) and the interpreters are exact
    for every n; the portable lowering multiplies by 2^(n>>1) and then by
    2^(n - (n>>1)), which is the same whenever |n| ≤ 2044 (float32: 252) and
    x·2^(n>>1) is exact, as in every expansion that emits it (their x is a
    polynomial's value near 1). Keep other uses inside that domain.
    """

    name = "mathx.ldexp"
    T: ClassVar = VarConstraint("T", base(Float64Type) | base(Float32Type))
    x = operand_def(T)
    n = operand_def(i32)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$x `,` $n attr-dict `:` type($x)"

    def __init__(self, x: SSAValue | Operation, n: SSAValue | Operation):
        super().__init__(operands=[x, n], result_types=[SSAValue.get(x).type])


MathX = Dialect("mathx", [LdexpOp], [])
"""Load beside xDSL's ``Math`` to parse ``mathx`` ops."""

SCALAR_DIALECTS = ("arith", "math", "mathx")
"""The dialects of kernel bodies' scalar computations: pure, region-free ops on scalars."""


def is_scalar_op(op: Operation) -> bool:
    """Whether ``op`` is a scalar computation (an arith, math or mathx op): pure, no memory, no regions."""
    return op.name.split(".", 1)[0] in SCALAR_DIALECTS and not op.regions


__all__ = ["SCALAR_DIALECTS", "LdexpOp", "MathX", "is_scalar_op"]
