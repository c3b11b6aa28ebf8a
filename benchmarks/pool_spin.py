"""``python -m benchmarks.pool_spin``: what waking the thread pool costs, by input size.

A parallel call wakes the pool's worker threads and, when it runs out of
blocks, waits for them. A thread that sleeps takes tens of microseconds to
wake (a futex call, and in a virtual machine waking an idle virtual CPU), so
the pool's idle threads poll for ``FUSE_SPIN_US`` (default 100 µs) before they
sleep (docs/threads.md). This times, in interleaved rounds in one process,
two workloads of the report at sizes from 100 thousand to 10 million elements:
fuse on one thread, on two threads with idle threads that sleep at once
(``set_spin(0)``), on two threads with the default spin, and Numba's parallel
fastmath kernel (whose threads spin too). The cost of waking shows as the gap
between the two-thread columns, and against the one-thread time halved.

Options: ``--sizes`` (default ``100000,300000,1000000,10000000``),
``--workloads`` (``gather_sum,sum_exp_mul_add``), ``--dtype`` (``float64``),
``--quick`` (a shorter time budget).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

import numpy as np

WORKLOADS = ("gather_sum", "sum_exp_mul_add")


def _inputs(name: str, n: int, dtype: np.dtype, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The workload's inputs with ``n`` elements (the gather: ``n`` indices into a table of ``n / 10``)."""
    if name == "gather_sum":
        m = max(1, n // 10)
        return {"X": rng.standard_normal(m).astype(dtype), "Idx": rng.integers(0, m, n)}
    return {k: rng.standard_normal(n).astype(dtype) for k in ("X", "Y2", "Z")}


def _calls(
    one: Callable[..., object],
    two: Callable[..., object],
    nb: Callable[..., object] | None,
    inp: dict[str, np.ndarray],
    name: str,
) -> dict[str, Callable[[], object]]:
    """The timed calls: fuse on one thread, on two with no spin and with the default spin, Numba's kernel."""
    from fuse_mlir.backends.llvm.parallel import set_spin

    def spun(us: int | None) -> Callable[[], object]:
        def call() -> object:
            set_spin(us)
            return two(**inp)

        return call

    calls: dict[str, Callable[[], object]] = {"one": lambda: one(**inp), "sleep": spun(0), "spin": spun(None)}
    if nb is not None:
        args = [inp[k] for k in (("X", "Idx") if name == "gather_sum" else ("X", "Y2", "Z"))]
        calls["numba"] = lambda: nb(*args)
    return calls


def main(argv: Sequence[str] | None = None) -> int:
    """Print one Markdown table: median microseconds per call, per workload and size."""
    from benchmarks.measure import FULL, QUICK, interleaved_medians
    from benchmarks.peers import Unavailable, numba_kernels
    from benchmarks.workloads import BY_NAME
    from fuse_mlir import Program
    from fuse_mlir.backends.llvm.parallel import set_spin

    ap = argparse.ArgumentParser(prog="python -m benchmarks.pool_spin", description=__doc__)
    ap.add_argument("--sizes", default="100000,300000,1000000,10000000")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    names = args.workloads.split(",")
    for name in names:
        if name not in WORKLOADS:
            ap.error(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes takes integers separated by commas, got {args.sizes!r}")
    dtype = np.dtype(args.dtype)
    budget = QUICK if args.quick else FULL
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}\n")
    print("| workload | elements | fuse 1 thread | fuse 2 threads, no spin | fuse 2 threads, spin | numba-fastmath |")
    print("|---|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for name in names:
        w = BY_NAME[name]
        one = Program(w.source).compile("llvm", threads=1)
        two = Program(w.source).compile("llvm", threads=2)
        try:
            nb: Callable[..., object] | None = numba_kernels(dtype, True, True)[name]
        except Unavailable:
            nb = None
        for n in sizes:
            inp = _inputs(name, n, dtype, rng)

            calls = _calls(one, two, nb, inp, name)
            try:
                med = interleaved_medians(calls, budget)
            finally:
                set_spin(None)
            cells = [f"{med[k] * 1e6:.1f}" if k in med else "n/a" for k in ("one", "sleep", "spin", "numba")]
            print(f"| {name} | {n:,} | " + " | ".join(cells) + " |")
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.2f}; median µs per call, {args.dtype}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
