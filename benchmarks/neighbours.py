"""``python -m benchmarks.neighbours``: how much each implementation slows down right after another one ran.

``benchmarks.report`` interleaves implementations in one process, as a user
mixing libraries does. Some leave their worker threads spinning for a while
after a call (Numba's parallel layer, OpenBLAS), which takes cores from the
next call. This prints, per workload and dtype, the median time of each
implementation called alone (back to back) and called right after each other
one (alternating), so the cost of a neighbour is measured, not guessed.

Options: ``--workloads a,b`` (default ``gather_sum,row_variance,row_logsumexp``),
``--dtypes``, ``--impls`` (default ``fuse-llvm,numba-parallel,numba-fastmath,
jax,torch-compile``), ``--calls N`` (timed calls per cell, default 11).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence


def _median_ms(calls: int, before: Callable[[], object] | None, timed: Callable[[], object]) -> float:
    """Median ms of ``timed()``, each call right after an untimed ``before()`` when given."""
    times = []
    for _ in range(calls):
        if before is not None:
            before()
        t0 = time.perf_counter()
        timed()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv: Sequence[str] | None = None) -> int:
    """Print one Markdown table per workload and dtype: rows are the timed implementation, columns what ran before."""
    from benchmarks.peers import IMPLEMENTATIONS, Mismatch, Unavailable, make_inputs, prepare
    from benchmarks.workloads import BY_NAME

    ap = argparse.ArgumentParser(prog="python -m benchmarks.neighbours", description=__doc__)
    ap.add_argument("--workloads", default="gather_sum,row_variance,row_logsumexp")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--impls", default="fuse-llvm,numba-parallel,numba-fastmath,jax,torch-compile")
    ap.add_argument("--calls", type=int, default=11)
    args = ap.parse_args(argv)
    for name in args.workloads.split(","):
        if name not in BY_NAME:
            ap.error(f"unknown workload {name!r}; choose from {', '.join(sorted(BY_NAME))}")
    for impl in args.impls.split(","):
        if impl not in IMPLEMENTATIONS:
            ap.error(f"unknown implementation {impl!r}; choose from {', '.join(IMPLEMENTATIONS)}")
    for name in args.workloads.split(","):
        for dtype in args.dtypes.split(","):
            inputs = make_inputs(BY_NAME[name], dtype)
            prepared = {}
            for impl in args.impls.split(","):
                try:
                    prepared[impl] = prepare(impl, BY_NAME[name], inputs)
                except (Unavailable, Mismatch) as e:
                    print(f"<!-- {impl}: {e} -->")
            impls = list(prepared)
            print(f"\n### {name} {dtype}: median ms of the row's implementation, alone or right after the column's\n")
            print("| timed \\ before | alone | " + " | ".join(impls) + " |")
            print("|---|---:|" + "---:|" * len(impls))
            for impl in impls:
                cells = [f"{_median_ms(args.calls, None, prepared[impl].call):.3g}"]
                for other in impls:
                    if other == impl:
                        cells.append("—")
                    else:
                        cells.append(f"{_median_ms(args.calls, prepared[other].call, prepared[impl].call):.3g}")
                print(f"| {impl} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
