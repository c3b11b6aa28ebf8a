"""Temperature schedules: the T of ``sig(x)`` without one, per tensor and fixpoint iteration."""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir import FuseError, Program
from fuse_mlir.interp.numpy_builtins import sig
from fuse_mlir.modes.fixpoint import schedule_table

BACKENDS = ["reference", "llvm"]

# X moves halfway towards sig(B / T_it) each run, so the last value depends on every T used.
RELAX = "X[i] = 0.5 X[i] + 0.5 sig(B[i])\nY[i] = sig(B[i])\nexport X, Y"
B = np.array([-1.0, 0.3, 2.0])


def simulate(table: list[float], runs: int) -> np.ndarray:
    x = np.zeros_like(B)
    for it in range(runs):
        x = 0.5 * x + 0.5 * sig(B, table[it])
    return x


def test_schedule_forms():
    assert schedule_table("Y", 0.5, 3) == (0.5, 0.5, 0.5)
    assert schedule_table("Y", ("linear", 1.0, 0.0, 4), 6) == (1.0, 0.75, 0.5, 0.25, 0.0, 0.0)
    assert schedule_table("Y", [(0, 1.0), (2, 0.5), (4, 0.1)], 6) == (1.0, 1.0, 0.5, 0.5, 0.1, 0.1)
    assert schedule_table("Y", [(2, 0.5)], 3) == (0.5, 0.5, 0.5)  # the first T also before its iteration
    assert schedule_table("Y", lambda it: 1.0 / (it + 1), 3) == (1.0, 0.5, 1 / 3)
    assert schedule_table("Y", ("linear", 2.0, 1.0, 0), 2) == (1.0, 1.0)


@pytest.mark.parametrize(
    "bad,match",
    [
        (-1.0, ">= 0"),
        (float("nan"), "finite"),
        ("hot", "expected a number"),
        (True, "expected a number"),
        (("linear", 1.0, 0.0), "linear ramp"),
        (("linear", 1.0, 0.0, -2), "non-negative integer"),
        ([(0, 1.0), ("a", 2.0)], "piecewise"),
        ([], "at least one"),
        (lambda it: "x", "not a number"),
        (lambda it: 1 / (it - 1), "ZeroDivisionError at iteration 1"),
    ],
)
def test_bad_schedules_are_compile_errors(bad, match):
    with pytest.raises(FuseError, match=match):
        Program(RELAX).compile("reference", mode="fixpoint", max_iters=4, temperature={"X": bad})


def test_unknown_tensor_is_an_error():
    with pytest.raises(FuseError, match="no equation defines"):
        Program(RELAX).compile("reference", temperature={"Z": 1.0})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "schedule",
    [
        0.7,
        ("linear", 2.0, 0.2, 8),
        [(0, 1.5), (3, 0.5), (6, 0.0)],
        lambda it: 1.0 / (1 + it),
    ],
    ids=["constant", "linear", "piecewise", "callable"],
)
def test_schedules_follow_the_iteration(backend, schedule):
    runner = Program(RELAX).compile(
        backend, mode="fixpoint", max_iters=12, atol=0, rtol=0, temperature={"X": schedule, "Y": schedule}
    )
    out = runner(B=B)
    table = list(schedule_table("X", schedule, 12))
    runs = runner.last_run.iterations["X"]
    # With zero tolerance the float recursion runs to max_iters unless the schedule settles exactly.
    assert runs == 12 or np.array_equal(simulate(table, runs), simulate(table, runs - 1))
    np.testing.assert_allclose(out["X"], simulate(table, runs), rtol=1e-12, atol=1e-12)
    # Y is single-pass: it uses the schedule's first T.
    np.testing.assert_allclose(out["Y"], sig(B, table[0]))
    assert runner.last_run.temperature["X"] == table[:runs]
    assert runner.last_run.temperature["Y"] == table[:1]
    text = runner.explain()
    assert "temperature X: T per iteration = [" in text and "temperature Y" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_temperature_is_the_hard_step(backend):
    out = Program(RELAX).compile(backend, mode="fixpoint", temperature={"X": 0.0, "Y": 0})(B=B)
    np.testing.assert_array_equal(out["Y"], (B > 0).astype(float))
    np.testing.assert_allclose(out["X"], (B > 0).astype(float), atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_single_mode_uses_the_first_entry_and_explicit_t_wins(backend):
    src = "Y[i] = sig(B[i])\nZ[i] = sig(B[i], 2.0)"
    runner = Program(src).compile(backend, temperature={"Y": ("linear", 0.5, 5.0, 3), "Z": 100.0})
    out = runner(B=B)
    np.testing.assert_allclose(out["Y"], sig(B, 0.5))
    np.testing.assert_allclose(out["Z"], sig(B, 2.0))
    assert runner.last_run.temperature == {"Y": [0.5], "Z": [100.0]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_schedules_keep_float32(backend):
    out = Program(RELAX).compile(backend, mode="fixpoint", temperature={"X": 0.5})(B=B.astype(np.float32))
    assert out["X"].dtype == np.float32
