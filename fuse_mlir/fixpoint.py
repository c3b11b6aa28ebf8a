"""Fixpoint mode and temperature schedules: compile options in, per-run reports out.

``Program.compile(mode="fixpoint", max_iters=, atol=, rtol=, temperature=,
semi_naive=)`` turns its keywords into :class:`~fuse_mlir.frontend.lower.LowerOptions`
with :func:`lower_options`. Each recursive group lowers to a ``te.fixpoint``
whose iteration count and converged flag come back from the backend as
hidden exports (``label#iterations``, ``label#converged``);
:func:`collect_run` takes them out of the exports, warns about groups that
hit ``max_iters`` and records a :class:`RunInfo` (``runner.last_run``).

Temperature schedules give ``sig(x)`` calls without a T, in the equations of
one tensor, the T of each fixpoint iteration (docs/modes.md):

- a number: constant T;
- ``("linear", t0, t1, n)``: from t0 at iteration 0 to t1 at iteration n, then t1;
- a list of ``(iteration, T)`` pairs: piecewise constant, each T from its
  iteration on (the first T also before it);
- a callable ``f(iteration) -> T``, evaluated on the host for every iteration
  at compile time (the table is compiled in, so the native loop stays native).

T = 0 is the hard step. Single-pass groups use the schedule at iteration 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from fuse_mlir.diagnostics import FuseError, option_hint, warning
from fuse_mlir.frontend.lowered import MODES, STATUS_SEP, Lowered, LowerOptions

Schedule = float | int | tuple | Sequence[tuple[int, float]] | Callable[[int], float]


def schedule_table(name: str, schedule: Schedule, length: int) -> tuple[float, ...]:
    """The T of each iteration ``0 .. length-1`` for one tensor's schedule (a FuseError when malformed)."""
    what = f"temperature schedule for {name}"
    if isinstance(schedule, bool):
        raise FuseError(f"{what}: expected a number, ('linear', t0, t1, n), [(iteration, T), ...] or a callable")
    if isinstance(schedule, int | float | np.integer | np.floating):
        values = [float(schedule)] * length
    elif isinstance(schedule, tuple) and schedule and schedule[0] == "linear":
        if len(schedule) != 4 or not all(isinstance(x, int | float) for x in schedule[1:]):
            raise FuseError(f"{what}: a linear ramp is ('linear', t0, t1, n) with numbers t0, t1 and an iteration n")
        _, t0, t1, n = cast(tuple[str, float, float, float], schedule)
        if n < 0 or int(n) != n:
            raise FuseError(f"{what}: the ramp length n must be a non-negative integer (got {n})")
        values = [float(t1) if n == 0 or it >= n else t0 + (t1 - t0) * it / n for it in range(length)]
    elif isinstance(schedule, list | tuple) and not isinstance(schedule, str):
        points = []
        for p in schedule:
            if not (isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], int) and p[0] >= 0):
                raise FuseError(f"{what}: a piecewise schedule is a list of (iteration, T) pairs, got {p!r}")
            points.append((int(p[0]), float(p[1])))
        if not points:
            raise FuseError(f"{what}: a piecewise schedule needs at least one (iteration, T) pair")
        points.sort()
        values = []
        for it in range(length):
            t = points[0][1]
            for start, v in points:
                if start <= it:
                    t = v
            values.append(t)
    elif callable(schedule):
        values = []
        for it in range(length):
            try:
                v = schedule(it)
            except Exception as e:  # the user's function failed: report it as a compile error
                raise FuseError(f"{what}: the schedule raised {type(e).__name__} at iteration {it}: {e}") from e
            if not isinstance(v, int | float | np.integer | np.floating) or isinstance(v, bool):
                raise FuseError(f"{what}: the schedule returned {v!r} at iteration {it}, not a number")
            values.append(float(v))
    else:
        raise FuseError(f"{what}: expected a number, ('linear', t0, t1, n), [(iteration, T), ...] or a callable")
    for it, v in enumerate(values):
        if not math.isfinite(v) or v < 0:
            raise FuseError(f"{what}: T must be a finite number >= 0, got {v} at iteration {it}")
    return tuple(values)


def lower_options(
    defined: Sequence[str],
    mode: str = "single",
    max_iters: int = 32,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    temperature: Mapping[str, Schedule] | None = None,
    semi_naive: bool = True,
) -> LowerOptions:
    """Validate the compile keywords of fixpoint mode and temperature; ``defined`` are the program's tensors."""
    if mode not in MODES:
        raise FuseError(f"unknown mode '{mode}' (available: {', '.join(MODES)})")
    if isinstance(max_iters, bool) or not isinstance(max_iters, int) or max_iters < 1:
        raise FuseError(f"max_iters must be an integer >= 1 (got {max_iters!r})")
    for key, v in (("atol", atol), ("rtol", rtol)):
        if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise FuseError(f"{key} must be a finite number >= 0 (got {v!r})")
    tables = []
    for name, sched in sorted((temperature or {}).items()):
        if name not in defined:
            raise FuseError(
                f"temperature schedule for '{name}', which no equation defines "
                f"(defined tensors: {', '.join(defined) or 'none'})"
            )
        tables.append((name, schedule_table(name, sched, max_iters if mode == "fixpoint" else 1)))
    return LowerOptions(mode, max_iters, float(atol), float(rtol), tuple(tables), bool(semi_naive))


@dataclass(frozen=True)
class GroupRun:
    """How one recursive group's iteration went in a run."""

    label: str
    names: tuple[str, ...]
    iterations: int
    converged: bool
    max_iters: int


@dataclass
class RunInfo:
    """What the last run of a runner did: per recursive group its iterations, and the T used per tensor."""

    groups: list[GroupRun] = field(default_factory=list)
    temperature: dict[str, list[float]] = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        """Whether every recursive group converged (True when there is none)."""
        return all(g.converged for g in self.groups)

    @property
    def iterations(self) -> dict[str, int]:
        """Body runs per group label."""
        return {g.label: g.iterations for g in self.groups}

    def explain(self) -> str:
        """A readable report: one line per recursive group, then the temperatures per tensor and iteration."""
        lines = []
        for g in self.groups:
            state = "converged" if g.converged else f"NOT converged (max_iters={g.max_iters})"
            lines.append(f"fixpoint {g.label}: {g.iterations} iteration{'s' * (g.iterations != 1)}, {state}")
        for name, ts in self.temperature.items():
            shown = ", ".join(f"{t:g}" for t in ts)
            lines.append(f"temperature {name}: T per iteration = [{shown}]")
        return "\n".join(lines) if lines else "single pass (no recursive group, no temperature schedule)"


def collect_run(lowered: Lowered, options: LowerOptions, exports: dict[str, np.ndarray]) -> RunInfo:
    """Remove the fixpoint status exports from ``exports`` and report them; warn about groups that hit max_iters."""
    info = RunInfo()
    member: dict[str, int] = {}
    for fp in lowered.fixpoints:
        iters = int(exports.pop(f"{fp.label}{STATUS_SEP}iterations"))
        conv = bool(exports.pop(f"{fp.label}{STATUS_SEP}converged"))
        info.groups.append(GroupRun(fp.label, fp.names, iters, conv, fp.max_iters))
        for n in fp.names:
            member[n] = iters
        if not conv:
            warning(
                f"fixpoint of {fp.label} did not converge in max_iters={fp.max_iters} iterations; "
                f"the results are the last iterate (raise it: {option_hint('max_iters', 2 * fp.max_iters)}; "
                "or loosen atol/rtol)"
            )
    for name, table in options.temperature:
        info.temperature[name] = list(table[: max(1, member.get(name, 1))])
    return info
