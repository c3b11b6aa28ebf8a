"""The report's timing helpers (benchmarks/measure.py): waiting for a quiet process before a settling call, and
the limit probes timed beside each workload (benchmarks/limits.py, benchmarks/bounds.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks.bounds import bound, probes
from benchmarks.limits import Limits, bandwidth_probe
from benchmarks.measure import PROBE, QUICK, interleaved_medians, measure_workload, wait_quiet
from benchmarks.workloads import BY_NAME

SLOW = Limits(2, 1e-3, 1e-3, {"float64": 1e6, "float32": 1e6}, {"float64": 1e6, "float32": 1e6})
"""Limits far below any machine's: every probe's figure beats them."""

FAST = Limits(2, 1e6, 1e6, {"float64": 1e-6, "float32": 1e-6}, {"float64": 1e-6, "float32": 1e-6})
"""Limits far above any machine's: no probe's figure beats them."""


def test_wait_quiet_returns_at_once_on_an_idle_process():
    assert wait_quiet() < 0.1


def test_wait_quiet_waits_for_a_busy_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose threads spin for 60 ms (as another library's workers do after a call) is waited for; one
    that never stops is waited for at most ``max_s``.

    The spinning is a CPU clock that runs with the wall clock until the spinner stops: a real spinning thread
    gets no CPU when the machine is loaded (CI's parallel workers), and the process then looks quiet to
    ``wait_quiet`` as it should, which made this test fail at random (0.0487 s waited against max_s 0.05).
    """
    stop = time.perf_counter() + 0.06
    monkeypatch.setattr(time, "process_time", lambda: min(time.perf_counter(), stop))
    waited = wait_quiet(max_s=1.0)
    assert waited >= 0.03, waited
    monkeypatch.setattr(time, "process_time", time.perf_counter)  # never stops
    waited = wait_quiet(max_s=0.05)
    assert 0.05 <= waited < 0.5, waited


def test_interleaved_medians_with_a_quiet_wait():
    """Every call is timed, with the settling call and the quiet wait before each batch."""
    counts = {"a": 0, "b": 0}

    def call(name: str):
        def f() -> None:
            counts[name] += 1
            time.sleep(0.003)

        return f

    med = interleaved_medians({k: call(k) for k in counts}, QUICK, settle=True, quiet=True)
    assert set(med) == {"a", "b"} and all(0.002 < v < 0.05 for v in med.values()), med
    assert counts["a"] >= 2 * QUICK.min_rounds and counts["b"] >= 2 * QUICK.min_rounds


@pytest.mark.parametrize("read_only", [True, False])
def test_bandwidth_probe_sets_its_own_bandwidth(read_only: bool) -> None:
    """The probe moves the bytes asked for over its streams (plus one written array for read+write), and a time of it sets that
    bandwidth in the limits, higher or lower than theirs, and leaves the other alone."""
    for streams in (1, 3):
        probe = bandwidth_probe(3 << 20, read_only, 2, streams)
        probe.call()
        for start in (SLOW, FAST):
            got = probe.apply(start, 1e-3)  # 3 MiB in 1 ms
            assert (got.ro_gbps if read_only else got.rw_gbps) == pytest.approx((3 << 20) / 1e-3 / 1e9)
            assert (got.rw_gbps if read_only else got.ro_gbps) == (start.rw_gbps if read_only else start.ro_gbps)


@pytest.mark.parametrize(
    ("name", "kinds"),
    [("exp_mul_add", 1), ("sum_exp_mul_add", 1), ("gather_sum", 2), ("row_variance", 1), ("call_overhead", 0)],
)
def test_probes_cover_the_limits_a_bound_uses(name: str, kinds: int) -> None:
    """Memory for every bounded workload, random reads for the gather; none where the workload has no bound
    (exp throughput's limit is the header's)."""
    from benchmarks.peers import make_inputs, reference

    inputs = make_inputs(BY_NAME[name], "float64", small=True)
    out = np.asarray(reference(BY_NAME[name], inputs))
    found = probes(name, inputs, out, "float64", 2)
    assert len(found) == kinds
    for p in found:
        p.call()
        measured = p.apply(SLOW, 1e-3)
        b_slow, b_new = bound(name, inputs, out, "float64", SLOW), bound(name, inputs, out, "float64", measured)
        assert measured != SLOW
        assert b_slow is not None and b_new is not None and b_new.seconds <= b_slow.seconds


def test_measure_workload_bounds_with_the_probes_of_its_rounds() -> None:
    """Whatever the header's limits (far below or far above any machine), the bound comes from the probes timed
    in the workload's rounds (a sane figure in its detail); the probes are not results."""
    w = BY_NAME["row_variance"]
    res = measure_workload(w, "float64", ("fuse-llvm", "numpy"), QUICK, small=True, log=lambda _: None, limits=SLOW)
    assert set(res.impls) == {"fuse-llvm", "numpy"} and not any(k.startswith(PROBE) for k in res.impls)
    assert res.bound is not None and res.bound.kind == "memory"
    gbps = float(res.bound.detail.split()[0])
    assert 0.01 < gbps < 1e5, res.bound
    res = measure_workload(w, "float64", ("fuse-llvm",), QUICK, small=True, log=lambda _: None, limits=FAST)
    assert res.bound is not None and 0.01 < float(res.bound.detail.split()[0]) < 1e5, res.bound


def test_report_smoke_names_each_bounds_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m benchmarks.report --quick --small``, two workloads: the table's bound column names the limit and
    the figure it divided by (NumPy is imported here, so the command runs in this process)."""
    from benchmarks import report

    args = ["--quick", "--small", "--workloads", "sum_exp_mul_add,gather_sum", "--dtypes", "float64"]
    assert report.main([*args, "--impls", "fuse-llvm,numpy", "--no-write"]) == 0
    out = capsys.readouterr().out
    rows: dict[str, str] = {}
    for line in out.splitlines():  # the run-time table's row (the compile-time table's comes later)
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].strip("| "), line)
    assert " GB/s) |" in rows["sum_exp_mul_add"] or " ns/exp) |" in rows["sum_exp_mul_add"], out
    assert "(random reads, " in rows["gather_sum"] or "(memory, " in rows["gather_sum"], out


@pytest.mark.parametrize("name", ["relu_matmul_bias", "contract3"])
def test_blas_bound_uses_the_measured_gemm_throughput(name: str) -> None:
    """A matrix product's bound divides its flops by the GEMM rate the run measured, not another machine's
    constant (which stands in only where none was measured)."""
    from benchmarks.bounds import GEMM_GFLOPS
    from benchmarks.peers import make_inputs, reference

    inputs = make_inputs(BY_NAME[name], "float32", small=True)
    out = np.asarray(reference(BY_NAME[name], inputs))
    slow_gemm = Limits(2, 1e6, 1e6, {"float32": 1e-6}, {}, {"float32": 1e-6})
    b = bound(name, inputs, out, "float32", slow_gemm)
    assert b is not None and b.kind == "BLAS" and b.detail == "0 GFLOP/s"
    fallback = bound(name, inputs, out, "float32", FAST)
    assert (
        fallback is not None and fallback.kind == "BLAS" and fallback.detail == f"{GEMM_GFLOPS['float32']:.0f} GFLOP/s"
    )
    assert b.seconds == pytest.approx(fallback.seconds * GEMM_GFLOPS["float32"] / 1e-6)


def test_measured_limits_include_gemm() -> None:
    from benchmarks.limits import _gemm_gflops

    assert 0.1 < _gemm_gflops("float64", 128, 2) < 1e5
