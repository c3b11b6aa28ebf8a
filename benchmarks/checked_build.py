"""The cost of the checked build: each workload compiled with and without ``check_bounds``, on one thread.

``python -m benchmarks.checked_build [NAME ...]`` (default: every workload of
``benchmarks/workloads.py``) runs both kernels on the full-size float64
inputs, interleaving their calls, and prints the best of ``--repeats`` calls
of each and the ratio. Interleaving and the minimum keep the comparison fair
on a shared machine. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.workloads import WORKLOADS
from fuse_mlir import Program


def measure(name: str, repeats: int) -> tuple[float, float]:
    """(unchecked, checked) best call time in seconds of workload ``name``."""
    w = next(w for w in WORKLOADS if w.name == name)
    inputs = w.inputs(np.random.default_rng(0), np.dtype(np.float64), False)
    runs = {checked: Program(w.source).compile("llvm", check_bounds=checked, threads=1) for checked in (False, True)}
    best = dict.fromkeys(runs, float("inf"))
    for run in runs.values():
        run(**inputs)
    for _ in range(repeats):
        for checked, run in runs.items():
            t0 = time.perf_counter()
            run(**inputs)
            best[checked] = min(best[checked], time.perf_counter() - t0)
    return best[False], best[True]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="workloads (default: all)")
    parser.add_argument("--repeats", type=int, default=15, help="calls of each kernel (default: 15)")
    args = parser.parse_args(argv)
    print("| workload | unchecked | checked | ratio |\n|---|---|---|---|")
    for name in args.names or [w.name for w in WORKLOADS]:
        plain, checked = measure(name, args.repeats)
        print(f"| `{name}` | {plain * 1e3:.1f} ms | {checked * 1e3:.1f} ms | {checked / plain:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
