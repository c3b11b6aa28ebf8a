"""Per-call cost of a compiled program against Numba, and compile time in a fresh process (cold and warm cache).

``python -m benchmarks.call_overhead`` prints, for ``sum(exp(x) * y + z)``
(the ``call_overhead`` workload) at N = 1 (nothing but overhead) and N = 1000:
the fuse runner, the same runner with ``reuse_outputs``, and Numba (njit,
serial), each as the minimum over repeats of the mean of ``--calls`` calls,
in wall time and in this thread's CPU time (steadier on a shared machine).
``--compile`` adds the compile time of the workloads in new processes: the
first with an empty cache folder (cold), the next ones warm (disk cache).
No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.workloads import BY_NAME

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from fuse_mlir import Program
from fuse_mlir.backends.llvm.executor import compile_program
from benchmarks.workloads import BY_NAME
t1 = time.perf_counter()
module = Program(BY_NAME[sys.argv[1]].source).lower().module
t2, c2 = time.perf_counter(), time.process_time()
compiled = compile_program(module)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"import": t1 - t0, "lower": t2 - t1, "compile": t3 - t2, "cpu": c3 - c2, "disk": compiled.from_disk}))
"""


def per_call(fn: Callable[[], Any], calls: int, repeats: int) -> tuple[float, float]:
    """(wall, thread CPU) microseconds per call: the minimum over ``repeats`` of the mean of ``calls`` calls."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            fn()
        wall = min(wall, (time.perf_counter() - t0) / calls)
        cpu = min(cpu, (time.thread_time() - c0) / calls)
    return wall * 1e6, cpu * 1e6


def call_table(calls: int, repeats: int) -> list[str]:
    from fuse_mlir import Program

    src = BY_NAME["call_overhead"].source
    runner = Program(src).compile()
    impls: dict[str, Callable[..., Any]] = {"fuse": lambda X, Y2, Z: runner(X=X, Y2=Y2, Z=Z)}
    try:
        reusing = Program(src).compile(reuse_outputs=True)
        impls["fuse reuse_outputs"] = lambda X, Y2, Z: reusing(X=X, Y2=Y2, Z=Z)
    except TypeError:  # an older fuse_mlir (before/after comparisons)
        pass
    try:
        from benchmarks.peers import numba_kernels

        kernel = numba_kernels(np.dtype(np.float64), parallel=False)["call_overhead"]
        impls["numba"] = kernel
    except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
        print(f"numba unavailable: {e}", file=sys.stderr)
    rows = ["| N | implementation | µs per call (wall) | µs per call (CPU) |", "|---|---|---|---|"]
    for n in (1, 1000):
        rng = np.random.default_rng(0)
        X, Y2, Z = (rng.standard_normal(n) for _ in range(3))
        want = float((np.exp(X) * Y2 + Z).sum())
        for name, f in impls.items():
            got = f(X, Y2, Z)
            value = float(got["S"] if isinstance(got, dict) else got)
            assert abs(value - want) <= 1e-9 * max(1.0, abs(want)), (name, value, want)
            wall, cpu = per_call(lambda f=f, a=(X, Y2, Z): f(*a), calls, repeats)
            rows.append(f"| {n} | {name} | {wall:.2f} | {cpu:.2f} |")
    return rows


def compile_table(workloads: list[str], warm_runs: int) -> list[str]:
    rows = [
        "| workload | run | import ms | parse+lower ms | compile_program ms (wall) | (CPU) | from disk |",
        "|---|---|---|---|---|---|---|",
    ]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for w in workloads:
        with tempfile.TemporaryDirectory() as folder:
            env = {**os.environ, "FUSE_CACHE_DIR": folder, "PYTHONPATH": root}
            for k in range(1 + warm_runs):
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, w], env=env, capture_output=True, text=True, check=True, cwd=root
                )
                r = json.loads(out.stdout.strip().splitlines()[-1])
                run = "cold" if k == 0 else f"warm {k}"
                rows.append(
                    f"| {w} | {run} | {r['import'] * 1e3:.0f} | {r['lower'] * 1e3:.1f} | "
                    f"{r['compile'] * 1e3:.1f} | {r['cpu'] * 1e3:.1f} | {r['disk']} |"
                )
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--compile", action="store_true", help="also time compiles in fresh processes")
    ap.add_argument("--workloads", default="sum_exp_mul_add,row_softmax,gather_sum,relu_matmul_bias")
    ap.add_argument("--warm-runs", type=int, default=3)
    args = ap.parse_args(argv)
    print("\n".join(call_table(args.calls, args.repeats)))
    if args.compile:
        print()
        print("\n".join(compile_table(args.workloads.split(","), args.warm_runs)))


if __name__ == "__main__":
    main()
