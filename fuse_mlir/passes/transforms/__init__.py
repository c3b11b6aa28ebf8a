"""The built-in transforms: passes that rewrite a module within its level (MLIR's ``lib/Transforms``).

One module per pass (``dedup``, ``fuse``, ``inplace``, ...), plus the helpers only transforms use
(``schedule``, ``kernel_merge``). The pass infrastructure (registry, pipeline, instruments, levels) is in
:mod:`fuse_mlir.passes`; the lowerings between levels are the ``lower_*`` conversion modules.
"""
