"""Execution modes beyond a single pass (LANGUAGE.md §5): streaming time steps, Monte Carlo projection, demand
queries, and the run trace that ``runner.explain()`` shows. ``Program.compile`` calls :func:`configure_runner`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.modes.runner import ResolvedProgram, Runner

MODES = ("single", "fixpoint", "streaming")
PROJECTIONS = ("exact", "monte_carlo")


def configure_runner(
    program: ResolvedProgram,
    backend: str,
    out_root: Path,
    executor: Any,
    *,
    mode: str,
    projection: str,
    samples: int | None,
    seed: int | None,
    profile: bool,
) -> Runner:
    """The runner for ``mode`` with the projection strategy and profiling the caller asked for."""
    if mode not in MODES:
        raise FuseError(f"unknown mode '{mode}' (available: {', '.join(MODES)})")
    if projection not in PROJECTIONS:
        raise FuseError(f"unknown projection '{projection}' (available: {', '.join(PROJECTIONS)})")
    rewrite = None
    if projection == "monte_carlo":
        from fuse_mlir.modes.monte_carlo import MonteCarlo

        rewrite = MonteCarlo.from_options(samples, seed)
    elif samples is not None or seed is not None:
        raise FuseError("samples= and seed= apply to projection='monte_carlo'")
    if mode == "streaming":
        from fuse_mlir.modes.streaming import StreamingRunner

        return StreamingRunner.create(program, backend, out_root, executor, rewrite=rewrite, profile=profile)
    return Runner(program, backend, out_root, executor, mode=mode, profile=profile, rewrite=rewrite)
