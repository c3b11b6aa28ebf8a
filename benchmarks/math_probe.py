"""Native kernels applying one ``math`` op elementwise, to measure the expansions (a harness for tests and benchmarks,
kept out of the library).

Some ops the expansions cover (``math.expm1``, ``math.log1p``) are not
reachable from a ``.fuse`` program, so the kernel is built from the program
``Z[i] = exp(X[i])`` (or ``pow(X[i], Y[i])``) with its math op swapped for
the requested one at the elemwise level, then lowered like any program:
expand-math (unless ``strict``), loop level, native code.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects import math as xmath
from xdsl.ir import Operation

from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.ir import make_context
from fuse_mlir.passes.conversions.lower_ew_to_loop import LowerEwToLoop
from fuse_mlir.passes.conversions.lower_te_to_ew import LowerTeToEw
from fuse_mlir.passes.transforms.expand_math import ExpandMath

UNARY: dict[str, type[Operation]] = {
    "exp": xmath.ExpOp,
    "expm1": xmath.ExpM1Op,
    "log": xmath.LogOp,
    "log1p": xmath.Log1pOp,
    "tanh": xmath.TanhOp,
    "sin": xmath.SinOp,
    "cos": xmath.CosOp,
    "sqrt": xmath.SqrtOp,
}


def math_kernel(
    fn: str, dtype: np.dtype | type, strict: bool = False, native_ldexp: bool | None = None
) -> Callable[..., np.ndarray]:
    """A native function computing ``fn`` (a key of :data:`UNARY`, or ``"pow"``) over 1-D arrays of
    ``dtype``; ``strict`` keeps the libm call instead of the expansion; ``native_ldexp`` picks how the
    expansions' final scale lowers (None: the host's choice)."""
    from fuse_mlir.program import Program

    binary = fn == "pow"
    if not binary and fn not in UNARY:
        raise ValueError(f"no math kernel for {fn!r} (known: pow, {', '.join(UNARY)})")
    src = "Z[i] = pow(X[i], Y[i])" if binary else "Z[i] = exp(X[i])"
    names = ("X", "Y") if binary else ("X",)
    module = Program(src).lower({n: dtype for n in names}).module.clone()
    ctx = make_context()
    LowerTeToEw().apply(ctx, module)
    if not binary:
        (old,) = [op for op in module.walk() if isinstance(op, xmath.ExpOp)]
        new = UNARY[fn](old.operands[0])
        block = old.parent_block()
        assert block is not None
        block.insert_op_before(new, old)
        old.results[0].replace_all_uses_with(new.results[0])
        old.detach()
        old.erase()
    if not strict:
        ExpandMath().apply(ctx, module)
    LowerEwToLoop().apply(ctx, module)
    module.verify()
    kernel = NativeKernel(module, strict=strict, ldexp=native_ldexp)

    def run(*arrays: np.ndarray) -> np.ndarray:
        return kernel(list(arrays))[0]

    run.kernel = kernel  # type: ignore[attr-defined]
    return run
