"""The library API: ``Program(source).compile(...)`` returns a runner; ``runner(**inputs)`` runs it.

A program is parsed and resolved once. Lowering to tensor_eq happens per input
dtype signature (like ``jax.jit`` tracing): the same program called with
float32 inputs and with float64 inputs gets two specialisations, each cached.
Extents are symbolic in the IR, so new shapes of the same ranks reuse a
specialisation.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.frontend import ast as A
from fuse_mlir.frontend.parser import parse, recursion_room
from fuse_mlir.frontend.resolve import Resolved, explain_term, free_indices, resolve, split_factors, split_terms
from fuse_mlir.lowered import Lowered, LowerOptions, load_sources
from fuse_mlir.modes.runner import Runner  # re-exported: the public API names them here
from fuse_mlir.stages import StageTimes, record, stage

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

# xDSL and the lowering are imported where IR is built: a warm start (fuse_mlir.lowering_cache) needs neither.


def print_module(module: ModuleOp, generic: bool = False) -> str:
    """MLIR text of a module (:func:`fuse_mlir.ir.print_module`; part of the public API here, imported on use)."""
    from fuse_mlir.ir import print_module as print_ir

    return print_ir(module, generic)


def rebind_sources(cache: dict[Any, Lowered], replaced: Mapping[str, np.ndarray]) -> dict[Any, Lowered]:
    """``cache``'s lowerings with ``replaced`` as their source arrays, less those built for another shape or dtype.

    A lowering depends on its sources' shapes and dtypes only (their types in
    the IR), so one whose arrays match keeps its module, and with it the
    compiled kernels found by module, under a new ``Lowered`` (backends bind
    per lowering object, so none sees the old arrays). Entries that shared a
    lowering share its replacement.
    """
    new: dict[int, Lowered | None] = {}
    out: dict[Any, Lowered] = {}
    for key, lw in cache.items():
        if id(lw) not in new:  # ids are stable here: every lowering is held by ``cache`` for the whole loop
            same = all(
                n in lw.sources and lw.sources[n].shape == a.shape and lw.sources[n].dtype == a.dtype
                for n, a in replaced.items()
            )
            new[id(lw)] = lw.with_sources({**lw.sources, **replaced}) if same else None
        hit = new[id(lw)]
        if hit is not None:
            out[key] = hit
    return out


class Program:
    """A parsed and resolved `.fuse` program."""

    def __init__(self, source: str, filename: str = "<string>", base_dir: str | Path | None = None):
        self.source = source
        self.filename = filename
        if base_dir is None:
            base_dir = Path(filename).parent if filename not in ("<string>", "<stdin>") else Path.cwd()
        self.base_dir = Path(base_dir)
        with recursion_room(), StageTimes() as times:  # the resolver recurses (see parser.MAX_OPERATORS)
            with stage("parse"):
                self.ast: A.Module = parse(source, filename)
            with stage("resolve"):
                self.resolved: Resolved = resolve(self.ast, self.base_dir)
        # parse, resolve and (added by lower()) lower-to-te: the frontend's part of every runner's compile_stats
        self.frontend_seconds: dict[str, float] = times.as_dict()
        self._sources: dict[str, np.ndarray] | None = None
        self._lowered: dict[tuple, Lowered] = {}
        self.sources_version = 0  # bumped by replace_sources: runners drop direct paths bound to older lowerings

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
        Lowerings made before the call are kept where every replaced array
        has the shape and dtype the lowering was built for (a training loop
        replacing its weights each step re-lowers nothing; its kernels are
        found by module) and dropped otherwise.
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
            loaded[name] = np.array(arr, order="C")  # not ascontiguousarray: it makes a 0-d array 1-d
        self._sources = loaded
        self._lowered = rebind_sources(self._lowered, {n: loaded[n] for n in arrays})
        self.sources_version += 1

    def lower(
        self,
        input_dtypes: Mapping[str, Any] | None = None,
        options: LowerOptions | None = None,
        *,
        warm: bool = False,
    ) -> Lowered:
        """The tensor_eq module for inputs of the given dtypes (float64 for any not named) and lowering options.

        ``warm`` consults and fills the warm start index on disk
        (:mod:`fuse_mlir.lowering_cache`): a lowering found there has no module
        until one is asked for, so a warm run builds no IR at all.
        """
        items = input_dtypes.items() if input_dtypes else ()
        key = tuple(sorted((k, np.dtype(v)) for k, v in items))  # dtypes hash by value
        if options is not None and options.mode == "single" and not options.temperature:
            options = None  # the plain single-pass lowering: one cache entry for it
        hit = self._lowered.get((key, options))
        if hit is not None:
            return hit
        index_key = None
        if warm:
            from fuse_mlir import lowering_cache

            index_key = lowering_cache.warm_key(self.resolved, self.source_arrays(), key, options)
            if index_key is not None:
                hit = lowering_cache.load(index_key, self.source_arrays(), lambda: self._lower_now(key, options).module)
        # Kept also under the full signature it stands for (defaults filled in): the runner lowers once with no
        # dtypes to learn the inputs, then with every input's dtype, which is then the same lowering.
        if hit is None:
            hit = self._lower_now(key, options)
            full = tuple(sorted((s.name, s.dtype) for s in hit.inputs))
            if index_key is not None:
                lowering_cache.store(index_key, hit)
                also = lowering_cache.warm_key(self.resolved, self.source_arrays(), full, options)
                if full != key and also is not None:
                    lowering_cache.store(also, hit)
        else:
            full = tuple(sorted((s.name, s.dtype) for s in hit.inputs))
        self._lowered[(key, options)] = hit
        self._lowered.setdefault((full, options), hit)
        return hit

    def _lower_now(self, key: tuple, options: LowerOptions | None) -> Lowered:
        """Lower to tensor_eq (building the IR) for the dtype signature ``key``."""
        from fuse_mlir.frontend.lower import lower_program

        with recursion_room():  # the lowering walks expressions recursively (see parser.MAX_OPERATORS)
            sources = self.source_arrays()
            t0 = time.perf_counter()
            lowered = lower_program(self.resolved, dict(key), sources, options)
            seconds = time.perf_counter() - t0
            record("lower-to-te", seconds)
            self.frontend_seconds["lower-to-te"] = self.frontend_seconds.get("lower-to-te", 0.0) + seconds
        if options is not None and options.mode == "fixpoint" and options.semi_naive:
            from fuse_mlir.passes.transforms.semi_naive import semi_naive

            semi_naive(lowered.module)
        return lowered

    def with_resolved(self, resolved: Resolved) -> Program:
        """A copy of this program whose resolved equations are ``resolved`` (streaming's per-step program)."""
        step = copy.copy(self)
        step.resolved = resolved
        step._lowered = {}
        return step

    def to_mlir(self, input_dtypes: Mapping[str, Any] | None = None, generic: bool = False) -> str:
        """The tensor_eq module as MLIR text."""
        return print_module(self.lower(input_dtypes).module, generic)

    def grad(self, of: str, wrt: str | Sequence[str]) -> Program:
        """A program exporting the float scalar ``of`` and its gradient ``d<of>_d<name>`` with respect to each
        ``wrt`` tensor (same shape and dtype as the tensor), by reverse-mode differentiation (docs/autodiff.md)."""
        return GradProgram(self, of, wrt)

    def jax_function(self) -> Any:
        """``f(**inputs) -> exports`` built from jax operations: works in ``jax.jit``, ``jax.grad``, ``jax.vmap``."""
        from fuse_mlir.interop import jax_function

        return jax_function(self)

    def torch_function(self) -> Any:
        """``f(**inputs) -> exports`` built from torch operations: works with ``torch.autograd``, ``torch.compile``."""
        from fuse_mlir.interop import torch_function

        return torch_function(self)

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
        from fuse_mlir.modes import configure_runner
        from fuse_mlir.modes.fixpoint import lower_options

        if mode in BACKEND_MODES:  # torch's execution mode (eager / torch.compile), not a run mode
            options["mode"], mode = mode, "single"

        defined = list(dict.fromkeys(eq.lhs.name for eq in self.resolved.equations))
        lowering = lower_options(defined, mode, max_iters, atol, rtol, temperature, semi_naive)
        donated = (donate,) if isinstance(donate, str) else tuple(donate)
        executor = get_backend(backend, opt_level=opt_level, donate=donated, **options)
        root = Path(out_root) if out_root is not None else Path.cwd()
        with recursion_room():  # a mode's plan walks expressions recursively (streaming's; see parser.MAX_OPERATORS)
            runner = configure_runner(
                self,
                backend,
                root,
                executor,
                mode=mode,
                projection=projection,
                samples=samples,
                seed=seed,
                profile=profile,
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


BACKEND_MODES = ("eager", "compile")
"""``compile(mode=...)`` values that belong to the backend (torch) rather than to the run (single, fixpoint,
streaming)."""


def format_exports(exports: Mapping[str, np.ndarray]) -> str:
    """Exports as readable text (for ``fuse run``)."""
    parts = []
    with np.printoptions(precision=6, suppress=True, threshold=200):
        for name, value in exports.items():
            parts.append(f"{name} {value.dtype}{list(value.shape)} =\n{np.array2string(value)}")
    return "\n".join(parts)


def exports_to_json(exports: Mapping[str, np.ndarray]) -> str:
    return json.dumps({k: v.tolist() for k, v in exports.items()}, indent=1)


# -- gradient programs (Program.grad) ----------------------------------------------------------------------
#
# A GradProgram's lowering is the base program's tensor_eq module put through the ``grad`` transformation
# (fuse_mlir.passes.grad), per input dtype signature like any program, so it compiles on every backend and its
# backward kernels fuse with the rest (docs/autodiff.md).


def _lhs_loc(program: Program, name: str) -> Loc | None:
    """Where ``name`` is first defined (an equation or a source), or first read; None if nowhere."""
    for eq in program.resolved.equations:
        if eq.lhs.name == name:
            return eq.lhs.loc
    for s in program.resolved.sources:
        if s.lhs.name == name:
            return s.loc
    return None


def _streaming_equation(program: Program) -> A.Equation | None:
    for eq in program.resolved.equations:
        if any(isinstance(i, A.IndexName) and i.time for i in eq.lhs.indices or ()):
            return eq
    return None


class GradProgram(Program):
    """The program ``base`` exporting ``of`` and ``d<of>_d<name>`` for each ``wrt`` name, and nothing else."""

    def __init__(self, base: Program, of: str, wrt: Sequence[str]):
        # Share the base's parse: a gradient program is the same program, lowered differently.
        self.source = base.source
        self.filename = base.filename
        self.base_dir = base.base_dir
        self.ast = base.ast
        self.resolved = base.resolved
        self._sources = None
        self._lowered = {}
        self.sources_version = 0
        self.frontend_seconds = dict(base.frontend_seconds)
        self.base = base
        self.of = of
        self.wrt = tuple(wrt.split(",")) if isinstance(wrt, str) else tuple(wrt)
        from fuse_mlir.passes.grad.transform import grad_name

        self.exports = [of, *(grad_name(of, n) for n in self.wrt)]
        eq = _streaming_equation(base)
        if eq is not None:
            raise FuseError(
                f"grad: {eq.lhs.name} is a streaming equation (virtual time); streaming programs cannot be "
                "differentiated",
                eq.lhs.loc,
            )
        try:
            self.lower()  # checks the request now, with located errors
        except FuseError as e:
            if e.loc is None:
                bad = next((n for n in (of, *self.wrt) if n in e.message.split(":", 1)[-1].split()), of)
                raise FuseError(e.message, _lhs_loc(base, bad), e.notes) from None
            raise

    def source_arrays(self):
        return self.base.source_arrays()

    def replace_sources(self, arrays: Mapping[str, Any]) -> None:
        self.base.replace_sources(arrays)
        replaced = self.base.source_arrays()
        self._lowered = rebind_sources(self._lowered, {n: replaced[n] for n in arrays})
        self.sources_version += 1

    def lower(
        self,
        input_dtypes: Mapping[str, Any] | None = None,
        options: LowerOptions | None = None,
        *,
        warm: bool = False,
    ) -> Lowered:
        """The base program's module for these dtypes, differentiated (cached per signature; ``warm`` is ignored:
        a gradient lowering is not in the warm start index)."""
        from fuse_mlir.passes.grad.transform import differentiate

        items = input_dtypes.items() if input_dtypes else ()
        key = (tuple(sorted((k, str(v)) for k, v in items)), options)
        hit = self._lowered.get(key)
        if hit is None:
            base = self.base.lower(input_dtypes, options)
            module = base.module.clone()
            exports = differentiate(module, self.of, self.wrt)
            hit = Lowered(module, base.inputs, exports, [*base.group_order, *exports[1:]], base.sources, [])
            self._lowered[key] = hit
        return hit

    def compile(self, backend: str = "llvm", **kwargs: Any):
        mode = kwargs.get("mode", "single")
        if mode in ("fixpoint", "streaming"):
            raise FuseError(f"a gradient program runs in single mode, not {mode}")
        return super().compile(backend, **kwargs)

    def to_fuse(self, input_dtypes: Mapping[str, Any] | None = None) -> str:
        """The gradient program as `.fuse` text that parses back and computes the same values."""
        from fuse_mlir.frontend.unparse import module_to_fuse

        return module_to_fuse(self.lower(input_dtypes).module)
