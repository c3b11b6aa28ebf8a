"""The machine's limits, measured in the benchmark's own process: memory bandwidth and exp throughput.

The run-time bounds of :mod:`benchmarks.bounds` divide bytes by bandwidth and
exp counts by exp throughput; these numbers come from this machine, now
(DESIGN.md §6's constants were one machine's). Measurements:

- read+write bandwidth: every core copies its share of a buffer much larger
  than the last-level cache into a second one (``np.copyto`` releases the
  GIL, so Python threads run in parallel), and fuse_mlir's ``Y[i] = X[i] + 1``
  on all cores (whose stores stream past the caches, without the
  read-for-ownership of each output line an ordinary store pays); bytes read
  plus written over the best time of the two;
- read-only bandwidth: every core sums its share (``np.add.reduce``);
- exp throughput per core: the fastest vectorised exp available here (NumPy's,
  and fuse_mlir's own expansion on one thread) on a cache-resident array,
  nanoseconds per element, best of several runs;
- random-read throughput per core: the fastest gather from a table of the
  ``gather_sum`` workload's size (1M elements) at uniformly random positions
  available here (NumPy's ``take``, and fuse_mlir's gather-sum on one
  thread), nanoseconds per element, the index read included. A random read
  costs a cache or DRAM latency that streaming bandwidth does not measure, so
  the gather's bound counts it.

Each is the best of its repeats (a limit, not a typical time).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Limits:
    """Measured machine limits."""

    cores: int
    rw_gbps: float  # read + written bytes per second, all cores
    ro_gbps: float  # read-only streaming, all cores
    exp_ns: dict[str, float]  # nanoseconds per exp per core, by dtype
    gather_ns: dict[str, float]  # nanoseconds per random read from a 1M-element table per core, by dtype

    def describe(self) -> str:
        exp = ", ".join(f"{d} {ns:.2f} ns" for d, ns in self.exp_ns.items())
        gather = ", ".join(f"{d} {ns:.2f} ns" for d, ns in self.gather_ns.items())
        return (
            f"{self.cores} cores; bandwidth {self.rw_gbps:.1f} GB/s read+write, {self.ro_gbps:.1f} GB/s read-only; "
            f"exp per element per core: {exp}; random read from a 1M-element table per core: {gather}"
        )


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _best(f: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def _bandwidth(n_cores: int, nbytes: int, repeats: int) -> tuple[float, float]:
    n = nbytes // 8
    src = np.ones(n)
    dst = np.empty(n)
    dst[:] = 0.0  # fault the pages in before timing
    bounds = [(n * k // n_cores, n * (k + 1) // n_cores) for k in range(n_cores)]
    with ThreadPoolExecutor(n_cores) as pool:

        def copy() -> None:
            list(pool.map(lambda b: np.copyto(dst[b[0] : b[1]], src[b[0] : b[1]]), bounds))

        def read() -> None:
            list(pool.map(lambda b: np.add.reduce(src[b[0] : b[1]]), bounds))

        t_copy = _best(copy, repeats)
        t_read = _best(read, repeats)
    try:
        from fuse_mlir import Program

        run = Program("Y[i] = X[i] + 1.0\nexport Y").compile("llvm", threads=n_cores, reuse_outputs=True)
        run(X=src)
        t_copy = min(t_copy, _best(lambda: run(X=src), repeats))
    except Exception:  # noqa: BLE001 (NumPy's copy alone is still a measurement)
        pass
    return 2 * src.nbytes / t_copy / 1e9, src.nbytes / t_read / 1e9


def _fastest_ns(
    n: int,
    numpy_call: Callable[[], object],
    src: str,
    inputs: dict[str, np.ndarray],
    repeats: int,
    reuse_outputs: bool = False,
) -> float:
    """Nanoseconds per element of the faster of ``numpy_call`` and the fuse program ``src`` on one thread."""
    times = [_best(numpy_call, repeats)]
    try:
        from fuse_mlir import Program

        run = Program(src).compile("llvm", threads=1, reuse_outputs=reuse_outputs)
        run(**inputs)
        times.append(_best(lambda: run(**inputs), repeats))
    except Exception:  # noqa: BLE001 (a limit from NumPy alone is still a measurement)
        pass
    return min(times) / n * 1e9


def _exp_ns(dtype: str, repeats: int) -> float:
    n = 1 << 15  # 256 KiB of float64: resident in L2, so exp's arithmetic is the limit
    x = np.random.default_rng(0).uniform(-5, 5, n).astype(dtype)
    out = np.empty_like(x)
    src = "Y[i] = exp(X[i])\nexport Y"
    return _fastest_ns(n, lambda: np.exp(x, out=out), src, {"X": x}, repeats, reuse_outputs=True)


GATHER_TABLE = 1 << 20
"""Elements in the table the random-read limit gathers from (the ``gather_sum`` workload's)."""


def _gather_ns(dtype: str, repeats: int) -> float:
    n = 1 << 21
    rng = np.random.default_rng(1)
    x = rng.standard_normal(GATHER_TABLE).astype(dtype)
    idx = rng.integers(0, GATHER_TABLE, n)
    out = np.empty(n, dtype)
    src = "S = X[Idx[n]]\nexport S"
    return _fastest_ns(n, lambda: np.take(x, idx, out=out), src, {"X": x, "Idx": idx}, repeats)


def measure(quick: bool = False) -> Limits:
    """Measure the limits (about a second; ``quick``: fewer repeats on a smaller buffer)."""
    n_cores = cores()
    rw, ro = _bandwidth(n_cores, (128 if quick else 512) << 20, 3 if quick else 7)
    reps = 20 if quick else 100
    dtypes = ("float64", "float32")
    gather_reps = 5 if quick else 15
    return Limits(
        n_cores, rw, ro, {d: _exp_ns(d, reps) for d in dtypes}, {d: _gather_ns(d, gather_reps) for d in dtypes}
    )
