"""The lowered-program record: what the frontend hands every backend and mode, and what a run gives back.

These types sit below the frontend, the passes, the interpreters and the backends so that each of them can name
a lowered program without importing the others (the contract layer; see the module map in README.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from fuse_mlir.diagnostics import FuseRuntimeError, Loc

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from fuse_mlir.gemm import GemmSite

# No xDSL import at run time: a warm start (fuse_mlir.lowering_cache) builds lowerings without the IR machinery.


@dataclass
class InputSpec:
    """A program input: its name, rank and (specialised) dtype."""

    name: str
    rank: int
    dtype: np.dtype
    loc: Loc


MODES = ("single", "fixpoint", "streaming")


@dataclass(frozen=True)
class LowerOptions:
    """How a program is lowered: the evaluation mode and its settings (hashable: they key the lowering cache).

    ``mode`` is ``single`` (a cycle is an error) or ``fixpoint`` (each
    recursive group becomes a ``te.fixpoint`` iterated to convergence within
    ``atol``/``rtol`` or ``max_iters`` runs). ``temperature`` holds, per
    tensor, the T of ``sig(x)`` calls without one at each iteration (see
    fuse_mlir/modes/fixpoint.py); single-pass groups use the first entry.
    ``semi_naive`` lets :class:`~fuse_mlir.passes.transforms.semi_naive.SemiNaive`
    rewrite boolean recursive groups into delta rules after lowering.
    """

    mode: str = "single"
    max_iters: int = 32
    atol: float = 1e-6
    rtol: float = 1e-5
    temperature: tuple[tuple[str, tuple[float, ...]], ...] = ()
    semi_naive: bool = True


@dataclass(frozen=True)
class FixpointGroup:
    """One recursive group lowered to a ``te.fixpoint``: its label (the status export prefix) and tensors."""

    label: str
    names: tuple[str, ...]
    max_iters: int


STATUS_SEP = "#"
"""Separates a fixpoint's label from its status name in hidden exports (``Anc#iterations``): no identifier has it."""


class Lowered:
    """The result of lowering: the tensor_eq module plus what the runner needs to call it.

    ``digest`` is the sha256 of the module's text (:meth:`te_digest`), which
    the llvm backend keys its kernels on. A lowering read back from the warm
    start index (:mod:`fuse_mlir.lowering_cache`) has no module yet: ``build``
    makes it on first access of :attr:`module`, so a run whose kernel is on
    disk never constructs IR.
    """

    __slots__ = (
        "_module",
        "inputs",
        "exports",
        "group_order",
        "sources",
        "fixpoints",
        "digest",
        "build",
        "planned",
        "gemm_sites",
        "__weakref__",
    )

    def __init__(
        self,
        module: ModuleOp | None,
        inputs: list[InputSpec],
        exports: list[str],
        group_order: list[str],
        sources: dict[str, np.ndarray],
        fixpoints: list[FixpointGroup] | None = None,
        *,
        digest: str | None = None,
        build: Callable[[], ModuleOp] | None = None,
        planned: bool | None = None,
        gemm_sites: list[GemmSite] | None = None,
    ):
        if module is None and build is None:
            raise ValueError("a Lowered needs its module or a function that builds it")
        self._module = module
        self.inputs = inputs
        self.exports = exports
        self.group_order = group_order
        self.sources = sources
        self.fixpoints = fixpoints if fixpoints is not None else []
        self.digest = digest
        self.build = build
        self.planned = planned  # has products planned per call's shapes (ShapePlans.needed; None: ask the module)
        # from the warm start index: when the only per-shape choice is GEMM orientation, the GEMMs that decide it
        # (contract_plan.gemm_sites), so a warm call plans without building the IR; None: not known
        self.gemm_sites = gemm_sites

    @property
    def module(self) -> ModuleOp:
        """The tensor_eq module (built now if this lowering came from the warm start index)."""
        if self._module is None:
            assert self.build is not None
            self._module = self.build()
        return self._module

    @module.setter
    def module(self, value: ModuleOp) -> None:
        self._module = value
        self.digest = None

    def with_module(self, module: ModuleOp) -> Lowered:
        """A lowering with the same tables and another module (a variant of this one, e.g. another product order)."""
        return Lowered(module, self.inputs, self.exports, self.group_order, self.sources, self.fixpoints)

    def derived(self, tag: str, edit: Callable[[ModuleOp], None]) -> Lowered:
        """A variant of this lowering whose module is a clone of this one's with ``edit`` applied, built only when
        asked for, and whose digest is this one's with ``tag`` (which must name the edit exactly): a warm start
        finds the variant's kernel on disk without building any IR, and a cold process derives the same digest."""
        base = self

        def build() -> ModuleOp:
            module = base.module.clone()
            edit(module)
            return module

        digest = hashlib.sha256(f"{self.te_digest()}|{tag}".encode()).hexdigest()
        return Lowered(
            None, self.inputs, self.exports, self.group_order, self.sources, self.fixpoints, digest=digest, build=build
        )

    def with_sources(self, sources: dict[str, np.ndarray]) -> Lowered:
        """This lowering over other source arrays of the same shapes and dtypes: the module (built or not) is shared,
        so kernels compiled for it are reused, while backends bind the new object afresh."""
        return Lowered(
            self._module,
            self.inputs,
            self.exports,
            self.group_order,
            sources,
            self.fixpoints,
            digest=self.digest,
            build=self.build,
            planned=self.planned,
            gemm_sites=self.gemm_sites,
        )

    @property
    def has_module(self) -> bool:
        """Whether the module exists (False for a warm lowering nobody has asked the IR of)."""
        return self._module is not None

    def te_digest(self) -> str:
        """The module's :func:`~fuse_mlir.ir.module_digest` (text and locations): computed once, known without the
        module on a warm start."""
        if self.digest is None:
            from fuse_mlir.ir import module_digest

            self.digest = module_digest(self.module)
        return self.digest

    def __repr__(self) -> str:
        return f"Lowered(inputs={[s.name for s in self.inputs]}, exports={self.exports}, digest={self.digest})"


class ShapeDispatch:
    """Calls of a lowering planned per shape (a contraction order, a GEMM's result side), chosen by the call's input
    shapes: :meth:`add` registers the call bound to the planned variant of some arrays' shapes, and
    :attr:`dispatch` runs the call registered for its inputs' shapes (one tuple of shapes, one dict lookup).

    A shape not seen before asks ``choose`` (the planner's ``lowered_for``, given only where it decides from the
    shapes alone, without IR) for its variant and runs that variant's call if one was registered, so shapes that
    plan alike share one compiled kernel and one bound call; anything else returns None, and the caller plans the
    call on its general path (which then registers it). :attr:`ran` is the latest dispatched call's ``(call,
    variant, handle)``, for explain().
    """

    def __init__(self, names: list[str], choose: Callable[[Mapping[str, Any]], Lowered] | None = None):
        table: dict[tuple, tuple[Callable[..., Any], Lowered, Any]] = {}
        self.names, self.table, self.choose = names, table, choose
        self.by_variant: dict[Lowered, tuple[Callable[..., Any], Lowered, Any]] = {}
        self.ran: tuple[Callable[..., Any], Lowered, Any] | None = None

        def dispatch(inputs: Mapping[str, Any], *rest: Any) -> Any:
            try:
                key = tuple([inputs[n].shape for n in names])
            except (AttributeError, KeyError):  # not an array, or not this signature: the general path sorts it out
                return None
            hit = table.get(key)
            if hit is None:
                hit = self._resolve(inputs, key)
                if hit is None:
                    return None
            self.ran = hit
            return hit[0](inputs, *rest)

        self.dispatch = dispatch

    def _resolve(self, inputs: Mapping[str, Any], key: tuple) -> tuple[Callable[..., Any], Lowered, Any] | None:
        """A new shape's call: its planned variant's, when ``choose`` can name the variant and it has a call."""
        if self.choose is None or not self.by_variant:
            return None
        try:
            variant = self.choose(inputs)
        except Exception:  # shapes the planner cannot use: the general path validates them and reports the error
            return None
        hit = self.by_variant.get(variant)
        if hit is not None:
            self.table[key] = hit
        return hit

    def key(self, arrays: Mapping[str, Any]) -> tuple:
        """The table key of a call: its input shapes in the module's input order."""
        return tuple(np.shape(arrays[n]) for n in self.names)

    def add(self, arrays: Mapping[str, Any], variant: Lowered, call: Callable[..., Any], handle: Any = None) -> None:
        """Register ``call`` (bound to ``variant``, the planned lowering of these arrays' shapes; ``handle`` is kept
        beside it, e.g. the native entry that times itself) for these shapes and for new shapes that plan alike."""
        hit = self.by_variant[variant] = (call, variant, handle)
        self.table[self.key(arrays)] = hit

    @property
    def seconds(self) -> float:
        """The latest dispatched call's run time, read from its handle (a native entry times itself)."""
        assert self.ran is not None
        return float(self.ran[2].seconds)


@dataclass
class RunResult:
    """Exports by name and the sink writes the run asked for (performed by the caller)."""

    exports: dict[str, np.ndarray]
    sinks: list[tuple[str, Any, Loc | None]] = field(default_factory=list)


class ProgramLowering(Protocol):
    """What a runner needs of a program: its tensor_eq lowering per input dtype signature (``Program.lower``)."""

    filename: str
    sources_version: int  # bumped when the program's source arrays are replaced
    frontend_seconds: dict[str, float]  # parse, resolve, lower-to-te: the frontend's part of compile_stats

    def lower(
        self, input_dtypes: Mapping[str, Any] | None = None, options: LowerOptions | None = None, *, warm: bool = False
    ) -> Lowered:
        """The lowered program for inputs of these dtypes and these lowering options (``warm``: through the warm
        start index, see ``Program.lower``)."""
        ...


_SUPPORTED_KINDS = "biuf"


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


def load_sources(prog: Any) -> dict[str, np.ndarray]:
    """Load every source file of a resolved program (``frontend.resolve.Resolved``; relative to its folder), checking ranks."""
    from pathlib import Path

    from fuse_mlir.io.sources import load_source

    out = {}
    for s in prog.sources:
        rank = len(s.lhs.indices) if s.lhs.indices is not None else None
        out[s.lhs.name] = load_source(s.path, Path(prog.base_dir), rank=rank, loc=s.loc, name=s.lhs.name)
    return out
