"""Side-by-side median timing of every implementation, compile times, and the machine's description.

Used by ``python -m benchmarks.report``. For one workload and dtype all
implementations are prepared (compiled, warmed up, checked), then timed in
interleaved rounds in a shuffled order, so load from other processes on a
shared machine falls on all of them alike; each implementation's time is
the median over rounds. Calls shorter than ``MIN_BATCH_S`` are timed in
batches. Each timed batch follows one untimed call of the same
implementation (``settle``): the worker threads the previous implementation
leaves spinning (numba's, torch's OpenMP pool, OpenBLAS) take cores for
5–20 ms after its call, which slowed the next one by up to 45% (measured:
fuse's row logsumexp 9.5 ms alone, 13.5–14 ms right after numba or
torch.compile, 9.5–9.8 ms after one settling call). One call is not always
long enough: Numba's OpenMP threads burn 8–10 ms of CPU after each call, so
fuse's row variance, a 4 ms call, still ran at 5.5 ms after its settling call
and at 4.3 ms after the process had gone quiet (float32 gather: 7.2 and
5.4 ms). So with ``quiet`` (the report's default) each settling call waits
first until no thread of the process is busy (:func:`wait_quiet`). That
cross-library cost is real but not the kernel's speed; ``python -m
benchmarks.neighbours`` reports it on its own.
"""

from __future__ import annotations

import gc
import math
import os
import platform
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from benchmarks.bounds import Bound, bound, probes
from benchmarks.limits import Limits
from benchmarks.peers import (
    IMPLEMENTATIONS,
    Mismatch,
    Prepared,
    Unavailable,
    make_inputs,
    prepare,
    reference,
    versions,
)
from benchmarks.workloads import Workload

MIN_BATCH_S = 2e-3


@dataclass(frozen=True)
class Budget:
    """How long to time each (workload, dtype): target seconds over all implementations, rounds' limits."""

    target_s: float
    min_rounds: int
    max_rounds: int


FULL = Budget(target_s=4.0, min_rounds=7, max_rounds=300)
QUICK = Budget(target_s=0.6, min_rounds=3, max_rounds=30)


@dataclass
class ImplResult:
    """One implementation's outcome on one workload and dtype."""

    impl: str
    status: str = "ok"  # ok | unavailable | mismatch | error
    median_s: float | None = None
    first_call_s: float | None = None
    note: str = ""

    @property
    def compile_estimate_s(self) -> float | None:
        """First call minus a steady call: the one-time compile (and first-touch) cost."""
        if self.median_s is None or self.first_call_s is None:
            return None
        return max(self.first_call_s - self.median_s, 0.0)


@dataclass
class WorkloadResult:
    """All implementations on one workload and dtype, with the run-time bound."""

    workload: str
    dtype: str
    impls: dict[str, ImplResult] = field(default_factory=dict)
    bound: Bound | None = None


@dataclass
class CompileResult:
    """fuse-llvm compile times of one workload's program for one dtype."""

    workload: str
    dtype: str
    cold_s: float  # Program(src) + lower + compile_program(cache=False)
    backend_s: float  # CompiledProgram.compile_seconds of the cold compile (passes + LLVM)
    warm_s: float  # Program(src) + lower + compile_program(cache=True), a cache hit


QUIET_WINDOW_S = 2e-3
"""The window :func:`wait_quiet` samples the process's CPU time over."""

QUIET_MAX_S = 0.2
"""The longest :func:`wait_quiet` waits (a thread that never parks does not stall the benchmark)."""


def wait_quiet(window_s: float = QUIET_WINDOW_S, max_s: float = QUIET_MAX_S) -> float:
    """Sleep until a window of ``window_s`` passes in which the process's threads, together, used under a
    fifth of one CPU (other libraries' worker threads have stopped spinning), or ``max_s`` has passed; the
    seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < max_s:
        cpu = time.process_time()
        time.sleep(window_s)
        if time.process_time() - cpu < 0.2 * window_s:
            break
    return time.perf_counter() - start


def interleaved_medians(
    calls: dict[str, Callable[[], object]],
    budget: Budget,
    seed: int = 0,
    settle: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    quiet: bool = False,
) -> dict[str, float]:
    """Median seconds per call of each of ``calls``, timed in interleaved shuffled rounds (with ``settle``,
    each timed batch right after one untimed call of the same one; with ``quiet``, that settling call waits
    first until the process is quiet, :func:`wait_quiet`; ``clock``: the timer, wall time by default)."""
    if not calls:
        return {}
    estimate: dict[str, float] = {}
    for name, call in calls.items():
        t0 = time.perf_counter()
        call()
        estimate[name] = max(time.perf_counter() - t0, 1e-7)
    inner = {name: max(1, min(100_000, math.ceil(MIN_BATCH_S / t))) for name, t in estimate.items()}
    round_s = sum((inner[n] + (1 if settle else 0)) * estimate[n] for n in calls)
    rounds = max(budget.min_rounds, min(budget.max_rounds, math.ceil(budget.target_s / round_s)))
    samples: dict[str, list[float]] = {n: [] for n in calls}
    order = list(calls)
    rng = random.Random(seed)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            rng.shuffle(order)
            for name in order:
                call, k = calls[name], inner[name]
                if settle:
                    if quiet:
                        wait_quiet()
                    call()
                t0 = clock()
                for _ in range(k):
                    call()
                samples[name].append((clock() - t0) / k)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {n: float(np.median(s)) for n, s in samples.items()}


PROBE = "(limit probe)"
"""The limit probes' name among the timed calls (not implementations: never in the results)."""


def measure_workload(
    workload: Workload,
    dtype: str,
    impls: tuple[str, ...] = IMPLEMENTATIONS,
    budget: Budget = FULL,
    small: bool = False,
    log: Callable[[str], None] = print,
    limits: Limits | None = None,
    settle: bool = True,
) -> WorkloadResult:
    """Prepare, check and time every implementation on one workload and dtype (``settle``: each timed batch
    after the process went quiet and one untimed call, see :func:`interleaved_medians`).

    With measured ``limits``, the probes of the limits the workload's bound uses (:func:`benchmarks.bounds.probes`:
    a bandwidth probe moving as many bytes, the random-read probe for the gather) are timed in the same
    interleaved rounds, and the bound takes each probe's median figure in place of the limits': the
    machine's speed drifts during a run, so a bound from minutes earlier can be a moment no workload saw."""
    inputs = make_inputs(workload, dtype, small)
    want = reference(workload, inputs)
    result = WorkloadResult(workload.name, dtype)
    prepared: dict[str, Prepared] = {}
    for impl in impls:
        r = result.impls.setdefault(impl, ImplResult(impl))
        try:
            p = prepare(impl, workload, inputs, want)
        except Unavailable as e:
            r.status, r.note = "unavailable", str(e)
        except Mismatch as e:
            r.status, r.note = "mismatch", str(e)
        except Exception as e:  # a failing fuse compile is a result to report
            r.status, r.note = "error", f"{impl} on {workload.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        else:
            prepared[impl] = p
            r.first_call_s = p.first_call_seconds
        if r.status != "ok":
            log(f"  {impl}: {r.status}: {r.note}")
    output = np.empty(want.shape, dtype=dtype)
    calls = {n: p.call for n, p in prepared.items()}
    limit_probes = probes(workload.name, inputs, output, dtype, limits.cores) if limits and prepared else []
    calls.update({f"{PROBE} {k}": p.call for k, p in enumerate(limit_probes)})
    medians = interleaved_medians(calls, budget, settle=settle, quiet=settle)
    for k, p in enumerate(limit_probes):
        assert limits is not None
        limits = p.apply(limits, medians.pop(f"{PROBE} {k}"))
    for impl, t in medians.items():
        result.impls[impl].median_s = t
    result.bound = bound(workload.name, inputs, output, dtype, limits)
    return result


def measure_compile(workload: Workload, dtype: str, repeats: int = 3) -> CompileResult:
    """Cold (cache=False) and warm (cache hit) compile of the workload's program on the llvm backend."""
    from fuse_mlir import Program
    from fuse_mlir.backends.llvm.executor import compile_program

    dtypes = {k: v.dtype for k, v in make_inputs(workload, dtype, small=True).items()}

    def full(cache: bool) -> tuple[float, float]:
        t0 = time.perf_counter()
        module = Program(workload.source).lower(dtypes).module
        compiled = compile_program(module, cache=cache)
        return time.perf_counter() - t0, compiled.compile_seconds

    cold = [full(cache=False) for _ in range(repeats)]
    full(cache=True)  # populate the in-memory kernel cache
    warm = [full(cache=True)[0] for _ in range(max(repeats, 5))]
    return CompileResult(
        workload.name,
        dtype,
        float(np.median([c[0] for c in cold])),
        float(np.median([c[1] for c in cold])),
        float(np.median(warm)),
    )


# -- the machine ---------------------------------------------------------------


def _lscpu() -> dict[str, str]:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def blas_info() -> list[str]:
    """The BLAS / OpenMP libraries loaded in this process, with their core type and threads (threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["threadpoolctl not installed: BLAS core type unknown"]
    rows = []
    for lib in threadpool_info():
        arch = lib.get("architecture")
        rows.append(
            f"{lib.get('internal_api')} {lib.get('version') or ''} ({os.path.basename(str(lib.get('filepath', '')))})"
            f"{f', core type {arch}' if arch else ''}, {lib.get('num_threads')} threads"
        )
    return rows


def machine() -> dict[str, str]:
    """Model name, cores, flags of note, OS and the peers' versions."""
    cpu = _lscpu()
    flags = set(cpu.get("Flags", "").split())
    vec = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    info = {
        "cpu": f"{cpu.get('Model name', platform.processor() or 'unknown')} "
        f"(family {cpu.get('CPU family', '?')}, model {cpu.get('Model', '?')}), {vec}",
        "cores": f"{cpu.get('CPU(s)', os.cpu_count())} CPUs, {cpu.get('Thread(s) per core', '?')} thread(s) per core",
        "python": platform.python_version(),
    }
    info.update(versions())
    return info
