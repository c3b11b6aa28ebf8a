"""Base classes for fuse_mlir passes: whole-module passes and pattern-based passes.

Every pass is an xDSL :class:`~xdsl.passes.ModulePass`: a frozen dataclass
whose fields are its options, whose ``name`` class attribute is what pipelines
call it, and whose docstring is its description. Subclassing :class:`FusePass`
instead adds two things a plain ``ModulePass`` lacks:

- ``run(ctx, module, analyses) -> bool``: the pass gets the pipeline's
  :class:`~fuse_mlir.passes.analysis.AnalysisManager` and says whether it
  changed the module (so unchanged modules keep their cached analyses);
- ``level`` and ``example`` class attributes, shown by ``fuse-opt
  --list-passes`` and in ``docs/passes.md``.

:class:`PatternPass` runs a set of rewrite patterns with xDSL's greedy driver.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker, RewritePattern

from fuse_mlir.passes.analysis import AnalysisManager

ANY_LEVEL = "any"


def option(default: Any, *, help: str) -> Any:  # noqa: A002 (argparse's name for it)
    """A pass option with a default and a one-line help text (shown by ``--list-passes`` and the docs)."""
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class FusePass(ModulePass):
    """Base of fuse_mlir passes: implement :meth:`run`."""

    level: ClassVar[str] = ANY_LEVEL
    """The dialect level the pass consumes: tensor_eq, elemwise, loop, llvm, or any."""

    example: ClassVar[str | None] = None
    """MLIR text the docs run the pass on to show a before/after example."""

    example_pipeline: ClassVar[str | None] = None
    """The pipeline the docs run on ``example`` (default: the pass alone, default options)."""

    @abstractmethod
    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool | None:
        """Transform ``module`` in place; return False if nothing changed (None counts as changed)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """xDSL's entry point: run with a fresh analysis manager (used outside fuse_mlir pipelines)."""
        self.run(ctx, op, AnalysisManager(op))


@dataclasses.dataclass(frozen=True)
class PatternPass(FusePass):
    """A pass made of rewrite patterns, applied greedily until none matches: implement :meth:`patterns`.

    Unlike xDSL's default, the driver does *not* delete unused side-effect-free
    ops (``dce_enabled = False``): removing dead code is the ``dce`` pass's job.
    """

    apply_recursively: ClassVar[bool] = True
    """Re-run the patterns until nothing changes (False: one sweep)."""
    walk_reverse: ClassVar[bool] = False
    """Visit ops from the last to the first."""
    dce_enabled: ClassVar[bool] = False
    """Let the driver erase ops whose results are unused and that have no side effects."""
    folding_enabled: ClassVar[bool] = False
    """Let the driver fold ops with constant operands."""

    @abstractmethod
    def patterns(self) -> Sequence[RewritePattern]:
        """The rewrite patterns, built from this pass's options."""

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        applier = GreedyRewritePatternApplier(
            list(self.patterns()), ctx=ctx, dce_enabled=self.dce_enabled, folding_enabled=self.folding_enabled
        )
        walker = PatternRewriteWalker(applier, apply_recursively=self.apply_recursively, walk_reverse=self.walk_reverse)
        return walker.rewrite_module(module)


def run_pass(pass_: ModulePass, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
    """Run any pass; a plain ``ModulePass`` (no ``run``) counts as having changed the module."""
    if isinstance(pass_, FusePass):
        return pass_.run(ctx, module, analyses) is not False
    pass_.apply(ctx, module)
    return True
