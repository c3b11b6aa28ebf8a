"""Cold compile time against loop-nest depth, with and without the JIT's deep-nest rule (jit.DEEP_NEST_LOOPS).

``Y[i0, iN] = A[i0..iN/2] B[iN/2..iN]`` sums A and B over about N/2 axes each
before one GEMM, so its two reduction nests are about N/2 + 1 loops deep. Each
program is compiled cold (``cache=False``, a fresh ``FUSE_CACHE_DIR``) and
timed to the end of its first call (the JIT compiles there), once with every
kernel at O3 and once with nests deeper than ``DEEP_NEST_LOOPS`` at O1.

    python -m benchmarks.nest_depth                 # N = 8 16 24 32 48 60
    python -m benchmarks.nest_depth --sizes 32,60

Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

SIZES = (8, 16, 24, 32, 48, 60)


def program(n: int) -> tuple[str, dict[str, np.ndarray]]:
    """The N-index program and inputs (extent 2 on the kept axes, 1 elsewhere)."""
    names = [f"i{k}" for k in range(n)]
    h = n // 2
    src = f"Y[i0, i{n - 1}] = A[{', '.join(names[: h + 1])}] B[{', '.join(names[h:])}]"
    return src, {"A": np.ones((2,) + (1,) * h), "B": np.ones((1,) * (n - h - 1) + (2,))}


def first_call_seconds(n: int) -> float:
    """Seconds from a cold compile to the end of the first call."""
    from fuse_mlir import Program

    src, inputs = program(n)
    runner = Program(src).compile("llvm", opt_level=2, cache=False)
    t0 = time.perf_counter()
    runner(**inputs)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", help="comma-separated index counts N (default: 8,16,24,32,48,60)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(SIZES)
    os.environ["FUSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fuse-depth-")
    from fuse_mlir.backends.llvm import jit

    rule = jit.DEEP_NEST_LOOPS
    print(f"load average {os.getloadavg()[0]:.2f}; deep-nest rule: nests deeper than {rule} loops at O1")
    print(f"{'N':>4} {'all O3 (s)':>11} {'with rule (s)':>14}")
    for n in sizes:
        jit.DEEP_NEST_LOOPS = 10**9
        plain = first_call_seconds(n)
        jit.DEEP_NEST_LOOPS = rule
        ruled = first_call_seconds(n)
        print(f"{n:>4} {plain:>11.2f} {ruled:>14.2f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
