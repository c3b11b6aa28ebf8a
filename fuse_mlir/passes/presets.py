"""Named pipelines: ``O0``/``O2``, ``te-O0``/``te-O2``, and ``<target>-O0``/``<target>-O2`` per target.

``O0`` and ``O2`` mean one thing everywhere: the default (llvm) backend's
pipeline at that level, the one ``fuse run -O2`` and ``compile(opt_level=2)``
run, so ``fuse-opt prog.fuse -p O2`` shows the module the native code is made
from (``O0``: no fusion, no inplace). ``te-O0`` and ``te-O2`` tidy a
tensor_eq module in place without lowering it. Each target of
:mod:`fuse_mlir.targets` whose backend runs a pipeline also gets its own, which
bring a tensor_eq module to the level its backend consumes (``llvm-O2`` is
``O2``; ``torch-O2`` and ``jax-O2`` tidy the module their walker runs); the
reference interpreter runs none (it is the oracle), so it has none.
"""

from __future__ import annotations

from fuse_mlir.passes.registry import register_pipeline
from fuse_mlir.targets import TARGETS

register_pipeline("te-O0", "canonicalize,cse", "tidy a tensor_eq module in place (no lowering)", level="tensor_eq")
register_pipeline(
    "te-O2", "canonicalize,cse,dce,dedup", "clean up a tensor_eq module in place (no lowering)", level="tensor_eq"
)

for _target in (t for t in TARGETS.values() if t.runs_pipeline):  # the reference interpreter runs none
    for _opt in ("O0", "O2"):
        register_pipeline(
            f"{_target.name}-{_opt}",
            _target.pipeline(_opt),
            f"tensor_eq to the {_target.name} target's level ({_target.level}) at {_opt}",
            level="tensor_eq",
        )

for _opt in ("O0", "O2"):
    register_pipeline(
        _opt,
        TARGETS["llvm"].pipeline(_opt),
        f"what `fuse run -{_opt}` and compile(opt_level={_opt[1]}) run: the llvm target's pipeline (llvm-{_opt})",
        level="tensor_eq",
    )
