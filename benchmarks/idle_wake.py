"""``python -m benchmarks.idle_wake``: what a call costs right after the process was idle.

A program that calls a kernel, then does something else for a few
milliseconds (reads the next batch, waits for a request), finds the pool's
worker threads asleep (they poll for ``FUSE_SPIN_US``, then sleep:
docs/threads.md). Waking them must not cost more than the wake-up itself: in
particular the region must still run on every core, whichever CPU the kernel's
scheduler wakes a worker on. This times report workloads (full size) after
pauses of 0, 1, 10 and 50 ms, in shuffled interleaved rounds in one process:
fuse on two threads (the median and the 95th percentile), fuse on one thread,
and Numba's parallel fastmath kernel (whose OpenMP threads spin for several
milliseconds after a call, then sleep too). Each call is timed alone, right
after its pause.

Options: ``--workloads`` (default ``row_variance,exp_mul_add,gather_sum``),
``--pauses`` (milliseconds, ``0,1,10,50``), ``--rounds`` (15), ``--dtype`` (``float64``), ``--small``
(small inputs: a smoke run).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable, Sequence

import numpy as np

WORKLOADS = ("row_variance", "exp_mul_add", "gather_sum")


def timed_after_pause(
    calls: dict[str, Callable[[], object]], pauses_s: Sequence[float], rounds: int, seed: int = 0
) -> dict[tuple[str, float], list[float]]:
    """Seconds of each call right after each pause, ``rounds`` times, in shuffled order (one warm-up call first)."""
    for call in calls.values():
        call()
    samples: dict[tuple[str, float], list[float]] = {(n, p): [] for n in calls for p in pauses_s}
    keys = list(samples)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(keys)
        for name, pause in keys:
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            calls[name]()
            samples[(name, pause)].append(time.perf_counter() - t0)
    return samples


def _calls(name: str, dtype: np.dtype, rng: np.random.Generator, small: bool) -> dict[str, Callable[[], object]]:
    """fuse on two threads and on one, and Numba's parallel fastmath kernel where it is available, on the
    workload's full-size inputs (``small``: its smoke-test inputs)."""
    from benchmarks.peers import Unavailable, numba_kernels, numba_out
    from benchmarks.workloads import BY_NAME
    from fuse_mlir import Program

    w = BY_NAME[name]
    inp = w.inputs(rng, dtype, small)
    two = Program(w.source).compile("llvm", threads=2)
    one = Program(w.source).compile("llvm", threads=1)
    calls: dict[str, Callable[[], object]] = {"two": lambda: two(**inp), "one": lambda: one(**inp)}
    try:
        nb = numba_kernels(dtype, True, True)[name]
    except (Unavailable, KeyError):
        return calls
    out = numba_out(name, inp)
    nb_args = [*inp.values(), *([out] if out is not None else [])]
    calls["numba"] = lambda: nb(*nb_args)
    return calls


def _cells(samples: dict[tuple[str, float], list[float]], pause: float) -> list[str]:
    """One table row's timings (ms): fuse two threads' median and p95, one thread's median, Numba's median and p95."""
    out = []
    for impl, q in (("two", 50), ("two", 95), ("one", 50), ("numba", 50), ("numba", 95)):
        v = samples.get((impl, pause))
        out.append(f"{np.percentile(v, q) * 1e3:.3g}" if v else "n/a")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print one Markdown table: per workload and pause, milliseconds per call."""
    from benchmarks.workloads import BY_NAME

    ap = argparse.ArgumentParser(prog="python -m benchmarks.idle_wake", description=__doc__)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--pauses", default="0,1,10,50")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    ap.add_argument("--small", action="store_true", help="small inputs (a smoke run)")
    args = ap.parse_args(argv)
    names = args.workloads.split(",")
    for name in names:
        if name not in BY_NAME:
            ap.error(f"unknown workload {name!r}; choose from {', '.join(BY_NAME)}")
    try:
        pauses = [float(p) / 1e3 for p in args.pauses.split(",")]
    except ValueError:
        ap.error(f"--pauses takes milliseconds separated by commas, got {args.pauses!r}")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    dtype = np.dtype(args.dtype)
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}\n")
    print("| workload | pause ms | fuse 2 threads | fuse 2 threads, p95 | fuse 1 thread | numba-fastmath | numba p95 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for name in names:
        samples = timed_after_pause(_calls(name, dtype, rng, args.small), pauses, args.rounds)
        for p in pauses:
            print(f"| {name} | {p * 1e3:g} | " + " | ".join(_cells(samples, p)) + " |")
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.2f}; medians unless marked, {args.dtype}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
