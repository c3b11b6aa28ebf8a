"""fuse_mlir: a tensor-equation compiler built as a multi-level rewrite framework on xDSL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc

if TYPE_CHECKING:
    from fuse_mlir.program import Program, Runner

__version__ = "0.1.0"  # the package version: pyproject.toml reads it from here


def compile(source: str, backend: str = "llvm", **options: object) -> Runner:  # noqa: A001
    """Parse ``source`` and compile it for ``backend``: shorthand for ``Program(source).compile(...)``."""
    from fuse_mlir.program import Program

    return Program(source).compile(backend, **options)  # type: ignore[arg-type]


# The pass library (fuse_mlir.passes), importable from the top level; loaded on first use.
_PASS_API = ("FusePass", "PatternPass", "Pipeline", "option", "register_pass", "register_pipeline")


def __getattr__(name: str) -> object:
    """``Program``, ``Runner`` and the pass API, imported on first use: ``import fuse_mlir`` stays light (no xDSL,
    no backend, no SciPy; docs/runtime.md, start-up)."""
    if name in ("Program", "Runner"):
        import fuse_mlir.program

        return getattr(fuse_mlir.program, name)
    if name in _PASS_API:
        import fuse_mlir.passes

        return getattr(fuse_mlir.passes, name)
    raise AttributeError(f"module 'fuse_mlir' has no attribute '{name}'")


__all__ = ["__version__", "FuseError", "FuseRuntimeError", "Loc", "Program", "Runner", "compile", *_PASS_API]
