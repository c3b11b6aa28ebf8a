"""The scalar, index and pointer types the lowerings build with, defined once for every level.

The loop and LLVM lowerings, the bounds checks and the scalar emitters all need the same handful of types;
they import them from here rather than each spelling ``IntegerType(64)`` again. (``mathlib`` sits below the
dialects layer and keeps its own.)
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import Float32Type, Float64Type, IndexType, IntegerType

I1 = IntegerType(1)
"""A boolean as arith and LLVM compare it."""
I8 = IntegerType(8)
"""A boolean as a buffer stores it (one byte)."""
I32 = IntegerType(32)
I64 = IntegerType(64)
INDEX = IndexType()
F32 = Float32Type()
F64 = Float64Type()
PTR = llvm.LLVMPointerType()
"""LLVM's opaque pointer."""

__all__ = ["F32", "F64", "I1", "I8", "I32", "I64", "INDEX", "PTR"]
