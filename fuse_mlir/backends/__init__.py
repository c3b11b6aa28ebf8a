"""Backends: what runs a lowered program. Each maps (tensor_eq module, input arrays) to exports and sinks.

``reference`` interprets tensor_eq on NumPy (the ground truth); ``llvm``
compiles through elemwise and loop to native code. A backend is chosen by
name in ``Program.compile(backend=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.frontend.lowered import Lowered, RunResult


class Executor(Protocol):
    """Runs one lowered specialisation on validated input arrays."""

    def __call__(self, lowered: Lowered, arrays: dict[str, np.ndarray]) -> RunResult: ...


def _reference(
    *, opt_level: str | int = "O2", donate: object = (), check_bounds: object = None, **options: object
) -> Executor:
    """The interpreter runs the tensor_eq module as lowered: no passes (it is the ground truth), so
    ``opt_level`` is only checked, ``donate`` has nothing to reuse and ``check_bounds`` nothing to check
    (NumPy indexing is checked)."""
    from fuse_mlir.interp.reference import run_module
    from fuse_mlir.targets import normalise_opt_level

    normalise_opt_level(opt_level)
    if options:
        raise FuseError(
            f"the reference backend has no option{'s' * (len(options) > 1)} {', '.join(sorted(options))} "
            "(its options: opt_level, donate)"
        )

    def execute(lowered: Lowered, arrays: dict[str, np.ndarray]) -> RunResult:
        return run_module(lowered.module, arrays, lowered.sources)

    return execute


def _llvm(**options: object) -> Executor:
    import dataclasses

    from fuse_mlir.backends.llvm.executor import NativeExecutor

    allowed = [f.name for f in dataclasses.fields(NativeExecutor) if f.init and f.name != "compiled"]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise FuseError(
            f"the llvm backend has no option{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
            f"(its options: {', '.join(allowed)})"
        )
    return NativeExecutor(**options)  # type: ignore[arg-type]


def _torch(**options: object) -> Executor:
    from fuse_mlir.backends.handoff import torch_executor

    return torch_executor(**options)


def _jax(**options: object) -> Executor:
    from fuse_mlir.backends.handoff import jax_executor

    return jax_executor(**options)


def _numba(**options: object) -> Executor:
    from fuse_mlir.backends.handoff import numba_executor

    return numba_executor(**options)


def _auto(**options: object) -> Executor:
    from fuse_mlir.backends.handoff import auto_executor

    return auto_executor(**options)


BACKENDS: dict[str, Callable[..., Executor]] = {
    "reference": _reference,
    "llvm": _llvm,
    "torch": _torch,
    "jax": _jax,
    "numba": _numba,
    "auto": _auto,
}


def get_backend(name: str, **options: object) -> Executor:
    """The executor for backend ``name`` (an unknown name is a FuseError listing the known ones)."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise FuseError(f"unknown backend '{name}' (available: {', '.join(BACKENDS)})") from None
    return factory(**options)
