"""Upstream MLIR ``llvm`` ops that xDSL 0.74's llvm dialect lacks (float<->int casts).

They keep their upstream names (``llvm.fptosi``, ...), so the printed text is
valid MLIR; load :data:`LLVMX` into a context beside xDSL's ``LLVM`` dialect to
parse them.
"""

from __future__ import annotations

from xdsl.dialects.llvm import GenericCastOp
from xdsl.ir import Dialect
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
