"""Lower bounds on each workload's run time from the machine limits of DESIGN.md §6.

Three bounds, the largest wins:

- memory: bytes moved (every input read once, the output written once)
  / 33.6 GB/s (read+write, 2 threads), or / 36.2 GB/s when the output is
  under 1% of the bytes (read-only streaming); the report divides by the
  bandwidth a probe reached in the same rounds as the workload instead
  (:func:`benchmarks.limits.bandwidth_probe`);
- exp: number of exp evaluations × XLA's vector exp per element per core
  (0.92 ns float64, 0.28 ns float32) / 2 cores (the report: the exp
  it measured at the start);
- BLAS: matrix-product flops / 84 GFLOP/s (float64) or 187 GFLOP/s (float32)
  (the report: the GEMM throughput it measured at the start);
- random reads: gathered elements × the fastest random read per element per
  core measured here (``benchmarks.limits``) / cores (the gather workload;
  measured limits only).

The constants were measured on a 2-core AMD EPYC Zen 3 (AVX2); the report
measures this machine's limits itself (:mod:`benchmarks.limits`) and passes
them in, the constants being the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.limits import Limits, Probe, bandwidth_probe, gather_probe

MEM_RW_GBPS = 33.6
MEM_RO_GBPS = 36.2
CORES = 2
EXP_NS = {"float64": 0.92, "float32": 0.28}
GEMM_GFLOPS = {"float64": 84.0, "float32": 187.0}

FORMULAS = (
    "memory: (input bytes + output bytes) / read+write bandwidth, or / read-only bandwidth when the output is < 1% "
    "of the bytes moved; the bandwidth (in the bound column) is a streaming probe's median in the same interleaved "
    "rounds as the workload (fuse_mlir's sum of as many arrays as the workload streams, `S = X0[i] + X1[i] + ...`, "
    "or that sum written to one more array, on all cores over as many bytes), since this machine's bandwidth drifts "
    "during a run and several streams read faster than one",
    "exp: n_exp × t_exp / cores, t_exp the fastest vectorised exp per element per core measured by this run (the "
    "header's: compute throughput does not drift as bandwidth does, 0.72–0.78 ns float64 in every run this session, while a "
    "one-thread exp probe timed among the workloads read up to 1.69 ns)",
    "BLAS: 2·M·K·N flops / the GEMM throughput this run measured (the header's: NumPy's matmul of two 2048² "
    "matrices of the dtype, its OpenBLAS on all cores, best of 5); 84 GFLOP/s (float64) or 187 GFLOP/s (float32), "
    "another machine's, where none was measured",
    "random reads: n_gathered × t_read / cores, t_read fuse_mlir's one-thread random read from a 1M-element table "
    "per element (index read included), its median in the workload's rounds",
    "where no probe could run, the header's figures (the best of several runs at the start) stand in",
    "bound = the largest of those that apply; % of bound = bound / fuse-llvm median time",
)


@dataclass(frozen=True)
class Bound:
    """A lower bound on run time, which limit sets it, and that limit's figure (``detail``: "32.7 GB/s")."""

    seconds: float
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class Traffic:
    """The bytes a workload must move at least, and whether they are (almost) all reads."""

    nbytes: int
    read_only: bool


def traffic(inputs: dict[str, np.ndarray], output: np.ndarray) -> Traffic:
    """Every input read once and the output written once; read-only when the output is < 1% of the bytes."""
    read = sum(int(v.nbytes) for v in inputs.values())
    written = int(np.asarray(output).nbytes) if np.ndim(output) else 0
    return Traffic(read + written, written < 0.01 * (read + written))


def _n_exp(name: str, inputs: dict[str, np.ndarray]) -> int:
    if name in ("exp_mul_add", "sum_exp_mul_add", "row_softmax", "row_logsumexp"):
        return int(inputs["X"].size)
    return 0


def _gemm_flops(name: str, inputs: dict[str, np.ndarray]) -> int:
    if name == "relu_matmul_bias":
        m, k = inputs["W"].shape
        return 2 * m * k * int(inputs["X"].shape[1])
    if name == "contract3":
        i, j, k = inputs["A"].shape
        return 2 * i * j * k * int(inputs["B"].shape[2])
    return 0


# Workloads without a bound: call_overhead measures the per-call cost, not throughput.
_NO_BOUND: set[str] = {"call_overhead"}


def bound(
    name: str, inputs: dict[str, np.ndarray], output: np.ndarray, dtype: str, limits: Limits | None = None
) -> Bound | None:
    """The run-time lower bound of workload ``name`` on ``inputs`` producing ``output`` (None: not meaningful).

    ``limits`` are the machine's measured limits (:mod:`benchmarks.limits`); without them, the reference
    machine's constants above.
    """
    if name in _NO_BOUND:
        return None
    rw, ro = (limits.rw_gbps, limits.ro_gbps) if limits else (MEM_RW_GBPS, MEM_RO_GBPS)
    exp_ns, cores = (limits.exp_ns[dtype], limits.cores) if limits else (EXP_NS[dtype], CORES)
    moved = traffic(inputs, output)
    gbps = ro if moved.read_only else rw
    candidates = [Bound(moved.nbytes / (gbps * 1e9), "memory", f"{gbps:.1f} GB/s")]
    n_exp = _n_exp(name, inputs)
    if n_exp:
        candidates.append(Bound(n_exp * exp_ns * 1e-9 / cores, "exp", f"{exp_ns:.2f} ns/exp"))
    if name == "gather_sum" and limits:  # no reference constant: only a measured random-read limit counts
        t_read = limits.gather_ns[dtype]
        candidates.append(
            Bound(int(inputs["Idx"].size) * t_read * 1e-9 / cores, "random reads", f"{t_read:.2f} ns/read")
        )
    flops = _gemm_flops(name, inputs)
    if flops:
        gflops = (limits.gemm_gflops.get(dtype) if limits else None) or GEMM_GFLOPS[dtype]
        candidates.append(Bound(flops / (gflops * 1e9), "BLAS", f"{gflops:.0f} GFLOP/s"))
    return max(candidates, key=lambda b: b.seconds)


def probes(name: str, inputs: dict[str, np.ndarray], output: np.ndarray, dtype: str, n_cores: int) -> list[Probe]:
    """Calls measuring each limit workload ``name``'s bound uses, to time in the workload's own rounds
    (:func:`benchmarks.limits.bandwidth_probe` over as many bytes and arrays, the random-read probe for the
    gather): the machine's bandwidth drifts during a run, so the bound takes what the machine did beside the
    workload, with the statistic of the workload's own time. Exp throughput does not drift; its limit is the
    header's."""
    if name in _NO_BOUND:
        return []
    moved = traffic(inputs, output)
    streams = sum(1 for v in inputs.values() if v.nbytes >= 0.01 * moved.nbytes)  # the arrays that stream
    found: list[Probe | None] = [bandwidth_probe(moved.nbytes, moved.read_only, n_cores, streams)]
    if name == "gather_sum":
        found.append(gather_probe(dtype))
    return [p for p in found if p is not None]
