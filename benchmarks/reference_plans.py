"""What the per-op plans save the reference interpreter: a run with cached plans against one that decodes every op.

The reference interpreter (and the torch/jax array walker) reads each op's
index names, projections, parameters and access axes from
:mod:`fuse_mlir.interp.plans`, decoded once per op and cached. The peer here
is the same interpreter with the plans dropped before every run, which is
the attribute decoding it did per op and run before the plans existed. Both
are measured in this process on the same lowered modules (the examples the
reference runs in milliseconds, where decoding is a visible share); the
report is the ratio decoded/cached per example (above 1: the cache helps).

Run from the repository root::

    python -m benchmarks.reference_plans            # 7 rounds of 20 runs per example and variant
    python -m benchmarks.reference_plans --quick    # a smoke check: 3 rounds of 3 runs
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

from fuse_mlir import Program
from fuse_mlir.interp.plans import clear_plans

EXAMPLES = ("datalog.fuse", "hmm.fuse", "rnn.fuse", "gnn.fuse", "attention.fuse", "mlp.fuse")
ROOT = Path(__file__).resolve().parent.parent


def best_of(fn: Callable[[], object], rounds: int, runs: int, before: Callable[[], None] | None = None) -> float:
    """The best mean seconds per call over ``rounds`` rounds of ``runs`` calls (``before`` runs untimed first)."""
    best = float("inf")
    for _ in range(rounds):
        total = 0.0
        for _ in range(runs):
            if before is not None:
                before()
            t0 = time.perf_counter()
            fn()
            total += time.perf_counter() - t0
        best = min(best, total / runs)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds of 3 runs: a smoke check, not a measurement")
    ap.add_argument("--examples", default=",".join(EXAMPLES), help="comma-separated example files")
    args = ap.parse_args()
    rounds, runs = (3, 3) if args.quick else (7, 20)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'example':16} {'cached ms':>10} {'decoded ms':>11} {'ratio':>6}")
    for name in args.examples.split(","):
        run = Program.from_file(ROOT / "examples" / name).compile("reference")
        run()  # lower once and warm NumPy; inputs come from the example's own files
        cached = best_of(run, rounds, runs)
        decoded = best_of(run, rounds, runs, before=clear_plans)
        print(f"{name:16} {cached * 1e3:10.3f} {decoded * 1e3:11.3f} {decoded / cached:6.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
