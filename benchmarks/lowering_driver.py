"""The te → ew pattern drivers compared on one generated program: one walk with a by-class dispatch (what
``lower-te-to-ew`` runs), one walk trying every pattern in turn, and xDSL's greedy re-walk to a fixpoint.

The patterns are the same in all three; only the driver differs, so the ratios say what a driver costs.
Run from the repository root: ``python -m benchmarks.lowering_driver [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

from benchmarks.frontend_speed import program
from fuse_mlir.passes.conversions.lower_te_to_ew import NoLowering, lower_te_to_ew, te_to_ew_patterns
from fuse_mlir.passes.conversions.te_to_ew.lowering import TeLowering
from fuse_mlir.program import Program


def one_walk_try_each(module: ModuleOp) -> None:
    """One walk; each op tries the patterns in order (xDSL's GreedyRewritePatternApplier)."""
    applier = GreedyRewritePatternApplier([*te_to_ew_patterns(TeLowering()), NoLowering()], dce_enabled=False)
    PatternRewriteWalker(applier, walk_regions_first=True, apply_recursively=False).rewrite_module(module)


def greedy(module: ModuleOp) -> None:
    """xDSL's default: walk again (new ops included) until nothing changes."""
    applier = GreedyRewritePatternApplier(te_to_ew_patterns(TeLowering()), dce_enabled=False)
    PatternRewriteWalker(applier, walk_regions_first=True, apply_recursively=True).rewrite_module(module)


DRIVERS: dict[str, Callable[[ModuleOp], object]] = {
    "one walk, by-class dispatch (lower-te-to-ew)": lower_te_to_ew,
    "one walk, try each pattern": one_walk_try_each,
    "greedy re-walk to a fixpoint": greedy,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 50-equation program, 2 repeats (a smoke check)")
    args = parser.parse_args()
    n, repeats = (50, 2) if args.quick else (400, 5)
    module = Program(program(n), "big.fuse").lower().module
    ops = len(list(module.body.block.ops))
    best = dict.fromkeys(DRIVERS, float("inf"))
    for _ in range(repeats):
        for name, drive in DRIVERS.items():  # interleaved, so load changes hit every driver alike
            m = module.clone()
            gc.collect()
            t = time.perf_counter()
            drive(m)
            best[name] = min(best[name], time.perf_counter() - t)
    base = best[next(iter(DRIVERS))]
    print(f"lower-te-to-ew drivers on {n} equations ({ops} tensor_eq ops), best of {repeats}:")
    for name, t in best.items():
        print(f"  {name:46s} {1e3 * t:8.1f} ms  {t / base:5.2f}x")


if __name__ == "__main__":
    main()
