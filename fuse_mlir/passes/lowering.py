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

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.ir import make_context, verify_module
from fuse_mlir.passes.instruments import VerifyEach
from fuse_mlir.passes.levels import lowering_spec, module_level
from fuse_mlir.passes.pipeline import Hooks, PassFailure, Pipeline
from fuse_mlir.passes.registry import get_pass
from fuse_mlir.targets import PARALLEL_MIN, get_target


def lower_to(module: ModuleOp, level: str, ctx: Context | None = None, hooks: Hooks | None = None) -> ModuleOp:
    """Lower ``module`` in place to ``level`` (from the level its ops show) and return it; ``hooks`` (another
    pipeline's instruments) run around each lowering."""
    spec = lowering_spec(module_level(module), level)
    return Pipeline.parse(spec, source=f"<lowering to {level}>", hooks=hooks).run(module, ctx) if spec else module


def lower_to_loop(
    te_module: ModuleOp,
    *,
    target: str = "llvm",
    opt_level: str | int = "O2",
    strict: bool = False,
    donate: Sequence[str] = (),
    pipeline: str | None = None,
    verify: bool | str | None = None,
    check_bounds: bool = False,
) -> ModuleOp:
    """A copy of a tensor_eq module lowered to the loop level by ``target``'s pipeline (:meth:`Target.pipeline`).

    A user ``pipeline`` (pass pipeline text, e.g. ``"dedup,fuse"``) replaces the
    target's: each pass runs at its own level (the module is lowered to it
    first) and whatever lowering remains to the loop level follows. ``verify``
    (default: the ``FUSE_VERIFY`` environment variable) is true to verify the
    result, or ``"each"`` to verify after every pass and lowering, so that the
    error names the pass that built invalid IR. Verification is off by
    default: it costs about a third of the lowering time, and the passes build
    valid IR by construction (the tests verify every pipeline's output).
    ``check_bounds`` builds checked: every load and store tests its positions
    (``passes/transforms/check_bounds.py``).
    """
    mode = verify_mode(verify)
    module = te_module.clone()
    ctx = make_context()
    spec = pipeline if pipeline is not None else get_target(target).pipeline(opt_level, strict=strict, donate=donate)
    pipe = Pipeline.parse(spec, source=f"<{target} {opt_level}>" if pipeline is None else "<pipeline>")
    hooks = pipe.hooks
    if mode == "each":
        pipe.instrument(VerifyEach())
    pipe.run(module, ctx)
    lower_to(module, "loop", ctx, hooks)
    if check_bounds:
        Pipeline.parse("check-bounds", source="<checked build>", hooks=hooks).run(module, ctx)
    if mode == "end":
        verify_module(
            module, "IR does not verify after the pipeline and the lowering to loop (FUSE_VERIFY=each names the pass): "
        )
    return module


def verify_mode(verify: bool | str | None) -> str | None:
    """What to verify: None (nothing), ``"end"`` (the result) or ``"each"`` (after every pass), from the argument
    or, when it is None, from ``FUSE_VERIFY`` (unset, empty or ``0``: nothing; ``1`` or ``end``; ``each``)."""
    if verify is None:
        verify = os.environ.get("FUSE_VERIFY", "0")
        if verify in ("", "0"):
            return None
    if verify == "each":
        return "each"
    if isinstance(verify, str) and verify not in ("1", "end"):
        raise FuseError(
            f"unknown verification {verify!r}: expected True, False, 'end' or 'each' (FUSE_VERIFY: 0, 1, end or each)"
        )
    return "end" if verify else None


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
    the lowering raises on a malformed loop module (a ``ValueError``) comes through unchanged. Under
    ``FUSE_VERIFY=each`` the result is verified too (:func:`verify_mode`).
    """
    pass_ = get_pass("lower-loop-to-llvm").cls(  # type: ignore[call-arg]
        strict=strict,
        threads=threads,
        parallel_min=parallel_min,
        native_ldexp=native_ldexp,
        streaming_min_bytes=streaming_min_bytes,
    )
    module = loop_module.clone()
    pipe = Pipeline([pass_])
    if verify_mode(None) == "each":
        pipe.instrument(VerifyEach())
    try:
        pipe.run(module)
    except PassFailure as failure:
        raise failure.error from None
    return module
