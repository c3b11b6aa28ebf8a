"""fuse_mlir: a tensor-equation compiler built as a multi-level rewrite framework on xDSL."""

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc
from fuse_mlir.program import Program, Runner


def compile(source: str, backend: str = "reference", **options: object) -> Runner:  # noqa: A001
    """Parse ``source`` and compile it for ``backend``: shorthand for ``Program(source).compile(...)``."""
    return Program(source).compile(backend, **options)  # type: ignore[arg-type]


__all__ = ["FuseError", "FuseRuntimeError", "Loc", "Program", "Runner", "compile"]
