"""Targets: what each backend wants from the optimisation passes, and its named pipelines.

A target says which IR level its backend consumes, whether kernels may be
fused (elementwise chains and siblings, reductions into their producers,
gathers into their consumers), whether buffers may be reused in place, and
the operand limit of a fused kernel. The passes (``fuse``, ``inplace``, ...)
take a ``target`` option and ask this object rather than hard-coding a
backend: the LLVM target fuses aggressively and reuses buffers; Torch and
JAX get unfused, inplace-free graphs (their own compilers fuse); Numba gets
fused loop nests without inplace (its arrays are its own).

Each target has an ``O0`` pipeline (no fusion, no inplace) and an ``O2``
pipeline (the default), registered as ``<target>-O0`` / ``<target>-O2`` and
returned by :meth:`Target.pipeline`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from fuse_mlir.diagnostics import FuseError

OPT_LEVELS = ("O0", "O2")
PARALLEL_MIN = 1 << 16
"""The llvm target's default least work (iterations of a nest's loops) for which a parallel region is split across
threads (``lower-loop-to-llvm``; ``FUSE_PARALLEL_MIN`` overrides it at run time; here so that the runtime reads it
without importing the lowering)."""

CHUNKS_PER_THREAD = 16
"""The most chunks a split parallel region has per thread. The pool's threads claim chunks as they finish the
previous one, so a thread slowed down by others on its core (another library's spinning workers, another
process) hands its share to the rest instead of making the whole region wait for it. The threads finish at
most one chunk apart, so chunks are small: with 16 per thread the tail is at most 1/16 of a thread's share."""

CHUNK_WORK_MIN = 1 << 14
"""The least work (innermost iterations) of a chunk: a region has ``work / CHUNK_WORK_MIN`` chunks, at least
one per thread and at most ``CHUNKS_PER_THREAD`` per thread, so the cost of claiming one (an atomic add and a
call, tens of nanoseconds) stays far below its work."""


def checked_build(value: bool | None = None) -> bool:
    """Whether to build checked: ``value`` when given, else the ``FUSE_CHECK_BOUNDS`` environment variable."""
    if value is not None:
        return bool(value)
    return os.environ.get("FUSE_CHECK_BOUNDS", "0").strip().lower() not in ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Target:
    """A backend's capabilities as the passes see them."""

    name: str
    level: str  # the IR level the backend consumes: "tensor_eq" or "loop"
    fuse: bool = False  # elementwise chains and sibling kernels into one multi-output kernel
    fuse_reductions: bool = False  # reductions into the loop nest of the elementwise code feeding them
    fuse_gathers: bool = False  # gathers into their consumer (sum(x[idx]) never builds x[idx])
    inplace: bool = False  # a kernel may write its result into a dead input's buffer
    vector_math: bool = False  # transcendental functions expanded into vectorisable IR
    fuse_rows: bool = False  # parallel loop nests over the same rows into one nest of per-row phases
    pipeline_rows: bool = False  # a row nest's first phase runs one row ahead, inside its second phase's loop
    block_checks: bool = False  # run-time checks of a block of iterations at once (vectorisable gathers)
    streaming_stores: bool = False  # stores whose nest never reads them back may bypass the caches
    max_operands: int = 32  # inputs plus tables of one fused kernel
    runs_pipeline: bool = True  # its backend runs the target's pipelines (registered as <name>-O0 / <name>-O2)
    description: str = ""

    def pipeline(self, opt_level: str | int = "O2", *, strict: bool = False, donate: Sequence[str] = ()) -> str:
        """The pass pipeline (text) that brings a tensor_eq module to this target's level.

        ``O2`` dedups, fuses and plans in-place buffers as the target allows;
        ``O0`` only lowers. Transcendentals are expanded into vectorisable code
        unless ``strict`` (libm and IEEE order). ``donate`` names inputs the
        in-place planner may overwrite.
        """
        opt = normalise_opt_level(opt_level)
        if self.level == "tensor_eq":
            return "canonicalize,cse" if opt == "O0" else "canonicalize,cse,dce,dedup"
        steps = ["contract-order", "lower-te-to-ew"]
        if opt == "O2":
            steps.append("dedup")
            if self.fuse or self.fuse_reductions or self.fuse_gathers:
                steps.append(f"fuse{{target={self.name} max-operands={self.max_operands}}}")
                steps.append("dedup")
            if self.inplace:
                donated = f" donate={','.join(donate)}" if donate else ""
                steps.append(f"inplace{{target={self.name}{donated}}}")
        if self.vector_math and not strict:
            steps.append("expand-math")
        steps.append("lower-ew-to-loop")
        if opt == "O2" and self.fuse_rows:
            steps.append("fuse-rows")
        if opt == "O2" and self.pipeline_rows:
            steps.append("pipeline-rows")
        if opt == "O2" and self.block_checks:
            steps.append("block-checks")
        if opt == "O2" and self.streaming_stores:
            steps.append("streaming-stores")
        return ",".join(steps)


def normalise_opt_level(opt_level: str | int) -> str:
    """``0``/``"O0"`` → ``"O0"``; ``2``/``"O2"`` (and 1, 3, as in compilers) → ``"O2"``; anything else is an error."""
    text = str(opt_level).upper().removeprefix("O")
    if text == "0":
        return "O0"
    if text in ("1", "2", "3"):
        return "O2"
    raise FuseError(f"unknown optimisation level {opt_level!r} (use 0 or 2, 'O0' or 'O2')")


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "llvm",
            "loop",
            fuse=True,
            fuse_reductions=True,
            fuse_gathers=True,
            inplace=True,
            vector_math=True,
            fuse_rows=True,
            pipeline_rows=True,
            block_checks=True,
            streaming_stores=True,
            description="native code through llvmlite: aggressive fusion, inplace buffer reuse, vector math",
        ),
        Target(
            "numba",
            "loop",
            fuse=True,
            fuse_reductions=True,
            fuse_gathers=True,
            inplace=False,
            vector_math=False,
            description="the loop level rendered as Python for numba.njit: fused loop nests, no inplace",
        ),
        Target("torch", "tensor_eq", description="torch operations (eager or torch.compile): no fusion, no inplace"),
        Target("jax", "tensor_eq", description="jax.numpy inside jax.jit: no fusion, no inplace (XLA fuses)"),
        Target(
            "reference",
            "tensor_eq",
            runs_pipeline=False,  # the oracle interprets the module exactly as lowered: no pass, no pipeline
            description="the NumPy reference interpreter: no passes at all (it is the oracle)",
        ),
    )
}


def get_target(name: str) -> Target:
    """The target ``name``; an unknown name is a FuseError listing the known ones."""
    try:
        return TARGETS[name]
    except KeyError:
        raise FuseError(f"unknown target '{name}' (targets: {', '.join(TARGETS)})") from None
