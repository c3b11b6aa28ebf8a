"""Passes and pipelines: the registry, the base classes for writing a pass, and the pipeline runner.

See docs/writing-a-pass.md. The short version::

    @register_pass
    @dataclass(frozen=True)
    class MyPass(PatternPass):
        \"\"\"What it does (the first line is the summary).\"\"\"
        name = "my-pass"
        level = "tensor_eq"
        factor: float = option(1.0, help="what the option means")

        def patterns(self): return [MyPattern(self.factor)]

    Pipeline.parse("canonicalize,my-pass{factor=2.0},cse").run(module)
"""

from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, PatternPass, option
from fuse_mlir.passes.instruments import PrintIR, Timing, VerifyEach
from fuse_mlir.passes.pipeline import Hooks, PassFailure, Pipeline
from fuse_mlir.passes.registry import (
    NamedPipeline,
    PassInfo,
    all_passes,
    all_pipelines,
    get_pass,
    load_pass_plugin,
    load_plugins,
    register_pass,
    register_pipeline,
)

__all__ = [
    "AnalysisManager",
    "FusePass",
    "Hooks",
    "NamedPipeline",
    "PassFailure",
    "PassInfo",
    "PatternPass",
    "Pipeline",
    "PrintIR",
    "Timing",
    "VerifyEach",
    "all_passes",
    "all_pipelines",
    "get_pass",
    "load_pass_plugin",
    "load_plugins",
    "option",
    "register_pass",
    "register_pipeline",
]
