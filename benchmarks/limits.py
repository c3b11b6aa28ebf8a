"""The machine's limits, measured in the benchmark's own process: memory bandwidth, exp, gather and GEMM throughput.

The run-time bounds of :mod:`benchmarks.bounds` divide bytes by bandwidth and
exp counts by exp throughput; these numbers come from this machine, now
(DESIGN.md §6's constants were one machine's). Measurements:

- read+write bandwidth: every core copies its share of a buffer much larger
  than the last-level cache into a second one (``np.copyto`` releases the
  GIL, so Python threads run in parallel), and fuse_mlir's ``Y[i] = X0[i] + 1``
  on all cores (whose stores stream past the caches, without the
  read-for-ownership of each output line an ordinary store pays); bytes read
  plus written over the best time of the two;
- read-only bandwidth: every core sums its share (``np.add.reduce``), and
  fuse_mlir's sum ``S = X0[i]`` on all cores; bytes read over the best time;
- exp throughput per core: the fastest vectorised exp available here (NumPy's,
  and fuse_mlir's own expansion on one thread) on a cache-resident array,
  nanoseconds per element, best of several runs;
- BLAS GEMM throughput: NumPy's matmul of two 2048 x 2048 matrices of the
  dtype (its OpenBLAS, on all cores), flops over the best time; the
  matrix-product workloads' bound (the constants of :mod:`benchmarks.bounds`
  were another machine's: a Zen 5 VM ran GEMM at twice their rate);
- random-read throughput per core: the fastest gather from a table of the
  ``gather_sum`` workload's size (1M elements) at uniformly random positions
  available here (NumPy's ``take``, and fuse_mlir's gather-sum on one
  thread), nanoseconds per element, the index read included. A random read
  costs a cache or DRAM latency that streaming bandwidth does not measure, so
  the gather's bound counts it.

Each is the best of its repeats (a limit, not a typical time).

This VM's bandwidth drifts during a run (fuse_mlir's sum over 512 MB on two
cores: 51 GB/s in one run, 33–35 GB/s a minute later, 59 GB/s in one of the
header's repeats), so a bandwidth taken once at the start can be exceeded by
a workload timed later (150% "of the bound" in one report) or be a moment no
workload saw. The report therefore times a bandwidth probe
(:func:`bandwidth_probe`) and, for the gather, a random-read probe
(:func:`gather_probe`) in the workload's own interleaved rounds, and the
bound takes the probe's median there, the statistic and the minutes of the
workloads' own times; the figures above stay in the header, and are the
bound's where no probe ran (exp throughput, which does not drift: 0.72–0.78 ns
float64 in every run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True)
class Limits:
    """Measured machine limits."""

    cores: int
    rw_gbps: float  # read + written bytes per second, all cores
    ro_gbps: float  # read-only streaming, all cores
    exp_ns: dict[str, float]  # nanoseconds per exp per core, by dtype
    gather_ns: dict[str, float]  # nanoseconds per random read from a 1M-element table per core, by dtype
    gemm_gflops: dict[str, float] = field(default_factory=dict)  # BLAS GEMM on all cores, by dtype (none: not measured)

    def describe(self) -> str:
        exp = ", ".join(f"{d} {ns:.2f} ns" for d, ns in self.exp_ns.items())
        gather = ", ".join(f"{d} {ns:.2f} ns" for d, ns in self.gather_ns.items())
        gemm = ", ".join(f"{d} {g:.0f} GFLOP/s" for d, g in self.gemm_gflops.items())
        return (
            f"{self.cores} cores; bandwidth {self.rw_gbps:.1f} GB/s read+write, {self.ro_gbps:.1f} GB/s read-only; "
            f"exp per element per core: {exp}; random read from a 1M-element table per core: {gather}"
            + (f"; BLAS GEMM on all cores: {gemm}" if gemm else "")
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


def stream_source(streams: int, read_only: bool) -> str:
    """The bandwidth probe's program: the sum of ``streams`` arrays (read-only), or their sum plus one into a new
    array (read+write, whose stores stream past the caches without a read-for-ownership, as the workloads'
    outputs do). fuse_mlir's sum reads faster than ``np.add.reduce`` here (33–35 against 31 GB/s)."""
    terms = " + ".join(f"X{k}[i]" for k in range(streams))
    return f"S = {terms}\nexport S" if read_only else f"Y[i] = {terms} + 1.0\nexport Y"


EXP_SRC = "Y[i] = exp(X[i])\nexport Y"
"""The exp probe: fuse_mlir's vectorised exp on one thread, over a cache-resident array."""

GATHER_SRC = "S = X[Idx[n]]\nexport S"
"""The random-read probe: fuse_mlir's gather from a table of :data:`GATHER_TABLE` elements on one thread."""

EXP_N = 1 << 15
"""Elements the exp limit evaluates per call (256 KiB of float64: resident in L2, so exp's arithmetic is the limit)."""

GATHER_TABLE = 1 << 20
"""Elements in the table the random-read limit gathers from (the ``gather_sum`` workload's)."""

GATHER_N = 1 << 21
"""Positions the random-read limit gathers per call."""


@dataclass(frozen=True)
class Probe:
    """A call measuring one limit, and ``apply``: the :class:`Limits` with the figure one call of it in the given
    seconds reached in place of their own."""

    call: Callable[[], object]
    apply: Callable[[Limits, float], Limits]


def _fuse_call(src: str, inputs: dict[str, np.ndarray], threads: int) -> Callable[[], object] | None:
    """fuse_mlir's compiled ``src`` on ``inputs`` (warmed up), or None where it cannot compile here."""
    try:
        from fuse_mlir import Program

        run = Program(src).compile("llvm", threads=threads, reuse_outputs=True)
        run(**inputs)
    except Exception:  # noqa: BLE001 (the callers fall back to NumPy's measurement)
        return None
    return lambda: run(**inputs)


def bandwidth_probe(nbytes: int, read_only: bool, n_cores: int | None = None, streams: int = 1) -> Probe:
    """A streaming call moving about ``nbytes`` over ``streams`` input arrays (so it sees the caches and the
    prefetchers as a workload of that size and shape does): fuse_mlir's sum of them (read-only), or their sum
    written to one more array (read+write) on ``n_cores`` threads; NumPy's one-thread sum or copy where
    fuse_mlir cannot compile here."""
    streams = max(streams, 1)
    arrays = streams if read_only else streams + 1
    n = max(nbytes // (8 * arrays), 1)
    inputs = {f"X{k}": np.ones(n) for k in range(streams)}
    moved = 8 * n * arrays
    call = _fuse_call(stream_source(streams, read_only), inputs, n_cores or cores())
    if call is None:
        src = np.ones(n * streams)
        dst = np.zeros(n * streams)
        call = (lambda: np.add.reduce(src)) if read_only else (lambda: np.copyto(dst, src))
        moved = src.nbytes * (1 if read_only else 2)

    def apply(limits: Limits, seconds: float) -> Limits:
        gbps = moved / seconds / 1e9
        return replace(limits, ro_gbps=gbps) if read_only else replace(limits, rw_gbps=gbps)

    return Probe(call, apply)


def _per_element(field: str, dtype: str, n: int) -> Callable[[Limits, float], Limits]:
    def apply(limits: Limits, seconds: float) -> Limits:
        table: dict[str, float] = getattr(limits, field)
        return replace(limits, **{field: {**table, dtype: seconds / n * 1e9}})

    return apply


def exp_probe(dtype: str) -> Probe | None:
    """fuse_mlir's exp on one thread over :data:`EXP_N` cache-resident elements (None: it cannot compile)."""
    x = np.random.default_rng(0).uniform(-5, 5, EXP_N).astype(dtype)
    call = _fuse_call(EXP_SRC, {"X": x}, 1)
    return Probe(call, _per_element("exp_ns", dtype, EXP_N)) if call else None


def _gather_inputs(dtype: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {"X": rng.standard_normal(GATHER_TABLE).astype(dtype), "Idx": rng.integers(0, GATHER_TABLE, GATHER_N)}


def gather_probe(dtype: str) -> Probe | None:
    """fuse_mlir's gather of :data:`GATHER_N` random positions on one thread (None: it cannot compile)."""
    call = _fuse_call(GATHER_SRC, _gather_inputs(dtype), 1)
    return Probe(call, _per_element("gather_ns", dtype, GATHER_N)) if call else None


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
    numpy = Limits(n_cores, 2 * src.nbytes / t_copy / 1e9, src.nbytes / t_read / 1e9, {}, {})
    fuse = [bandwidth_probe(src.nbytes * (1 if ro else 2), ro, n_cores) for ro in (False, True)]
    rw, ro = (p.apply(numpy, _best(p.call, repeats)) for p in fuse)
    return max(numpy.rw_gbps, rw.rw_gbps), max(numpy.ro_gbps, ro.ro_gbps)


def _fastest_ns(n: int, numpy_call: Callable[[], object], probe: Probe | None, repeats: int) -> float:
    """Nanoseconds per element of the faster of ``numpy_call`` and the fuse probe (one thread)."""
    times = [_best(numpy_call, repeats)]
    if probe is not None:
        times.append(_best(probe.call, repeats))
    return min(times) / n * 1e9


def _exp_ns(dtype: str, repeats: int) -> float:
    x = np.random.default_rng(0).uniform(-5, 5, EXP_N).astype(dtype)
    out = np.empty_like(x)
    return _fastest_ns(EXP_N, lambda: np.exp(x, out=out), exp_probe(dtype), repeats)


def _gather_ns(dtype: str, repeats: int) -> float:
    inputs = _gather_inputs(dtype)
    out = np.empty(GATHER_N, dtype)
    return _fastest_ns(GATHER_N, lambda: np.take(inputs["X"], inputs["Idx"], out=out), gather_probe(dtype), repeats)


def _gemm_gflops(dtype: str, n: int, repeats: int) -> float:
    """GFLOP/s of NumPy's matmul (its BLAS, on the threads it uses: all cores) of two n x n matrices."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
    out = np.empty((n, n), dtype)
    np.matmul(a, b, out=out)  # the BLAS threads start here, not in the first timed call
    return 2 * n**3 / _best(lambda: np.matmul(a, b, out=out), repeats) / 1e9


def measure(quick: bool = False) -> Limits:
    """Measure the limits (a few seconds; ``quick``: fewer repeats on smaller buffers)."""
    n_cores = cores()
    rw, ro = _bandwidth(n_cores, (128 if quick else 512) << 20, 3 if quick else 7)
    reps = 20 if quick else 100
    dtypes = ("float64", "float32")
    gather_reps = 5 if quick else 15
    return Limits(
        n_cores,
        rw,
        ro,
        {d: _exp_ns(d, reps) for d in dtypes},
        {d: _gather_ns(d, gather_reps) for d in dtypes},
        {d: _gemm_gflops(d, 1024 if quick else 2048, 3 if quick else 5) for d in dtypes},
    )
