"""The named pipelines ``-p O0`` / ``-p O2`` (and ``Pipeline.named``): one line each, redefined as passes land."""

from __future__ import annotations

from fuse_mlir.passes.registry import register_pipeline

register_pipeline("O0", "canonicalize,cse", "no optimisation: tidy up only", level="tensor_eq")
register_pipeline("O2", "canonicalize,cse,dce", "the default optimisation pipeline", level="tensor_eq")
