"""The runner of a compiled program in single and fixpoint mode: input checks, the call, sinks, explain().

:class:`Runner` sits below :mod:`fuse_mlir.program` (which builds it) and beside the other modes (streaming
subclasses it); it knows a program only through :class:`ProgramLowering`, the one method it calls.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fuse_mlir.diagnostics import FuseRuntimeError
from fuse_mlir.frontend.resolve import Resolved
from fuse_mlir.lowered import InputSpec, Lowered, LowerOptions, ProgramLowering, ShapeDispatch, coerce_input
from fuse_mlir.modes.fixpoint import RunInfo, collect_run
from fuse_mlir.stages import FRONTEND_STAGES, StageTimes, record


class ResolvedProgram(ProgramLowering, Protocol):
    """A program as the modes see it (``Program``): also its resolved form and a copy with another one."""

    resolved: Resolved

    def with_resolved(self, resolved: Resolved) -> ResolvedProgram:
        """A copy of the program whose resolved equations are ``resolved`` (its lowerings not shared)."""
        ...


@dataclass
class Runner:
    """A compiled program: call it with the inputs as keyword arguments; returns the exports.

    ``runner(X=x, out={"Y": y})`` writes export ``Y`` into the caller's array
    ``y`` (checked: an export, writeable, C-contiguous, its dtype and shape, no
    overlap with an input) and returns it as ``Y``; a program with an input
    named ``out`` takes its buffers through ``run(inputs, out=...)``.

    Inputs named as in a call that ran once take a direct path on later calls
    when the backend offers one (``executor.bind``) and the arrays have that
    call's dtypes and ranks: the name checks it passed are not redone; the
    backend still checks every array.
    """

    program: ProgramLowering
    backend: str
    out_root: Path
    executor: Any = None
    donate: frozenset[str] = frozenset()
    options: LowerOptions | None = None
    last_run: RunInfo | None = None  # after each run: per recursive group iterations/convergence, temperatures
    _specs: dict[str, Any] | None = field(default=None, repr=False)
    mode: str = "single"
    profile: bool = False
    rewrite: Any = field(default=None, repr=False)  # (lowered, arrays) -> (lowered, arrays): Monte Carlo projection
    _last: Any = field(default=None, repr=False)  # the latest call: a modes.trace.LastRun, or the direct path's
    # (lowered, inputs, seconds), turned into one when asked for
    _demand: Any = field(default=None, repr=False)  # modes.demand.DemandCache
    _fast: dict[tuple, tuple[Any, Lowered]] = field(default_factory=dict, repr=False)  # names -> (call, lowered)
    _stages: dict[str, float] = field(default_factory=dict, repr=False)  # compile_stats, less the frontend's
    # The backend's native entry for the latest plain signature (executor.bind_native) and its lowering: it takes
    # the keyword dict itself and checks every array natively, returning None to decline.
    _native: tuple[Any, Lowered, Any] | None = field(default=None, repr=False)  # (call, lowering, entry)
    _fast_version: int = field(default=0, repr=False)  # the program's sources_version the direct paths were bound at
    # lowering (or a planned variant's module) -> ShapePlans, GemmGate or None, held weakly (a lowering or module
    # that is gone takes its entry with it; ids are reused)
    _plans: weakref.WeakKeyDictionary[Any, Any] = field(default_factory=weakref.WeakKeyDictionary, repr=False)

    def __call__(self, /, **inputs: Any) -> dict[str, np.ndarray]:
        native = self._native
        if native is not None and self._fast_version == self.program.sources_version:
            result = native[0](inputs)
            if result is not None:
                self._last = (native[1], inputs, native[2])  # the entry times itself; read when explain() asks
                return result
        out = None
        if "out" in inputs and "out" not in self.input_specs():
            out = inputs.pop("out")
        entry = self._fast.get(tuple(inputs))
        if entry is not None and self._fast_version != self.program.sources_version:
            self._fast.clear()  # the program's sources were replaced: its lowerings changed
            self._native = entry = None
        if entry is not None:
            fast, lowered = entry
            t0 = time.perf_counter()
            result = fast(inputs, out)
            if result is not None:
                # Recorded raw (a tuple costs nothing next to the call); explain() builds the record from it.
                self._last = (lowered, inputs, time.perf_counter() - t0)
                return result
        return self.run(inputs, out=out)

    def query(self, name: str, select: Mapping[str | int, int | slice] | None = None, /, **inputs: Any) -> np.ndarray:
        """Evaluate only what tensor ``name`` depends on, optionally selecting positions of its axes.

        ``name`` and ``select`` are positional only, so an input may be called ``name`` or ``select``.

        ``select`` maps an axis (index name or position) to an int (the axis
        goes) or a slice; ``inputs`` need only hold what ``name`` depends on.
        Results are cached until an input changes (docs/modes.md, demand).
        """
        from fuse_mlir.modes.demand import DemandCache

        if self._demand is None:
            self._demand = DemandCache(self)
        return self._demand.query(name, select or {}, inputs)

    def clear_query_cache(self) -> None:
        """Forget cached ``query`` results (needed only after changing a large input array in place)."""
        if self._demand is not None:
            self._demand.clear()

    def explain(self, format: str = "text") -> Any:
        """The trace of the latest call: compile and run time apart, per group iterations, time, kernels,
        FLOPs, bytes (text or json); every call updates it, the direct path of repeated calls included."""
        last = self._last_run()
        if last is None:
            raise FuseRuntimeError("explain() describes the latest run: call the runner first")
        return last.trace().render(format)

    def _last_run(self) -> Any:
        """The latest call's :class:`~fuse_mlir.modes.trace.LastRun`, built here from what :meth:`_record` kept
        (or the direct path's (lowered, inputs, seconds)): building it needs the module, hence xDSL."""
        if isinstance(self._last, tuple):
            from fuse_mlir.modes.trace import LastRun

            if len(self._last) == 3:  # the direct path: (lowered, inputs, seconds)
                lowered, inputs, seconds = self._last
                if isinstance(lowered, ShapeDispatch):  # a planned module's: the variant its latest call ran
                    assert lowered.ran is not None
                    lowered = lowered.ran[1]
                if not isinstance(seconds, float):  # the native entry's: its latest call is this one
                    seconds = seconds.seconds
                input_shapes, compile_seconds, shapes, op_seconds = _shapes(inputs), 0.0, None, None
            else:
                lowered, input_shapes, seconds, compile_seconds, shapes, op_seconds = self._last
            contractions = self._contractions(lowered, input_shapes)
            self._last = LastRun(
                lowered.module,
                input_shapes,
                lowered.sources,
                seconds,
                self.backend,
                self.mode,
                shapes,
                op_seconds,
                compile_seconds=compile_seconds,
                contractions=contractions,
            )
        return self._last

    def _warm(self) -> bool:
        """Whether lowerings go through the warm start index (the backend says so: llvm with its caches on)."""
        return bool(getattr(self.executor, "warm_start", False))

    def input_names(self) -> list[str]:
        """The names of the inputs a call takes, in the program's order."""
        return list(self.input_specs())

    def run(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        write_sinks: bool = True,
        out: Mapping[str, Any] | None = None,
    ) -> dict[str, np.ndarray]:
        """Validate ``inputs``, run the program, write its sinks, and return the exports by name.

        ``out`` maps export names to caller arrays that receive them (see the class docstring).
        """
        from fuse_mlir.io.sinks import write_sink

        given = dict(inputs or {})
        times = StageTimes(self.program.filename)  # the stages of this call's compile (none when cached)
        lowered_before = self.program.frontend_seconds.get("lower-to-te", 0.0)
        with times:  # active through execute's prepare (the backend's compile)
            arrays = self._validate(given)  # the first call lowers here (the input signature)
            lowered = self.program.lower({k: v.dtype for k, v in arrays.items()}, self.options, warm=self._warm())
            t0 = time.perf_counter()
            planned = self._shape_plans(lowered)
            if planned is not None:
                lowered = planned.lowered_for(arrays)  # the contraction orders for these shapes (one lookup when seen)
            plan_seconds = time.perf_counter() - t0  # planning a new shape's products is compile time too
            # 0 once this dtype signature has been lowered and these shapes planned
            lower_seconds = self.program.frontend_seconds.get("lower-to-te", 0.0) - lowered_before + plan_seconds
            result = self.execute(lowered, arrays, out, compile_seconds=lower_seconds, stages=times)
        self.last_run = info = collect_run(lowered, self.options or LowerOptions(), result.exports)
        last = self._last_run() if info.groups else None
        if last is not None:
            last.iterations = {n: g.iterations for g in info.groups for n in (g.label, *g.names)}
            last.group_extra = {
                n: {"converged": g.converged, "max_iters": g.max_iters}
                for g in info.groups
                for n in (g.label, *g.names)
            }
            last.notes = info.explain().splitlines()
        if write_sinks:
            for path, value, loc in result.sinks:
                write_sink(path, value, self.out_root, loc=loc)
        self._remember(given, lowered, planned)
        return result.exports

    def _shape_plans(self, lowered: Lowered) -> Any:
        """The per-shape contraction planner of ``lowered`` (:mod:`fuse_mlir.passes.transforms.contract_plan`), or None where
        the target orders products itself (einsum backends) or the module has no product whose plan depends on the
        shapes (three or more factors, or a GEMM whose result orientation matters). A lowering from the warm start
        index builds its IR here only when it has such products (``planned``)."""
        # Kept per lowering, not per module: replace_sources makes new lowerings of the same module, and a plan's
        # variants carry the source arrays of the lowering it was made for. A warm lowering's gate stays under it
        # when its module is built later.
        if lowered in self._plans:
            return self._plans[lowered]
        warm = not lowered.has_module
        if warm and lowered.planned is False:
            return None
        key = lowered
        if key not in self._plans:
            from fuse_mlir.targets import TARGETS

            target = TARGETS.get(self.backend)
            single = self.mode == "single" and (self.options is None or self.options.mode == "single")
            loop_level = target is not None and target.level == "loop" and self.rewrite is None and single
            plans: Any = None
            if loop_level and warm and lowered.gemm_sites is not None:
                from fuse_mlir.modes.gemm_gate import GemmGate

                plans = GemmGate(lowered, lowered.gemm_sites)
            elif loop_level:
                from fuse_mlir.passes.transforms.contract_plan import ShapePlans

                plans = ShapePlans(lowered) if ShapePlans.needed(lowered) else None
            self._plans[key] = plans
            if plans is not None:
                plans.on_variant = lambda v: self._plans.__setitem__(v.module, plans)
        return self._plans[key]

    def _contractions(self, lowered: Lowered, shapes: dict[str, tuple[int, ...]]) -> Any:
        """For explain(): a function giving the call's contraction orders and BLAS calls (loop-level backends)."""
        from fuse_mlir.targets import TARGETS

        target = TARGETS.get(self.backend)
        if target is None or target.level != "loop":
            return None
        plans = self._plans.get(lowered)
        if plans is None and lowered.has_module:
            plans = self._plans.get(lowered.module)  # a planned variant's module (on_variant)

        def rows() -> list[dict[str, Any]]:
            from fuse_mlir.passes.transforms.contract_order import explain_contractions

            plan = plans.plan_for(shapes) if plans is not None else None
            return explain_contractions(lowered.module, shapes, lowered.sources, plan)

        return rows

    def execute(
        self,
        lowered: Lowered,
        arrays: dict[str, np.ndarray],
        out: Mapping[str, Any] | None = None,
        *,
        compile_seconds: float = 0.0,
        stages: StageTimes | None = None,
    ) -> Any:
        """Run one lowered module on validated arrays (after the mode's rewrite), recording it for explain().

        Compiling and running are timed apart: ``compile_seconds`` (the
        caller's lowering) plus the backend's ``prepare(lowered)`` where it has
        one (the llvm backend compiles or loads its kernel there) count as
        compile time; only the call itself counts as run time. The compile's
        stages (``stages``, collected here around ``prepare``) are added to
        :attr:`compile_stats`.
        """
        if self.rewrite is not None:
            lowered, arrays = self.rewrite(lowered, arrays)
        shapes = op_seconds = None
        prepare = getattr(self.executor, "prepare", None)
        own = StageTimes(self.program.filename) if stages is None else None  # else the caller's, already active
        if prepare is not None and not (self.profile and self.backend == "reference"):
            collector = own if own is not None else stages
            before = collector.total  # type: ignore[union-attr]
            with own if own is not None else contextlib.nullcontext():  # the collector is active in here
                t0 = time.perf_counter()
                prepare(lowered)
                seconds = time.perf_counter() - t0
                rest = seconds - (collector.total - before)  # type: ignore[union-attr]
                if rest > 1e-3:  # the backend's own work between the stages it reports (cache keys, tables, ...)
                    record("backend-other", rest)
            compile_seconds += seconds
        self._add_stages(own if own is not None else stages)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        if self.profile and self.backend == "reference" and out is None:
            from fuse_mlir.modes.trace import run_profiled

            result, shapes, op_seconds = run_profiled(lowered.module, arrays, lowered.sources)
        elif out is not None and not getattr(self.executor, "supports_out", False):
            result = self._run_then_fill(lowered, arrays, out)
        elif out is not None:
            result = self.executor(lowered, arrays, out=out)
        else:
            result = self.executor(lowered, arrays)
        self._record(lowered, arrays, time.perf_counter() - t0, compile_seconds, shapes, op_seconds)
        return result

    @property
    def compile_stats(self) -> dict[str, float]:
        """Seconds per compile stage over every compile this runner did, run time apart (docs/runtime.md).

        Stages in the order they first ran: ``parse`` and ``resolve`` (when the
        program was made), ``lower-to-te``, each pass by name (``fuse``,
        ``dedup``, ``lower-ew-to-loop``, ...), and for the llvm backend
        ``lower-loop-to-llvm``, ``emit-llvm-ir``, ``llvm-parse``, ``llvm-optimize``,
        ``llvm-codegen`` (or ``llvm-load`` for a kernel from the disk cache).
        A call that compiled nothing adds nothing.
        """
        return {**self.program.frontend_seconds, **self._stages}

    def _add_stages(self, times: StageTimes) -> None:
        for name, seconds in times.stages.items():
            if name not in FRONTEND_STAGES:  # the program keeps those (its lowering may have run before this call)
                self._stages[name] = self._stages.get(name, 0.0) + seconds

    def _record(
        self,
        lowered: Lowered,
        arrays: Mapping[str, Any],
        seconds: float,
        compile_seconds: float,
        shapes: dict[Any, object] | None = None,
        op_seconds: dict[Any, float] | None = None,
    ) -> None:
        """Remember this call for explain(): cheap (the trace, and the module it needs, are built when asked for)."""
        self._last = (lowered, _shapes(arrays), seconds, compile_seconds, shapes, op_seconds)

    def _run_then_fill(self, lowered: Lowered, arrays: dict[str, np.ndarray], out: Mapping[str, Any]) -> Any:
        """``out`` for a backend that allocates its own results: check, run, copy in."""
        from fuse_mlir.backends.outputs import check_out, fill_out

        checked = check_out(out, dict.fromkeys(lowered.exports), arrays.values())
        result = self.executor(lowered, arrays)
        for name, buf in checked.items():
            result.exports[name] = fill_out(buf, result.exports[name], name)
        return result

    def _remember(self, given: dict[str, Any], lowered: Lowered, planned: Any = None) -> None:
        """Offer later calls with these input names the backend's direct path for this signature.

        One entry per tuple of names (in call order); the direct path itself
        declines (returns None) arrays of another dtype or rank, and the latest
        signature that ran through here replaces the entry.
        """
        bind = getattr(self.executor, "bind", None)
        plain = self.mode == "single" and self.rewrite is None and not self.profile
        if self.options is not None and self.options.mode != "single":
            plain = False  # fixpoint runs report per-group iterations from the general path
        if (
            bind is None
            or not plain
            or not all(type(v) is np.ndarray and v.dtype.kind in "iuf" for v in given.values())
        ):
            return
        fast = bind(lowered)
        if fast is not None:
            if self._fast_version != self.program.sources_version:
                self._fast.clear()
                self._native = None
                self._fast_version = self.program.sources_version
            bind_native = getattr(self.executor, "bind_native", None)
            native = bind_native(lowered) if bind_native is not None else None
            if planned is None:
                self._fast[tuple(given)] = (fast, lowered)
                self._native = (native.call, lowered, native) if native is not None else None
                return
            # A module planned per shape: the call's shapes pick the planned variant, and its own calls run it (the
            # dispatch stands in for the lowering until explain() asks which variant the latest call ran).
            planned.calls.add(given, lowered, fast)
            self._fast[tuple(given)] = (planned.calls.dispatch, planned.calls)
            if native is None:
                self._native = None
                return
            planned.native_calls.add(given, lowered, native.call, native)
            self._native = (planned.native_calls.dispatch, planned.native_calls, planned.native_calls)

    def input_specs(self) -> dict[str, InputSpec]:
        """Each input a call takes, by name: its rank, dtype and where the program first reads it (so tools
        such as the fuzzer, or a caller building arrays, need not parse the program)."""
        specs = self._specs
        if specs is None:
            specs = self._specs = {s.name: s for s in self.program.lower(None, self.options, warm=self._warm()).inputs}
        return specs

    def _validate(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        specs = self.input_specs()
        unknown = sorted(set(inputs) - set(specs))
        if unknown:
            raise FuseRuntimeError(
                f"unknown input{'s' * (len(unknown) > 1)} {', '.join(unknown)}; "
                f"the program's inputs are: {', '.join(specs) or 'none'}"
            )
        missing = [n for n in specs if n not in inputs]
        if missing:
            spec = specs[missing[0]]
            raise FuseRuntimeError(f"missing input{'s' * (len(missing) > 1)} {', '.join(missing)}", spec.loc)
        out = {name: coerce_input(name, value, specs[name]) for name, value in inputs.items()}
        for name in self.donate & out.keys():
            # A donated buffer may be overwritten: never one the caller cannot write, nor one another input reads.
            arr = out[name]
            if not arr.flags.writeable or any(n != name and np.shares_memory(arr, other) for n, other in out.items()):
                out[name] = arr.copy()
        return out


def _shapes(arrays: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {k: np.shape(v) for k, v in arrays.items()}
