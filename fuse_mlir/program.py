"""The library API: ``Program(source).compile(...)`` returns a runner; ``runner(**inputs)`` runs it.

A program is parsed and resolved once. Lowering to tensor_eq happens per input
dtype signature (like ``jax.jit`` tracing): the same program called with
float32 inputs and with float64 inputs gets two specialisations, each cached.
Extents are symbolic in the IR, so new shapes of the same ranks reuse a
specialisation.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError
from fuse_mlir.frontend import ast as A
from fuse_mlir.frontend.lower import Lowered, LowerOptions, load_sources, lower_program
from fuse_mlir.frontend.parser import parse, recursion_room
from fuse_mlir.frontend.resolve import Resolved, explain_term, free_indices, resolve, split_factors, split_terms

if TYPE_CHECKING:
    from fuse_mlir.fixpoint import RunInfo


def print_module(module: ModuleOp, generic: bool = False) -> str:
    """MLIR text of a module (custom format unless ``generic``)."""
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue() + "\n"


class Program:
    """A parsed and resolved `.fuse` program."""

    def __init__(self, source: str, filename: str = "<string>", base_dir: str | Path | None = None):
        self.source = source
        self.filename = filename
        if base_dir is None:
            base_dir = Path(filename).parent if filename not in ("<string>", "<stdin>") else Path.cwd()
        self.base_dir = Path(base_dir)
        with recursion_room():  # the resolver walks expressions recursively (see parser.MAX_OPERATORS)
            self.ast: A.Module = parse(source, filename)
            self.resolved: Resolved = resolve(self.ast, self.base_dir)
        self._sources: dict[str, np.ndarray] | None = None
        self._lowered: dict[tuple, Lowered] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> Program:
        """Read a program from a file; its sources and imports resolve against the file's folder."""
        from fuse_mlir.paths import read_text_file

        text = read_text_file(path, "program")  # a FuseError for odd paths (NUL, too long, not a regular file)
        p = Path(path)
        return cls(text, str(p), p.parent)

    # -- lowering ----------------------------------------------------------

    def source_arrays(self) -> dict[str, np.ndarray]:
        """The arrays of the program's source files (loaded once)."""
        if self._sources is None:
            self._sources = load_sources(self.resolved)
        return self._sources

    def replace_sources(self, arrays: Mapping[str, Any]) -> None:
        """Use ``arrays`` instead of the files that the program loads those tensors from (``fuse run --input``).

        Each name must be a tensor the program loads from a file, and each
        array must have the rank the program gives it; the other sources are
        loaded from their files as usual (a replaced file is never read).
        Lowerings made before the call are dropped.
        """
        from fuse_mlir.io.sources import load_source

        by_name = {s.lhs.name: s for s in self.resolved.sources}
        unknown = sorted(set(arrays) - set(by_name))
        if unknown:
            raise FuseError(
                f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not loaded from a file by the program "
                f"(its file sources: {', '.join(by_name) or 'none'})"
            )
        loaded: dict[str, np.ndarray] = {}
        for name, s in by_name.items():
            rank = len(s.lhs.indices) if s.lhs.indices is not None else None
            if name not in arrays:
                loaded[name] = load_source(s.path, self.base_dir, rank=rank, loc=s.loc, name=name)
                continue
            arr = np.asarray(arrays[name])
            if arr.dtype == np.bool_:
                arr = arr.astype(np.int8)
            if rank is not None and arr.ndim != rank:
                raise FuseError(
                    f"the replacement for {name} must have rank {rank}, as the program's {name} has, "
                    f"but has shape {arr.shape}",
                    s.loc,
                )
            loaded[name] = np.ascontiguousarray(arr)
        self._sources = loaded
        self._lowered.clear()

    def lower(self, input_dtypes: Mapping[str, Any] | None = None, options: LowerOptions | None = None) -> Lowered:
        """The tensor_eq module for inputs of the given dtypes (float64 for any not named) and lowering options."""
        items = input_dtypes.items() if input_dtypes else ()
        key = tuple(sorted((k, np.dtype(v)) for k, v in items))  # dtypes hash by value
        if options is not None and options.mode == "single" and not options.temperature:
            options = None  # the plain single-pass lowering: one cache entry for it
        hit = self._lowered.get((key, options))
        if hit is None:
            with recursion_room():  # the lowering walks expressions recursively (see parser.MAX_OPERATORS)
                hit = lower_program(self.resolved, dict(key), self.source_arrays(), options)
            if options is not None and options.mode == "fixpoint" and options.semi_naive:
                from fuse_mlir.passes.semi_naive import semi_naive

                semi_naive(hit.module)
            self._lowered[(key, options)] = hit
        return hit

    def to_mlir(self, input_dtypes: Mapping[str, Any] | None = None, generic: bool = False) -> str:
        """The tensor_eq module as MLIR text."""
        return print_module(self.lower(input_dtypes).module, generic)

    # -- compile -----------------------------------------------------------

    def compile(
        self,
        backend: str = "llvm",
        *,
        out_root: str | Path | None = None,
        opt_level: str | int = 2,
        donate: Sequence[str] = (),
        mode: str = "single",
        max_iters: int = 32,
        atol: float = 1e-6,
        rtol: float = 1e-5,
        temperature: Mapping[str, Any] | None = None,
        semi_naive: bool = True,
        projection: str = "exact",
        samples: int | None = None,
        seed: int | None = None,
        profile: bool = False,
        **options: Any,
    ) -> Runner:
        """A runner for ``backend`` (``reference`` or ``llvm``); sinks write under ``out_root`` (default: cwd).

        ``opt_level`` picks the target's named pipeline (0: no fusion or
        inplace; 2: the default). ``donate`` names inputs whose arrays the
        program may overwrite (as in JAX: don't read them after the call).
        ``mode`` is ``single``, ``fixpoint`` (iterate recursive groups to
        convergence: ``max_iters``, ``atol``, ``rtol``; boolean groups by
        semi-naive delta rules unless ``semi_naive=False``) or ``streaming``
        (virtual time ``*t``: each call is one step); for the torch backend,
        ``mode="eager"`` or ``"compile"`` (torch.compile) goes to the backend
        and the run mode is single; ``temperature`` maps
        tensors to schedules for their ``sig(x)`` calls without T;
        ``projection="monte_carlo"`` with ``samples`` and ``seed`` estimates
        sum/mean/max projections from samples; ``profile=True`` times each
        group where the backend allows (``runner.explain()``; all in
        docs/modes.md). ``options`` go to the backend (for llvm:
        ``strict=True`` keeps IEEE evaluation order and libm calls,
        ``cache=False`` skips the in-memory and disk kernel caches,
        ``reuse_outputs=True`` returns results in buffers the next call
        overwrites; docs/runtime.md).
        """
        from fuse_mlir.backends import get_backend
        from fuse_mlir.fixpoint import lower_options
        from fuse_mlir.modes import configure_runner

        if mode in BACKEND_MODES:  # torch's execution mode (eager / torch.compile), not a run mode
            options["mode"], mode = mode, "single"

        defined = list(dict.fromkeys(eq.lhs.name for eq in self.resolved.equations))
        lowering = lower_options(defined, mode, max_iters, atol, rtol, temperature, semi_naive)
        donated = (donate,) if isinstance(donate, str) else tuple(donate)
        executor = get_backend(backend, opt_level=opt_level, donate=donated, **options)
        root = Path(out_root) if out_root is not None else Path.cwd()
        runner = configure_runner(
            self, backend, root, executor, mode=mode, projection=projection, samples=samples, seed=seed, profile=profile
        )
        runner.donate = frozenset(donated)
        runner.options = lowering
        return runner

    # -- explain -----------------------------------------------------------

    def explain(self, format: str = "text") -> str | list[dict[str, Any]]:
        """Per-term index tables (``format`` text or json): what each term joins, projects and broadcasts.

        ``projected`` are the indices the term itself projects with the
        equation's operator; ``calls`` lists what each call works along
        (``axis``, or the two axes a one-argument ``concat`` ``flattens`` and
        the index they go ``into``) and the indices it ``projected`` inside
        before that.
        """
        with recursion_room():  # free_indices walks expressions recursively (see parser.MAX_OPERATORS)
            return self._explain(format)

    def _explain(self, format: str) -> str | list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for eq in self.resolved.equations:
            lhs = [i.name for i in eq.lhs.indices or () if isinstance(i, A.IndexName)]
            dotted = next((i.name for i in eq.lhs.indices or () if isinstance(i, A.IndexName) and i.dotted), None)
            for sign, term in split_terms(eq.rhs):
                factors = split_factors(term)
                counts: dict[str, int] = {}
                for f in factors:
                    for n in free_indices(f):
                        counts[n] = counts.get(n, 0) + 1
                names, calls = explain_term(term, lhs, dotted)
                rows.append(
                    {
                        "equation": f"{eq.loc}",
                        "lhs": eq.lhs.name,
                        "projection": eq.projection,
                        "term": len([r for r in rows if r["equation"] == f"{eq.loc}"]),
                        "sign": sign,
                        "indices": names,
                        "joined": [n for n, c in counts.items() if c > 1],
                        "projected": [n for n in names if n not in lhs],
                        "broadcast": [n for n in lhs if n not in names],
                        "calls": calls,
                    }
                )
        if format == "json":
            return rows
        if format != "text":
            raise ValueError("format must be 'text' or 'json'")
        lines = [f"{'equation':<24} {'lhs':<10} {'proj':<5} {'joined':<14} {'projected':<14} {'broadcast':<14} calls"]
        for r in rows:
            lines.append(
                f"{r['equation']:<24} {r['lhs']:<10} {r['projection']:<5} {','.join(r['joined']) or '-':<14} "
                f"{','.join(r['projected']) or '-':<14} {','.join(r['broadcast']) or '-':<14} "
                f"{'; '.join(_call_text(c) for c in r['calls']) or '-'}"
            )
        return "\n".join(lines)


def _call_text(call: dict[str, Any]) -> str:
    """One call of an explain row: ``softmax along o, h projected inside`` / ``concat flattens h,d into x``."""
    if "flattens" in call:
        text = f"{call['call']} flattens {','.join(call['flattens'])} into {call['into']}"
    elif call.get("axis"):
        text = f"{call['call']} along {call['axis']}"
    else:
        text = call["call"]
    if call["projected"]:
        text += f", {','.join(call['projected'])} projected inside"
    return text


_SUPPORTED_KINDS = "biuf"

BACKEND_MODES = ("eager", "compile")
"""``compile(mode=...)`` values that belong to the backend (torch) rather than to the run (single, fixpoint,
streaming)."""


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

    program: Program
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
    _plans: dict[int, Any] = field(default_factory=dict, repr=False)  # id(module) -> ShapePlans or None

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        out = None
        if "out" in inputs and "out" not in self._input_specs():
            out = inputs.pop("out")
        entry = self._fast.get(tuple(inputs))
        if entry is not None:
            fast, lowered = entry
            t0 = time.perf_counter()
            result = fast(inputs, out)
            if result is not None:
                # Recorded raw (a tuple costs nothing next to the call); explain() builds the record from it.
                self._last = (lowered, inputs, time.perf_counter() - t0)
                return result
        return self.run(inputs, out=out)

    def query(self, name: str, select: Mapping[str | int, int | slice] | None = None, **inputs: Any) -> np.ndarray:
        """Evaluate only what tensor ``name`` depends on, optionally selecting positions of its axes.

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
        """The latest call's :class:`~fuse_mlir.modes.trace.LastRun` (built here for a call of the direct path)."""
        if isinstance(self._last, tuple):
            lowered, inputs, seconds = self._last
            self._record(lowered, inputs, seconds, 0.0)
        return self._last

    def input_names(self) -> list[str]:
        return list(self._input_specs())

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
        from fuse_mlir.fixpoint import collect_run
        from fuse_mlir.io.sinks import write_sink

        given = dict(inputs or {})
        arrays = self._validate(given)
        t0 = time.perf_counter()
        lowered = self.program.lower({k: v.dtype for k, v in arrays.items()}, self.options)
        planned = self._shape_plans(lowered)
        if planned is not None:
            lowered = planned.lowered_for(arrays)  # the contraction orders for these shapes (one lookup when seen)
        lower_seconds = time.perf_counter() - t0  # ~0 once this dtype signature has been lowered
        result = self.execute(lowered, arrays, out, compile_seconds=lower_seconds)
        self.last_run = info = collect_run(lowered, self.options or LowerOptions(), result.exports)
        if info.groups and self._last is not None:
            self._last.iterations = {n: g.iterations for g in info.groups for n in (g.label, *g.names)}
            self._last.group_extra = {
                n: {"converged": g.converged, "max_iters": g.max_iters}
                for g in info.groups
                for n in (g.label, *g.names)
            }
            self._last.notes = info.explain().splitlines()
        if write_sinks:
            for path, value, loc in result.sinks:
                write_sink(path, value, self.out_root, loc=loc)
        self._remember(given, lowered, planned)
        return result.exports

    def _shape_plans(self, lowered: Lowered) -> Any:
        """The per-shape contraction planner of ``lowered`` (:mod:`fuse_mlir.passes.contract_plan`), or None where
        the target orders products itself (einsum backends) or the module has no product of three or more factors."""
        key = id(lowered.module)
        if key not in self._plans:
            from fuse_mlir.passes.contract_plan import ShapePlans
            from fuse_mlir.targets import TARGETS

            target = TARGETS.get(self.backend)
            single = self.mode == "single" and (self.options is None or self.options.mode == "single")
            loop_level = target is not None and target.level == "loop" and self.rewrite is None and single
            plans = ShapePlans(lowered) if loop_level and ShapePlans.needed(lowered) else None
            self._plans[key] = plans
            if plans is not None:
                plans.on_variant = lambda v: self._plans.__setitem__(id(v.module), plans)
        return self._plans[key]

    def execute(
        self,
        lowered: Lowered,
        arrays: dict[str, np.ndarray],
        out: Mapping[str, Any] | None = None,
        *,
        compile_seconds: float = 0.0,
    ) -> Any:
        """Run one lowered module on validated arrays (after the mode's rewrite), recording it for explain().

        Compiling and running are timed apart: ``compile_seconds`` (the
        caller's lowering) plus the backend's ``prepare(lowered)`` where it has
        one (the llvm backend compiles or loads its kernel there) count as
        compile time; only the call itself counts as run time.
        """
        from fuse_mlir.modes.trace import run_profiled

        if self.rewrite is not None:
            lowered, arrays = self.rewrite(lowered, arrays)
        shapes = op_seconds = None
        prepare = getattr(self.executor, "prepare", None)
        if prepare is not None and not (self.profile and self.backend == "reference"):
            t0 = time.perf_counter()
            prepare(lowered)
            compile_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        if self.profile and self.backend == "reference" and out is None:
            result, shapes, op_seconds = run_profiled(lowered.module, arrays, lowered.sources)
        elif out is not None and not getattr(self.executor, "supports_out", False):
            result = self._run_then_fill(lowered, arrays, out)
        elif out is not None:
            result = self.executor(lowered, arrays, out=out)
        else:
            result = self.executor(lowered, arrays)
        self._record(lowered, arrays, time.perf_counter() - t0, compile_seconds, shapes, op_seconds)
        return result

    def _record(
        self,
        lowered: Lowered,
        arrays: Mapping[str, Any],
        seconds: float,
        compile_seconds: float,
        shapes: dict[Any, object] | None = None,
        op_seconds: dict[Any, float] | None = None,
    ) -> None:
        """Remember this call for explain(): cheap (the trace itself is built when asked for)."""
        from fuse_mlir.modes.trace import LastRun

        self._last = LastRun(
            lowered.module,
            {k: np.shape(v) for k, v in arrays.items()},
            lowered.sources,
            seconds,
            self.backend,
            self.mode,
            shapes,
            op_seconds,
            compile_seconds=compile_seconds,
            contractions=self._contractions(lowered, arrays),
        )

    def _contractions(self, lowered: Lowered, arrays: Mapping[str, Any]) -> Any:
        """For explain(): a function giving the call's contraction orders and BLAS calls (loop-level backends)."""
        from fuse_mlir.targets import TARGETS

        target = TARGETS.get(self.backend)
        if target is None or target.level != "loop":
            return None
        plans = self._plans.get(id(lowered.module))
        shapes = {k: np.shape(v) for k, v in arrays.items()}

        def rows() -> list[dict[str, Any]]:
            from fuse_mlir.passes.contract_plan import explain_contractions

            plan = plans.plan_for(shapes) if plans is not None else None
            return explain_contractions(lowered.module, shapes, lowered.sources, plan)

        return rows

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
        if fast is not None and planned is not None:
            fast = planned.direct(given, fast)  # a call of these shapes only: others plan on the general path
        if fast is not None:
            self._fast[tuple(given)] = (fast, lowered)

    def _input_specs(self) -> dict[str, Any]:
        specs = self._specs
        if specs is None:
            specs = self._specs = {s.name: s for s in self.program.lower(None, self.options).inputs}
        return specs

    def _validate(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        specs = self._input_specs()
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


def coerce_input(name: str, value: Any, spec: Any) -> np.ndarray:
    """One input as a C-contiguous, aligned array of a supported dtype and the rank ``spec`` (an InputSpec) says."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as err:  # a ragged nested list, an object NumPy cannot convert
        raise FuseRuntimeError(f"input {name} is not a rectangular array: {err}", spec.loc) from None
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int8)
    if arr.dtype.kind not in _SUPPORTED_KINDS or arr.dtype.itemsize > 8:
        raise FuseRuntimeError(f"input {name} has unsupported dtype {arr.dtype}", spec.loc)
    rank = spec.rank
    if arr.ndim != rank:
        raise FuseRuntimeError(f"input {name} must have rank {rank} but has shape {arr.shape}", spec.loc)
    # Copy only what is not C-contiguous or not aligned (a view at an odd byte offset): np.array's copy is both,
    # and keeps 0-d arrays 0-d, unlike ascontiguousarray (which does not fix alignment either).
    return arr if arr.flags.c_contiguous and arr.flags.aligned else np.array(arr, order="C")


def format_exports(exports: Mapping[str, np.ndarray]) -> str:
    """Exports as readable text (for ``fuse run``)."""
    parts = []
    with np.printoptions(precision=6, suppress=True, threshold=200):
        for name, value in exports.items():
            parts.append(f"{name} {value.dtype}{list(value.shape)} =\n{np.array2string(value)}")
    return "\n".join(parts)


def exports_to_json(exports: Mapping[str, np.ndarray]) -> str:
    return json.dumps({k: v.tolist() for k, v in exports.items()}, indent=1)
