"""Compile-stage timing: ``runner.compile_stats``, ``fuse run --timing``, progress lines for long compiles.

Nothing here asserts how fast anything is: only that the stages exist, in
order, and add up to the compile time the run trace reports.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from fuse_mlir.cli import fuse
from fuse_mlir.passes.pipeline import Pipeline
from fuse_mlir.program import Program
from fuse_mlir.stages import LOG, StageTimes, active, record, stage

SRC = """\
H[b,h] = relu(W[h,d] X[b,d] + B[h])
P[b,h.] = softmax(H[b,h])
S[b] = P[b,h] H[b,h]
export P, S
"""

INPUTS = {"W": np.ones((3, 2)), "X": np.arange(8.0).reshape(4, 2), "B": np.zeros(3)}

LLVM_STAGES = ["lower-loop-to-llvm", "emit-llvm-ir", "llvm-parse", "llvm-optimize", "llvm-codegen"]


def test_llvm_compile_reports_every_stage_in_order() -> None:
    runner = Program(SRC, "stats.fuse").compile("llvm", cache=False)
    runner(**INPUTS)
    stats = runner.compile_stats
    names = list(stats)
    expected = ["parse", "resolve", "lower-to-te", "contract-order", "lower-te-to-ew", "dedup", "fuse", "inplace"]
    expected += ["lower-ew-to-loop", "lower-loop-to-llvm", "emit-llvm-ir"]
    assert [n for n in names if n in expected] == expected
    # LLVM's stages (also run earlier by first-use helpers a process compiles, such as the thread pool)
    assert set(LLVM_STAGES) <= set(names)
    assert all(v >= 0.0 for v in stats.values())
    # The stages after the frontend's parse and resolve are the compile time the run trace reports
    # (the backend's own work between stages is the backend-other row).
    trace = runner._last_run()
    after_frontend = sum(v for k, v in stats.items() if k not in ("parse", "resolve"))
    assert after_frontend <= trace.compile_seconds + 1e-3
    assert after_frontend >= 0.5 * trace.compile_seconds


def test_a_call_that_compiles_nothing_adds_nothing() -> None:
    runner = Program(SRC, "stats.fuse").compile("llvm", cache=False)
    runner.run(INPUTS)
    first = dict(runner.compile_stats)
    runner.run(INPUTS)
    assert runner.compile_stats == first


def test_o0_runs_no_fusion_and_reference_only_the_frontend() -> None:
    runner = Program(SRC, "stats.fuse").compile("llvm", opt_level=0, cache=False)
    runner(**INPUTS)
    assert "fuse" not in runner.compile_stats and "lower-ew-to-loop" in runner.compile_stats
    ref = Program(SRC, "stats.fuse").compile("reference")
    ref(**INPUTS)
    assert list(ref.compile_stats) == ["parse", "resolve", "lower-to-te"]


def test_pipeline_passes_accumulate_by_name() -> None:
    prog = Program(SRC, "stats.fuse")
    module = prog.lower().module.clone()
    with StageTimes() as times:
        Pipeline.parse("contract-order,lower-te-to-ew,dedup,fuse,dedup").run(module)
    assert list(times.stages) == ["contract-order", "lower-te-to-ew", "dedup", "fuse"]
    assert times.counts["dedup"] == 2
    assert times.total == pytest.approx(sum(times.stages.values()))
    assert "dedup (x2)" in times.report()


def test_collectors_nest_and_nothing_listens_outside() -> None:
    assert not active()
    record("nobody", 1.0)  # no collector: a no-op
    with StageTimes() as outer:
        with StageTimes() as inner:
            with stage("a"):
                pass
            record("b", 0.5)
        record("c", 0.25)
    assert list(inner.stages) == ["a", "b"]
    assert list(outer.stages) == ["a", "b", "c"] and outer.stages["c"] == 0.25
    assert not active()


def test_progress_lines_only_past_the_threshold(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    with StageTimes("quiet.fuse", progress_after=1e9):
        record("fuse", 0.1)
    assert not caplog.records
    with StageTimes("slow.fuse", progress_after=0.0):
        record("fuse", 0.1)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("compiling slow.fuse: fuse 0.10 s")
    assert messages[-1].startswith("compiled slow.fuse in")
    with StageTimes(progress_after=0.0):  # unlabelled collectors (benchmarks, tools) never log
        record("fuse", 0.1)
    assert len(caplog.records) == len(messages)


def test_fuse_run_timing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.fuse").write_text(SRC)
    for name, value in INPUTS.items():
        np.save(tmp_path / f"{name}.npy", value)
    args = ["run", "p.fuse", *(a for n in INPUTS for a in ("-i", f"{n}={n}.npy")), "--timing"]
    assert fuse.main(args) == 0
    out, err = capsys.readouterr()
    assert out.startswith("P float64[4, 3] =")
    lines = err.splitlines()
    start = lines.index("compile time by stage:")
    rows = lines[start + 1 :]
    assert any(r.endswith("  parse") for r in rows) and any(r.endswith("  fuse") for r in rows)
    total = next(r for r in rows if r.endswith("compile total"))
    listed = [float(r.split()[0]) for r in rows if r.split()[1] == "ms" and not r.endswith("compile total")]
    assert float(total.split()[0]) == pytest.approx(sum(listed), abs=0.01 * len(listed) + 0.01)
    assert rows[-1].startswith("run time: ") and rows[-1].endswith(" ms")
