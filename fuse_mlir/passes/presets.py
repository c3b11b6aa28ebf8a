"""Named pipelines: ``O0``/``O2`` at the tensor_eq level, and ``<target>-O0``/``<target>-O2`` per target.

``O0`` and ``O2`` tidy a tensor_eq module in place (no lowering). Each target
of :mod:`fuse_mlir.targets` also gets its lowering pipelines, which bring a
tensor_eq module to the level its backend consumes: ``llvm-O2`` is exactly
what ``Program.compile(backend="llvm")`` runs, ``llvm-O0`` what
``compile(opt_level=0)`` runs (no fusion, no inplace).
"""

from __future__ import annotations

from fuse_mlir.passes.registry import register_pipeline
from fuse_mlir.targets import TARGETS

register_pipeline("O0", "canonicalize,cse", "no optimisation: tidy up only", level="tensor_eq")
register_pipeline("O2", "canonicalize,cse,dce,dedup", "the default tensor_eq clean-up", level="tensor_eq")

for _target in TARGETS.values():
    for _opt in ("O0", "O2"):
        register_pipeline(
            f"{_target.name}-{_opt}",
            _target.pipeline(_opt),
            f"tensor_eq to the {_target.name} target's level ({_target.level}) at {_opt}",
            level="tensor_eq",
        )
