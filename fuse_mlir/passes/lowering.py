"""Lowering drivers: bring a module down the registered levels (:mod:`.levels`) through the pass pipeline.

``lower_to`` reaches any level; ``lower_to_loop`` is what the native backends run on a tensor_eq module (the
target's optimisation pipeline, then the remaining lowerings, optionally the checked build);
``lower_to_llvm`` runs the last lowering, loop to the llvm dialect, with the backend's settings. Every lowering
goes through :class:`~fuse_mlir.passes.pipeline.Pipeline` and the pass registry, so a backend depends on these
functions and never on a lowering's module.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.ir import make_context
from fuse_mlir.passes.levels import lowering_spec, module_level
from fuse_mlir.passes.pipeline import PassFailure, Pipeline
from fuse_mlir.passes.registry import get_pass
from fuse_mlir.targets import PARALLEL_MIN, get_target


def lower_to(module: ModuleOp, level: str, ctx: Context | None = None) -> ModuleOp:
    """Lower ``module`` in place to ``level`` (from the level its ops show) and return it."""
    spec = lowering_spec(module_level(module), level)
    return Pipeline.parse(spec, source=f"<lowering to {level}>").run(module, ctx) if spec else module


def lower_to_loop(
    te_module: ModuleOp,
    *,
    target: str = "llvm",
    opt_level: str | int = "O2",
    strict: bool = False,
    donate: Sequence[str] = (),
    pipeline: str | None = None,
    verify: bool | None = None,
    check_bounds: bool = False,
) -> ModuleOp:
    """A copy of a tensor_eq module lowered to the loop level by ``target``'s pipeline (:meth:`Target.pipeline`).

    A user ``pipeline`` (pass pipeline text, e.g. ``"dedup,fuse"``) replaces the
    target's: each pass runs at its own level (the module is lowered to it
    first) and whatever lowering remains to the loop level follows. The result
    is verified when ``verify`` is true (default: when the ``FUSE_VERIFY``
    environment variable is set and not ``0``): verification costs about a
    third of the lowering time, and the passes build valid IR by construction
    (the tests verify every pipeline's output). ``check_bounds`` builds
    checked: every load and store tests its positions (``passes/transforms/check_bounds.py``).
    """
    module = te_module.clone()
    ctx = make_context()
    spec = pipeline if pipeline is not None else get_target(target).pipeline(opt_level, strict=strict, donate=donate)
    Pipeline.parse(spec, source=f"<{target} {opt_level}>" if pipeline is None else "<pipeline>").run(module, ctx)
    lower_to(module, "loop", ctx)
    if check_bounds:
        Pipeline.parse("check-bounds", source="<checked build>").run(module, ctx)
    if verify if verify is not None else os.environ.get("FUSE_VERIFY", "0") not in ("", "0"):
        module.verify()
    return module


def lower_to_llvm(
    loop_module: ModuleOp,
    *,
    strict: bool = False,
    threads: int = 1,
    parallel_min: int = PARALLEL_MIN,
    native_ldexp: bool = False,
    streaming_min_bytes: int = 0,
) -> ModuleOp:
    """A copy of a loop-level module lowered to the llvm dialect by the registered ``lower-loop-to-llvm`` pass.

    This is the last level of the pipeline, run through :class:`~fuse_mlir.passes.pipeline.Pipeline` like every
    other lowering (so the native runtime depends on the pass registry, not on the lowering's module). An error
    the lowering raises on a malformed loop module (a ``ValueError``) comes through unchanged.
    """
    pass_ = get_pass("lower-loop-to-llvm").cls(  # type: ignore[call-arg]
        strict=strict,
        threads=threads,
        parallel_min=parallel_min,
        native_ldexp=native_ldexp,
        streaming_min_bytes=streaming_min_bytes,
    )
    module = loop_module.clone()
    try:
        Pipeline([pass_]).run(module)
    except PassFailure as failure:
        raise failure.error from None
    return module
