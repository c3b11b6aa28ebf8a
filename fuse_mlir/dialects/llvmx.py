"""Upstream MLIR ``llvm`` ops that xDSL 0.74's llvm dialect lacks (float<->int casts, ``llvm.fence``).

They keep their upstream names (``llvm.fptosi``, ...), so the printed text is
valid MLIR; load :data:`LLVMX` into a context beside xDSL's ``LLVM`` dialect to
parse them.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    StringAttr,
    VectorType,
)
from xdsl.dialects.llvm import GenericCastOp
from xdsl.ir import Attribute, Dialect
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

FENCE_ORDERINGS = ("acquire", "release", "acq_rel", "seq_cst")

LOOP_DEPTH = "fuse.loop_depth"
"""Discardable attribute of an outlined loop nest's ``llvm.func`` (an ``i64``): how deeply its loops nest. The
JIT optimises a deep nest less (:func:`fuse_mlir.backends.llvm.jit.unit_opt_level`); the emitted text omits it."""


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


@irdl_op_definition
class FenceOp(IRDLOperation):
    """``llvm.fence <ordering>``: a memory fence (``seq_cst`` also orders streaming stores: ``mfence`` on x86)."""

    name = "llvm.fence"
    ordering = prop_def(StringAttr)

    def __init__(self, ordering: str):
        super().__init__(properties={"ordering": StringAttr(ordering)})

    def verify_(self) -> None:
        if self.ordering.data not in FENCE_ORDERINGS:
            raise VerifyException(f"llvm.fence: ordering must be one of {', '.join(FENCE_ORDERINGS)}")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.ordering.data}")

    @classmethod
    def parse(cls, parser: Parser) -> FenceOp:
        ordering = parser.parse_identifier()
        if ordering not in FENCE_ORDERINGS:
            parser.raise_error(f"llvm.fence: expected one of {', '.join(FENCE_ORDERINGS)}")
        return cls(ordering)


LLVMX = Dialect("llvmx", [FPToSIOp, FPToUIOp, UIToFPOp, FenceOp], [])


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
