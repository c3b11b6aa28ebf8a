"""Pipelines: a sequence of passes run on a module, with instrumentation hooks and analysis caching.

    pipeline = Pipeline.parse("canonicalize,my-pass{factor=2},cse")   # or Pipeline([...passes])
    pipeline.after(lambda pass_, module: print(pass_.name))
    pipeline.instrument(Timing())
    pipeline.run(module)                                                 # in place; returns module

A spec may name registered pipelines (``O2``) and include pipeline files
(``@opt.pipeline``: one pass per line or comma-separated, ``#`` comments).
Every spec error is a located :class:`FuseError`.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, _convert_arg_to_type

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import ANY_LEVEL, run_pass
from fuse_mlir.passes.instruments import PrintIR, Timing, VerifyEach
from fuse_mlir.passes.registry import (
    NamedPipeline,
    find_pass,
    find_pipeline,
    load_pass_plugin,
    register_pipeline,
    unknown_pass_message,
)
from fuse_mlir.passes.spec import Element, parse_spec
from fuse_mlir.stages import stage

__all__ = [
    "Hook",
    "Hooks",
    "NamedPipeline",
    "PassFailure",
    "Pipeline",
    "PrintIR",
    "Timing",
    "VerifyEach",
    "register_pipeline",
]

Hook = Callable[[ModulePass, ModuleOp], None]


class PassFailure(Exception):
    """A pass raised something other than a :class:`FuseError`: a bug in that pass."""

    def __init__(self, pass_: ModulePass, error: BaseException) -> None:
        super().__init__(f"pass '{pass_.name}' failed: {type(error).__name__}: {error}")
        self.pass_ = pass_
        self.error = error


class Hooks:
    """The before/after callables of a pipeline; several pipelines may share one (a run and its lowering)."""

    def __init__(self) -> None:
        self.before: list[Hook] = []
        self.after: list[Hook] = []

    def run_before(self, pass_: ModulePass, module: ModuleOp) -> None:
        for fn in self.before:
            fn(pass_, module)

    def run_after(self, pass_: ModulePass, module: ModuleOp) -> None:
        for fn in reversed(self.after):
            fn(pass_, module)


class Pipeline:
    """An ordered list of pass instances, and the hooks to call around each."""

    def __init__(self, passes: Iterable[ModulePass] = (), *, hooks: Hooks | None = None) -> None:
        self.passes: list[ModulePass] = list(passes)
        self.hooks = hooks if hooks is not None else Hooks()

    # -- building ----------------------------------------------------------------

    @classmethod
    def parse(
        cls,
        spec: str,
        *,
        source: str = "<pass-pipeline>",
        hooks: Hooks | None = None,
        plugins: Sequence[str | Path] = (),
    ) -> Pipeline:
        """The pipeline ``spec`` describes; a spec that is ``@FILE`` (or contains ``@FILE``) reads the file.

        ``plugins`` are Python files to load first (:func:`load_pass_plugin`), so
        the spec may name the passes they define.
        """
        for path in plugins:
            load_pass_plugin(path)
        return cls(_build(parse_spec(spec, source), set(), None), hooks=hooks)

    @classmethod
    def from_file(cls, path: str | Path) -> Pipeline:
        """The pipeline in a pipeline file."""
        return cls(_read_file(Path(path), None, set()))

    @classmethod
    def named(cls, name: str) -> Pipeline:
        """The registered pipeline ``name`` (``O0``, ``O2``, ...)."""
        named = find_pipeline(name)
        if named is None:
            raise FuseError(f"unknown pipeline '{name}'")
        return cls.parse(named.spec, source=f"<pipeline {name}>")

    # -- hooks -------------------------------------------------------------------

    def before(self, fn: Hook) -> Hook:
        """Call ``fn(pass_, module)`` before each pass (usable as a decorator)."""
        self.hooks.before.append(fn)
        return fn

    def after(self, fn: Hook) -> Hook:
        """Call ``fn(pass_, module)`` after each pass (usable as a decorator)."""
        self.hooks.after.append(fn)
        return fn

    def instrument(self, instrument: object) -> object:
        """Register an object's ``before_pass``/``after_pass`` methods as hooks; returns it."""
        before = getattr(instrument, "before_pass", None)
        after = getattr(instrument, "after_pass", None)
        if before is None and after is None:
            raise TypeError(f"{instrument!r} has neither before_pass nor after_pass")
        if before is not None:
            self.hooks.before.append(before)
        if after is not None:
            self.hooks.after.append(after)
        return instrument

    # -- running -----------------------------------------------------------------

    def run(self, module: ModuleOp, ctx: Context | None = None, analyses: AnalysisManager | None = None) -> ModuleOp:
        """Run every pass on ``module`` in place and return it.

        Analyses are cached for the whole run (pass ``analyses`` to share a cache
        across runs on the same module). A :class:`FuseError` from a pass goes
        through unchanged; any other exception becomes a :class:`PassFailure`.
        """
        if ctx is None:
            from fuse_mlir.ir import make_context

            ctx = make_context()
        if analyses is None or analyses.module is not module:
            analyses = AnalysisManager(module)
        for pass_ in self.passes:
            self._lower_for(pass_, module, ctx, analyses)
            self.hooks.run_before(pass_, module)
            analyses.begin_pass()
            try:
                with stage(pass_.name):
                    changed = run_pass(pass_, ctx, module, analyses)
            except FuseError:
                raise
            except Exception as exc:
                raise PassFailure(pass_, exc) from exc
            analyses.end_pass(changed)
            self.hooks.run_after(pass_, module)
        return module

    def _lower_for(self, pass_: ModulePass, module: ModuleOp, ctx: Context, analyses: AnalysisManager) -> None:
        """Bring ``module`` down to the level ``pass_`` works on, if it is above it (``fuse`` on a .fuse file
        lowers to elemwise first), through the registered lowerings and this pipeline's hooks.

        A lowering pass given a module already below its level is a :class:`FuseError` naming the level it
        lowers (it would find none of its ops and trip on the lower level's)."""
        from fuse_mlir.passes.levels import all_levels, lowering_spec, module_level

        want = getattr(pass_, "level", "any")
        if want == ANY_LEVEL:
            return
        levels = all_levels()
        names = [lv.name for lv in levels]
        if want not in names:
            return
        have = module_level(module)
        if names.index(have) > names.index(want) and any(lv.lowering == pass_.name for lv in levels):
            raise FuseError(
                f"{pass_.name}: expected a module at the {want} level, got one at the {have} level "
                f"(levels, in lowering order: {', '.join(names)})"
            )
        if names.index(have) >= names.index(want):
            return
        Pipeline.parse(lowering_spec(have, want), source=f"<lowering to {want}>", hooks=self.hooks).run(
            module, ctx, analyses
        )

    # -- inspection --------------------------------------------------------------

    def spec(self) -> str:
        """The pipeline as text that :meth:`parse` reads back."""
        return ",".join(str(p) for p in self.passes)

    def __str__(self) -> str:
        return self.spec()

    def __repr__(self) -> str:
        return f"Pipeline.parse({self.spec()!r})"

    def __len__(self) -> int:
        return len(self.passes)

    def __iter__(self) -> Iterator[ModulePass]:
        return iter(self.passes)

    def __add__(self, other: Pipeline | Sequence[ModulePass]) -> Pipeline:
        return Pipeline([*self.passes, *other], hooks=self.hooks)


def _build(elements: Sequence[Element], active: set[str], base: Path | None) -> list[ModulePass]:
    """Pass instances for parsed elements, expanding named pipelines and ``@file`` includes.

    ``active`` holds the pipelines and files being expanded (to stop cycles); ``base``
    is the folder relative includes start from (that of the including file, else the
    current folder).
    """
    out: list[ModulePass] = []
    for el in elements:
        if el.include:
            path = Path(el.name)
            out.extend(_read_file(path if base is None or path.is_absolute() else base / path, el, active))
            continue
        named = find_pipeline(el.name)
        if named is not None:
            if el.params:
                raise FuseError(f"pipeline '{el.name}' takes no options", el.loc)
            key = f"pipeline {el.name}"
            if key in active:
                raise FuseError(f"pipeline '{el.name}' includes itself", el.loc)
            out.extend(_build(parse_spec(named.spec, f"<pipeline {el.name}>"), active | {key}, None))
            continue
        out.append(_instantiate(el))
    return out


def _read_file(path: Path, el: Element | None, active: set[str]) -> list[ModulePass]:
    key = f"file {path.resolve()}"
    if key in active:
        raise FuseError(f"pipeline file '{path}' includes itself", el.loc if el else None)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise FuseError(f"cannot read pipeline file '{path}': {reason}", el.loc if el else None) from None
    return _build(parse_spec(text, str(path)), active | {key}, path.parent)


def _instantiate(el: Element) -> ModulePass:
    info = find_pass(el.name)
    if info is None:
        raise FuseError(unknown_pass_message(el.name), el.loc)
    options = {o.field: o for o in info.options}
    hints = typing.get_type_hints(info.cls) if el.params else {}
    params = {}
    for key, values in el.params.items():
        field = key.replace("-", "_")
        opt = options.get(field)
        if opt is None:
            known = ", ".join(o.name for o in options.values()) or "none"
            raise FuseError(f"pass '{el.name}' has no option '{key}' (its options: {known})", el.loc)
        try:
            _convert_arg_to_type(values, hints.get(field, object))
        except ValueError:
            got = ",".join(str(v) for v in values) or "nothing"
            raise FuseError(f"option '{opt.name}' of pass '{el.name}' expects {opt.type}, got {got}", el.loc) from None
        params[field] = values
    try:
        return info.cls.from_spec(ArgSpec(el.name, params))
    except (ValueError, TypeError) as exc:
        raise FuseError(f"bad options for pass '{el.name}': {exc}", el.loc) from None
