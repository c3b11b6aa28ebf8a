"""The fuzzer's driver: its watchdog pool (hangs, dead workers, workers that outlive a killed driver) and the
per-pass verification that names a pass building invalid IR.

Fast (no generated programs), so not marked ``fuzz``: the quick subset runs it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.arith import TruncFOp
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.rewriter import InsertPoint, Rewriter

from fuse_mlir import FuseError, Program
from fuse_mlir.passes import AnalysisManager, FusePass
from fuse_mlir.passes.lowering import lower_to_loop, verify_mode
from fuse_mlir.passes.registry import register_pass, unregister_pass
from fuse_mlir.targets import get_target
from fuse_mlir.testing.fuzz import driver

ROOT = Path(__file__).resolve().parents[2]


def test_pool_reports_a_hang_and_goes_on_with_a_fresh_worker() -> None:
    pool = driver.Pool(1, timeout=1.0)
    try:
        answers = dict(pool.run([(time.sleep, (30,)), (os.getpid, ())]))
    finally:
        pool.close()
    assert answers[0] == ("hang", "no answer in 1 s")
    assert isinstance(answers[1], int) and answers[1] != os.getpid()


def test_pool_reports_a_worker_that_dies() -> None:
    pool = driver.Pool(1, timeout=30.0)
    try:
        answers = dict(pool.run([(os._exit, (3,)), (abs, (-2,))]))
    finally:
        pool.close()
    kind, detail = answers[0]
    assert kind == "crash" and detail.startswith("worker died") and "exit code 3" in detail
    assert answers[1] == 2  # the next task runs on a fresh worker


def test_worker_call_hang_and_answer() -> None:
    w = driver.Worker(timeout=1.0)
    try:
        assert w.call(abs, (-5,)) == 5
        assert w.call(time.sleep, (30,)) == ("hang", "no answer in 1 s")
        assert w.call(abs, (-6,)) == 6
    finally:
        w.close()


_DRIVER = """
import sys, time
from fuse_mlir.targets import get_target
from fuse_mlir.testing.fuzz import driver
w = driver.Worker(600)
w.start()
w.conn.send((time.sleep, (600,)))  # a worker stuck in a task, as in a runaway compile
print(w.proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_busy_worker_dies_with_a_killed_driver() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        worker = int(proc.stdout.readline())
        time.sleep(1.0)  # let the worker take the task
        assert _alive(worker)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 15
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        alive = _alive(worker)
        if alive:
            os.kill(worker, signal.SIGKILL)
        assert not alive, "the worker outlived its driver"
    finally:
        proc.kill()
        proc.wait(10)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ----------------------------------------------------------------------------- naming the pass that broke the IR


MISTYPED = "llvm-mistyped"


@pytest.fixture
def mistyping_pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A driver configuration whose pipeline is O2's plus a loop-level pass that stores float32 values into
    float64 buffers: the class of the fuse-rows bug of seed 913330, which LLVM compiled into wrong values or
    refused to parse. Yields the pipeline text (it is part of the kernel cache key, so no other test's kernel
    is touched)."""

    @register_pass
    @dataclass(frozen=True)
    class Mistype(FusePass):
        """Store a float32 truncation of every stored value (invalid IR where the buffer holds float64)."""

        name = "test-mistype-store"
        level = "loop"

        def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
            for op in list(module.walk()):
                if op.name == "loop.store":
                    trunc = TruncFOp(op.operands[0], f32)
                    Rewriter.insert_op(trunc, InsertPoint.before(op))
                    op.operands[0] = trunc.result
            return True

    pipeline = get_target("llvm").pipeline("O2") + ",test-mistype-store"
    monkeypatch.setitem(driver.CONFIGS, MISTYPED, {"backend": "llvm", "pipeline": pipeline})
    try:
        yield pipeline
    finally:
        unregister_pass("test-mistype-store")


SOURCE = "Y[i] = relu(X[i]) 2\nexport Y\n"


def test_invalid_ir_gives_wrong_values_and_the_driver_names_the_pass(mistyping_pipeline: str) -> None:
    arrays = {"X": np.array([1.0, -2.0, 3.0])}
    before = os.environ.get("FUSE_VERIFY")
    # Unverified (the default compile), the broken IR runs: the values are wrong, not an error. So the driver
    # diagnoses disagreements too, not only crashes.
    with pytest.MonkeyPatch.context() as env:
        env.delenv("FUSE_VERIFY", raising=False)
        status, out = driver.run_one(SOURCE, arrays, MISTYPED)
    assert status == "ok" and not np.allclose(out["Y"], [2.0, 0.0, 6.0])
    why = driver.invalid_ir_pass(SOURCE, arrays, MISTYPED)
    assert why is not None and "IR does not verify after pass 'test-mistype-store': loop.store: storing f32" in why
    assert os.environ.get("FUSE_VERIFY") == before  # restored


def test_invalid_ir_pass_is_none_when_every_pass_verifies() -> None:
    arrays = {"X": np.array([1.0, -2.0, 3.0])}
    for config in ("reference", "llvm-O0", "llvm-O2"):
        assert driver.invalid_ir_pass(SOURCE, arrays, config) is None


def test_lower_to_loop_verify_modes(mistyping_pipeline: str) -> None:
    te = Program(SOURCE).lower({"X": np.float64}).module
    lower_to_loop(te, pipeline=mistyping_pipeline, verify=False)  # nothing checks: the invalid module comes back
    with pytest.raises(Exception, match="storing f32 into a buffer of f64") as end:
        lower_to_loop(te, pipeline=mistyping_pipeline, verify=True)
    assert "test-mistype-store" not in str(end.value)  # verifying the result cannot say which pass broke it
    with pytest.raises(FuseError, match="IR does not verify after pass 'test-mistype-store'"):
        lower_to_loop(te, pipeline=mistyping_pipeline, verify="each")


def test_verify_mode_reads_fuse_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, mode in (("", None), ("0", None), ("1", "end"), ("end", "end"), ("each", "each")):
        monkeypatch.setenv("FUSE_VERIFY", value)
        assert verify_mode(None) == mode
    assert verify_mode(False) is None and verify_mode(True) == "end"
    monkeypatch.setenv("FUSE_VERIFY", "yes")
    with pytest.raises(FuseError, match="FUSE_VERIFY: 0, 1, end or each"):
        verify_mode(None)


# ----------------------------------------------------------------------------- text mutants that run


def test_tiny_inputs_follow_the_specs() -> None:
    runner = Program("Y[i, j] = X[i, j] W[j] + N[i]\nZ[i] = V[N[i]]\nexport Y, Z\n").compile()
    seen = set()
    for seed in range(8):
        got = driver.tiny_inputs(runner.input_specs(), seed)
        e = got["W"].shape[0]
        seen.add(e)
        assert {k: (v.shape, v.dtype.name) for k, v in got.items()} == {
            "X": ((e, e), "float64"),
            "W": ((e,), "float64"),
            "N": ((e,), "int64"),  # a gathered index
            "V": ((e,), "float64"),
        }
        assert got["N"].min() >= 0 and got["N"].max() < e  # valid positions of any axis of the extent
        again = driver.tiny_inputs(runner.input_specs(), seed)
        assert all(np.array_equal(got[k], again[k]) for k in got)  # one mutant, one set of inputs
    assert seen == set(driver.MUTANT_EXTENTS)  # the mutants' seeds spread over every extent


def test_axis_classes_follow_the_programs_checks() -> None:
    # Axes an equation joins are one class; an axis declaration fixes its class's extent; an axis that only
    # a slice constrains is its own class.
    prog = Program("axis n = 5\nY[i] = W[i, j] X[j]\nZ[k] = W[k, 0:2] V[k]\nR[n] = U[n]\nexport Y, Z, R\n")
    classes = driver.axis_classes(prog.lower().module)
    of = classes.of
    assert of[("W", 1)] == of[("X", 0)] and of[("W", 0)] == of[("V", 0)] and of[("W", 0)] != of[("W", 1)]
    assert classes.fixed == {of[("U", 0)]: 5}
    runner = prog.compile("reference")
    shapes = set()
    for seed in range(40):
        got = driver.tiny_inputs(runner.input_specs(), seed, classes)
        w, x, v, u = got["W"].shape, got["X"].shape, got["V"].shape, got["U"].shape
        assert x == (w[1],) and v == (w[0],) and u == (5,)
        shapes.add(w)
        if w[1] >= 2:
            runner.run(got)  # passes the program's checks
    assert len({w for w in shapes if w[0] != w[1]}) >= 6  # the classes draw their extents apart


def test_half_the_mutants_run_on_an_extent_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    # A mutant whose key picks mixed extents runs on them; where the first configuration raises on them (a slice
    # longer than the axis drawn), it runs again on one extent for every axis.
    assert {driver.mixed_extents(key) for key in range(1 << 16, 1 << 18, 1 << 15)} == {True, False}
    passes: list[bool] = []
    real = driver._compile_text

    def spy(source: str, configs: list, key: int, mixed: bool) -> object:
        passes.append(mixed)
        return real(source, configs, key, mixed)

    monkeypatch.setattr(driver, "_compile_text", spy)
    monkeypatch.setattr(driver, "mixed_extents", lambda key: True)
    assert driver.compile_text("Y[i] = W[i, j] X[j]\nexport Y\n", ["reference", "llvm-O2"]) == ("ok", "")
    assert passes == [True]
    passes.clear()
    # a concat's length is a derived extent, which the classes do not follow: here W's drawn extent is not the
    # sum of A's and B's, and the reference raises
    src = "Y[a] = concat(A[a], B[a]) + W[a]\nexport Y\n"

    def inputs(specs: dict, seed: int, classes: object = None) -> dict:
        return {"A": np.ones(1), "B": np.ones(1 if classes is not None else 2), "W": np.ones(3)}

    monkeypatch.setattr(driver, "tiny_inputs", inputs)
    assert driver.compile_text(src, ["reference", "llvm-O2"]) == ("ok", "")
    assert passes == [True, False]


def test_a_value_where_the_reference_raised_is_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    # A backend that skips a run-time check (here: the reference's inputs hold an out-of-range position, the
    # other configuration's do not) returns a value where the reference raised a located error.
    src = "Z[i] = V[N[i]]\nexport Z\n"
    real = driver.tiny_inputs

    def inputs(specs: dict, seed: int, classes: object = None) -> dict:
        out = real(specs, seed)
        if inputs.calls == 0:
            out["N"] = out["N"] + 99
        inputs.calls += 1
        return out

    inputs.calls = 0  # type: ignore[attr-defined]
    monkeypatch.setattr(driver, "tiny_inputs", inputs)
    monkeypatch.setattr(driver, "mixed_extents", lambda key: False)
    status, detail = driver.compile_text(src, ["reference", "llvm-O2"])
    assert status == "disagree", detail
    assert detail.startswith("llvm-O2 (mode single) has a value where reference raised: ")
    assert "out of range" in detail
    inputs.calls = 0  # type: ignore[attr-defined]
    assert driver.compile_text(src, ["reference"]) == ("ok", "")  # one configuration's error alone is no finding


def test_a_mutant_with_inputs_runs_and_is_compared(mistyping_pipeline: str) -> None:
    # every value nonzero, so a float32 stored into a float64 slot is wrong on any of the tiny extents
    source = "Y[i] = abs(X[i]) + 1\nexport Y\n"
    assert driver.compile_text(source, ["reference", "llvm-O2"]) == ("ok", "")
    with pytest.MonkeyPatch.context() as env:
        env.delenv("FUSE_VERIFY", raising=False)
        status, detail = driver.compile_text(source, ["reference", MISTYPED])
    # wrong values: against the reference's, or first against its own run's (the demand query's check)
    assert status == "disagree" and detail.startswith(f"{MISTYPED} (mode single)") and "Y: value" in detail


def test_a_mutant_of_an_example_reads_its_data() -> None:
    # Mutants resolve sources against examples/: an example's mutant runs on its own data, so it is compared
    # (an unread scalar source was a KeyError in the lowering, found this way).
    src = (ROOT / "examples" / "svm.fuse").read_text()
    mutant = src[: src.index("Label[m]")].replace("Coef[n] K[m,n] + b", "Coef[n]")
    assert driver.compile_text(mutant, ["reference", "llvm-O2"]) == ("ok", "")


def test_a_mutant_runs_a_query_or_more_steps() -> None:
    # Single mode: part of one export is also asked of the runner (demand) and must equal that part of the run's
    # export; the mutant's pick chooses the export and the selection (the last row, every other row, position 0
    # of the last axis).
    runner = Program("Y[i, j] = X[i, j] 2\nZ[j] = X[0, j]\nexport Y, Z\n").compile("llvm")
    given = {"X": np.arange(6.0).reshape(3, 2)}
    asked = {}
    for pick in range(6):
        got = dict(runner.run(given))
        assert driver._more_runs(runner, given, got, None, pick) is None
        ((label, answer),) = [(k, v) for k, v in got.items() if "?" in k]  # one query
        asked[label] = answer
    y, z = given["X"] * 2, given["X"][0]
    want = {"Y?{0: -1}": y[-1], "Z?{0: ::2}": z[::2], "Y?{-1: 0}": y[:, 0], "Z?{0: -1}": z[-1], "Y?{0: ::2}": y[::2]}
    want["Z?{-1: 0}"] = z[0]
    assert set(asked) == set(want)
    for label, answer in asked.items():
        np.testing.assert_array_equal(answer, want[label])
    # Streaming: two more steps, so the kept history is read.
    runner = Program("S[i, *t] = S[i, *t-1] + X[i, *t]\nexport S\n").compile("llvm", mode="streaming")
    given = {"X": np.ones(2)}
    got = {"S": runner.run(given)["S"]}
    assert driver._more_runs(runner, given, got, "streaming") is None
    np.testing.assert_array_equal(got["S@3"], [3.0, 3.0])


def test_a_mutant_runs_twice_and_the_runs_must_agree() -> None:
    # A runner whose second call sees state the first left behind (a stale arena buffer, an in-place write)
    # gives other values the second time: the mutant disagrees with itself.
    class Leaky:
        calls = 0

        def run(self, given: dict, write_sinks: bool = True) -> dict:
            self.calls += 1
            return {"Y": given["X"] * self.calls}

    given = {"X": np.arange(3.0)}
    runner = Leaky()
    got = runner.run(given)
    why = driver._more_runs(runner, given, got, None)
    assert why is not None and why.startswith(
        "a second run differs from the first: Y: value np.float64(2.0) at flat 1, expected np.float64(1.0)"
    )


def test_a_quarter_of_the_mutants_add_a_monte_carlo_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sample tables come from the seed, the same on every backend: every configuration's estimate must be
    # the reference's. A backend that drew other samples (here: the second configuration's seed is off by one)
    # disagrees on the estimate alone.
    from fuse_mlir.modes import monte_carlo

    samples = [driver.monte_carlo_samples(key) for key in range(0, 1 << 22, 1 << 15)]
    assert 0.15 < samples.count(0) / len(samples) < 0.95 and {s for s in samples if s} == {2, 3, 4}
    src = "S[i] = A[i, j] B[j]\nM[i] max= A[i, j]\nexport S, M\n"
    rng = np.random.default_rng(0)
    given = {"A": rng.uniform(-2, 2, (3, 4)), "B": rng.uniform(-2, 2, 4)}
    monkeypatch.setattr(driver, "tiny_inputs", lambda specs, seed, classes=None: dict(given))
    monkeypatch.setattr(driver, "monte_carlo_samples", lambda key: 2)
    seen: list[dict] = []
    real_mc = driver._monte_carlo

    def spy(*args: object) -> dict:
        seen.append(real_mc(*args))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(driver, "_monte_carlo", spy)
    assert driver.compile_text(src, ["reference", "llvm-O2", "torch"]) == ("ok", "")
    assert [sorted(s) for s in seen] == [["M~mc", "S~mc"]] * 3
    exact = given["A"] @ given["B"]
    assert not np.allclose(seen[0]["S~mc"], exact)  # two samples of four positions: an estimate
    assert np.all(seen[0]["M~mc"] <= given["A"].max(axis=1))
    real_call = monte_carlo.MonteCarlo.__call__
    calls = [0]

    def off_by_one(self: monte_carlo.MonteCarlo, lowered: object, arrays: dict) -> object:
        calls[0] += 1
        if calls[0] > 1:
            self.seed += 1
        return real_call(self, lowered, arrays)  # type: ignore[arg-type]

    monkeypatch.setattr(monte_carlo.MonteCarlo, "__call__", off_by_one)
    status, detail = driver.compile_text(src, ["reference", "llvm-O2"])
    assert status == "disagree" and detail.startswith("llvm-O2 (mode single) against reference: S~mc: value"), detail
