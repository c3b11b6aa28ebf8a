"""The pass registry: every pass and named pipeline that ``fuse-opt`` and :class:`Pipeline` can name.

Passes register themselves with the :func:`register_pass` class decorator when
their module is imported. The registry imports every module of the
``fuse_mlir.passes`` package the first time it is asked (so a new
``fuse_mlir/passes/conversions/lower_x.py`` is found without being listed anywhere), then
the plug-ins: installed packages that declare an entry point in the
``fuse_mlir.passes`` group. An entry point names a module (importing it
registers its passes), a pass class, or a function that registers passes (or
returns pass classes). A plug-in that fails to load gives a warning and is
skipped; it never stops the tool.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
import threading
import types
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from xdsl.passes import ModulePass
from xdsl.utils.hints import type_repr

from fuse_mlir.diagnostics import warning

PLUGIN_GROUP = "fuse_mlir.passes"
BUILTIN_PACKAGES = ("fuse_mlir.passes",)
KNOWN_LEVELS = ("tensor_eq", "elemwise", "loop", "llvm", "any")
_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")

P = TypeVar("P", bound=type[ModulePass])


@dataclass(frozen=True)
class OptionInfo:
    """One option of a pass: spelled with dashes in pipelines (``my-pass{max-size=4}``)."""

    name: str
    field: str
    type: str
    default: Any
    required: bool
    help: str

    def default_text(self) -> str:
        """The default as it would be written in a pipeline (``true``, ``4``, ``"x"``), or ``-`` if required."""
        if self.required:
            return "-"
        return _value_text(self.default)


@dataclass(frozen=True)
class PassInfo:
    """A registered pass: its class and where it came from (``fuse_mlir``, ``plug-in NAME``, or a module)."""

    name: str
    cls: type[ModulePass]
    origin: str

    @property
    def description(self) -> str:
        """The class docstring, dedented."""
        return inspect.cleandoc(self.cls.__doc__ or "")

    @property
    def summary(self) -> str:
        """The first line of the description."""
        return self.description.split("\n", 1)[0]

    @property
    def level(self) -> str:
        return str(getattr(self.cls, "level", "any"))

    @property
    def example(self) -> str | None:
        return getattr(self.cls, "example", None)

    @property
    def options(self) -> list[OptionInfo]:
        return pass_options(self.cls)


@dataclass(frozen=True)
class NamedPipeline:
    """A pipeline registered under a name (``O2``), usable wherever a pass name is."""

    name: str
    spec: str
    description: str
    level: str


_PASSES: dict[str, PassInfo] = {}
_PIPELINES: dict[str, NamedPipeline] = {}
_origin: str | None = None  # set while a plug-in loads
_builtins_loaded = False  # set only once every built-in module has been imported (publish after load)
_plugins_loaded = False
_LOAD_LOCK = threading.RLock()
"""Held while the registry loads: a thread that asks during another's load waits for it to finish, instead of
seeing a half-filled registry (re-entrant: an import during loading may ask the registry again)."""
_loading_thread: int | None = None  # the thread importing the built-in passes, while it does
_plugin_thread: int | None = None  # the thread loading plug-ins, while it does


def _value_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return ",".join(_value_text(v) for v in value)
    return str(value)


def pass_options(cls: type[ModulePass]) -> list[OptionInfo]:
    """The options of a pass class, from its dataclass fields."""
    out = []
    hints = _type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or f.name == "name":
            continue
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        typ = hints.get(f.name, f.type)
        out.append(
            OptionInfo(
                name=f.name.replace("_", "-"),
                field=f.name,
                type=typ if isinstance(typ, str) else type_repr(typ),
                default=default,
                required=not has_default and not _allows_none(typ),
                help=str(f.metadata.get("help", "")),
            )
        )
    return out


def _allows_none(typ: Any) -> bool:
    return typing.get_origin(typ) in (typing.Union, types.UnionType) and type(None) in typing.get_args(typ)


def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: fall back to the raw strings
        return {}


@contextmanager
def _registering_as(origin: str | None) -> Iterator[None]:
    global _origin
    saved, _origin = _origin, origin
    try:
        yield
    finally:
        _origin = saved


def register_pass(cls: P) -> P:
    """Class decorator: add a pass to the registry under its ``name``.

    The class must be a :class:`ModulePass` with a ``name`` and a docstring;
    if it is not yet a dataclass it is made a frozen one (its annotated
    attributes become options). A name already taken by another pass or a
    named pipeline is an error.
    """
    if not (isinstance(cls, type) and issubclass(cls, ModulePass)):
        raise TypeError(f"@register_pass expects a ModulePass subclass, got {cls!r}")
    if "__dataclass_params__" not in cls.__dict__:
        cls = dataclasses.dataclass(frozen=True)(cls)  # type: ignore[assignment]
    name = cls.__dict__.get("name", getattr(cls, "name", None))
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"pass class {cls.__qualname__} needs a `name` like 'my-pass', got {name!r}")
    doc = cls.__doc__ or ""
    if not doc.strip() or doc.startswith(f"{cls.__name__}("):  # dataclass's generated signature
        raise ValueError(f"pass '{name}' ({cls.__qualname__}) needs a docstring: it is the pass's description")
    level = getattr(cls, "level", "any")
    if not isinstance(level, str):
        raise ValueError(f"pass '{name}': `level` must be a string such as {', '.join(KNOWN_LEVELS)}")
    if name in _PIPELINES:
        raise ValueError(f"pass name '{name}' is already the name of a pipeline")
    old = _PASSES.get(name)
    if old is not None and not _same_class(old.cls, cls):
        raise ValueError(
            f"pass '{name}' is already registered by {old.cls.__module__}.{old.cls.__qualname__} ({old.origin})"
        )
    origin = _origin or ("fuse_mlir" if cls.__module__.split(".")[0] == "fuse_mlir" else cls.__module__)
    _PASSES[name] = PassInfo(name, cls, origin)
    return cls


def _same_class(a: type, b: type) -> bool:
    """The same class, or the same definition imported again (a reloaded module, a script run twice)."""
    return a is b or (a.__module__ == b.__module__ and a.__qualname__ == b.__qualname__)


def unregister_pass(name: str) -> None:
    """Remove a pass (for tests and interactive sessions)."""
    _PASSES.pop(name, None)


def register_pipeline(name: str, spec: str, description: str, *, level: str = "any", replace: bool = False) -> None:
    """Register ``spec`` (``"canonicalize,cse"``) under ``name``; ``-p NAME`` and ``Pipeline.named`` use it.

    The spec is checked when the pipeline is first used, so it may name passes
    registered later. ``replace=True`` redefines an existing pipeline.
    """
    if not _NAME_RE.match(name):
        raise ValueError(f"bad pipeline name {name!r}")
    if name in _PASSES:
        raise ValueError(f"pipeline name '{name}' is already the name of a pass")
    if name in _PIPELINES and not replace and _PIPELINES[name].spec != spec:
        raise ValueError(f"pipeline '{name}' is already registered (pass replace=True to redefine it)")
    _PIPELINES[name] = NamedPipeline(name, spec, description, level)


def load_builtin_passes() -> None:
    """Import every module of the built-in pass packages (once), so their passes register."""
    global _builtins_loaded, _loading_thread
    if _builtins_loaded:
        return
    with _LOAD_LOCK:
        if _builtins_loaded or _loading_thread == threading.get_ident():
            return  # loaded meanwhile, or asked again by an import of this very load
        _loading_thread = threading.get_ident()
        try:
            for package_name in BUILTIN_PACKAGES:
                package = importlib.import_module(package_name)
                for info in pkgutil.walk_packages(package.__path__, package_name + "."):
                    if not info.name.rsplit(".", 1)[-1].startswith("_"):
                        importlib.import_module(info.name)
            _builtins_loaded = True  # only now: every other thread waited on the lock until here
        finally:
            _loading_thread = None


def load_plugins(*, reload: bool = False) -> list[str]:
    """Load the ``fuse_mlir.passes`` entry points of installed packages; return the names of those loaded.

    A plug-in that fails (import error, bad object, clashing pass name) gives a
    warning naming it and is skipped.
    """
    if _plugins_loaded and not reload:
        return []
    with _LOAD_LOCK:
        return _load_plugins_locked(reload)


def _load_plugins_locked(reload: bool) -> list[str]:
    """Load the plug-ins; the caller holds ``_LOAD_LOCK``. Marked loaded only when done (publish after load)."""
    global _plugins_loaded, _plugin_thread
    if (_plugins_loaded and not reload) or _plugin_thread == threading.get_ident():
        return []  # loaded meanwhile, or a plug-in asking the registry while it loads
    load_builtin_passes()
    _plugin_thread = threading.get_ident()
    try:
        loaded = _load_entry_points()
        _plugins_loaded = True
    finally:
        _plugin_thread = None
    return loaded


def _load_entry_points() -> list[str]:
    loaded = []
    for ep in sorted(metadata.entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        origin = f"plug-in {ep.name}" + (f" ({dist})" if dist else "")
        try:
            with _registering_as(origin):
                _register_entry_point(ep.load())
        except Exception as exc:
            warning(
                f"plug-in '{ep.name}' ({ep.value}) of group {PLUGIN_GROUP} failed to load and is skipped: "
                f"{type(exc).__name__}: {exc}"
            )
            continue
        loaded.append(ep.name)
    return loaded


def load_pass_plugin(path: str | Path) -> list[str]:
    """Import the Python file ``path`` as a pass plug-in; return the names of the passes it registered.

    The file registers its passes as any module does (``@register_pass``,
    ``register_pipeline``); a ``register()`` function, if it defines one, is
    called too, and pass classes it returns are registered (as for the
    ``fuse_mlir.passes`` entry points). Loading one file twice is harmless.
    A missing file or an error while importing it is a :class:`FuseError`
    naming the file (``fuse-opt --load-pass-plugin``, ``Pipeline.parse(...,
    plugins=[...])``).
    """
    import importlib.util
    import sys

    from fuse_mlir.diagnostics import FuseError

    _ensure_loaded()
    file = Path(path)
    if not file.is_file():
        raise FuseError(f"cannot load pass plug-in '{path}': no such file")
    module_name = "fuse_mlir_plugin_" + re.sub(r"\W", "_", str(file.resolve()))
    before = set(_PASSES)
    try:
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise FuseError(f"cannot load pass plug-in '{path}': not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        with _registering_as(f"plug-in file {file}"):
            spec.loader.exec_module(module)
            register = getattr(module, "register", None)
            if callable(register):
                _register_entry_point(register)
    except FuseError:
        raise
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise FuseError(f"cannot load pass plug-in '{path}': {type(exc).__name__}: {exc}") from None
    return sorted(set(_PASSES) - before)


def _register_entry_point(obj: object) -> None:
    if isinstance(obj, ModuleType):
        return  # importing it registered its passes
    if isinstance(obj, type) and issubclass(obj, ModulePass):
        register_pass(obj)
        return
    if callable(obj):
        result = obj()
        if result is None:
            return
        if isinstance(result, Iterable):
            for cls in result:
                register_pass(cls)
            return
    raise TypeError(f"the entry point gives {obj!r}: expected a module, a ModulePass class or a function")


def _ensure_loaded() -> None:
    load_builtin_passes()
    load_plugins()


def get_pass(name: str) -> PassInfo:
    """The registered pass ``name``; KeyError (with close matches in the message) if there is none."""
    _ensure_loaded()
    try:
        return _PASSES[name]
    except KeyError:
        raise KeyError(unknown_pass_message(name)) from None


def unknown_pass_message(name: str) -> str:
    """``unknown pass 'x'`` with a did-you-mean suggestion."""
    import difflib

    close = difflib.get_close_matches(name, [*_PASSES, *_PIPELINES], n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown pass '{name}'{hint} (fuse-opt --list-passes lists them)"


def find_pass(name: str) -> PassInfo | None:
    """The registered pass ``name``, or None."""
    _ensure_loaded()
    return _PASSES.get(name)


def all_passes() -> list[PassInfo]:
    """Every registered pass (built-in and plug-in), sorted by name."""
    _ensure_loaded()
    return [_PASSES[n] for n in sorted(_PASSES)]


def find_pipeline(name: str) -> NamedPipeline | None:
    """The named pipeline ``name``, or None."""
    _ensure_loaded()
    return _PIPELINES.get(name)


def all_pipelines() -> list[NamedPipeline]:
    """Every named pipeline, sorted by name."""
    _ensure_loaded()
    return [_PIPELINES[n] for n in sorted(_PIPELINES)]
