"""The lowered-program record: what the frontend hands every backend and mode, and what a run gives back.

These types sit below the frontend, the passes, the interpreters and the backends so that each of them can name
a lowered program without importing the others (the contract layer; see the module map in README.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.diagnostics import FuseRuntimeError, Loc


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


@dataclass
class Lowered:
    """The result of lowering: the module plus what the runner needs to call it."""

    module: ModuleOp
    inputs: list[InputSpec]
    exports: list[str]
    group_order: list[str]
    sources: dict[str, np.ndarray]
    fixpoints: list[FixpointGroup] = field(default_factory=list)


@dataclass
class RunResult:
    """Exports by name and the sink writes the run asked for (performed by the caller)."""

    exports: dict[str, np.ndarray]
    sinks: list[tuple[str, Any, Loc | None]] = field(default_factory=list)


class ProgramLowering(Protocol):
    """What a runner needs of a program: its tensor_eq lowering per input dtype signature (``Program.lower``)."""

    def lower(self, input_dtypes: Mapping[str, Any] | None = None, options: LowerOptions | None = None) -> Lowered:
        """The lowered program for inputs of these dtypes and these lowering options."""
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
