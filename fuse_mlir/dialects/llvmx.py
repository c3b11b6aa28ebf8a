"""Upstream MLIR ``llvm`` ops that xDSL 0.74's llvm dialect lacks (float<->int casts).

They keep their upstream names (``llvm.fptosi``, ...), so the printed text is
valid MLIR; load :data:`LLVMX` into a context beside xDSL's ``LLVM`` dialect to
parse them.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, IntegerType, VectorType
from xdsl.dialects.llvm import GenericCastOp
from xdsl.ir import Attribute, Dialect
from xdsl.irdl import irdl_op_definition


@irdl_op_definition
class FPToSIOp(GenericCastOp):
    """Float to signed integer (``fptosi``)."""

    name = "llvm.fptosi"


@irdl_op_definition
class FPToUIOp(GenericCastOp):
    """Float to unsigned integer (``fptoui``)."""

    name = "llvm.fptoui"


@irdl_op_definition
class UIToFPOp(GenericCastOp):
    """Unsigned integer to float (``uitofp``)."""

    name = "llvm.uitofp"


LLVMX = Dialect("llvmx", [FPToSIOp, FPToUIOp, UIToFPOp], [])


def mangle(t: Attribute) -> str:
    """An LLVM intrinsic's type suffix: ``f64``, ``f32``, ``f16``, ``bf16``, ``i32``, ``v4f64``, ...

    Overloaded intrinsics are declared per type (``llvm.exp.f64`` and
    ``llvm.exp.f32`` are two functions), which xDSL's own translator misses.
    """
    if isinstance(t, VectorType):
        return f"v{t.get_shape()[0]}{mangle(t.element_type)}"
    if isinstance(t, Float64Type):
        return "f64"
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float16Type):
        return "f16"
    if isinstance(t, BFloat16Type):
        return "bf16"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    raise ValueError(f"cannot mangle an intrinsic name for type {t}")
