"""Streaming mode (``*t`` virtual time): each call is one step; a ring buffer keeps the window the lags need."""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError
from fuse_mlir.program import Program

BACKENDS = ["reference", "llvm"]

RNN = """
H[i,*t+1] = tanh(W[i,j] H[j,*t] + U[i,k] X[k,*t+1] + Bh[i])
Y[o,*t+1] = V[o,i] H[i,*t+1]
export H, Y
"""


def unrolled(steps: int) -> str:
    """The same RNN written out over ``steps`` steps as an ordinary single-mode program."""
    lines = []
    for t in range(steps):
        lines.append(f"H{t + 1}[i] = tanh(W[i,j] H{t}[j] + U[i,k] X{t}[k] + Bh[i])")
        lines.append(f"Y{t + 1}[o] = V[o,i] H{t + 1}[i]")
    exports = ", ".join(f"H{t + 1}, Y{t + 1}" for t in range(steps))
    return "\n".join(lines) + f"\nexport {exports}\n"


def rnn_data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "W": rng.normal(size=(5, 5)) * 0.4,
        "U": rng.normal(size=(5, 3)),
        "Bh": rng.normal(size=5),
        "V": rng.normal(size=(2, 5)),
        "X": rng.normal(size=(10, 3)),
        "H0": rng.normal(size=5),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_rnn_ten_steps_equals_unrolled_program(backend):
    d = rnn_data()
    params = {k: d[k] for k in ("W", "U", "Bh", "V")}
    want = Program(unrolled(10)).compile(backend)(H0=d["H0"], **params, **{f"X{t}": d["X"][t] for t in range(10)})
    run = Program(RNN).compile(backend, mode="streaming")
    run.reset(H=d["H0"])
    for t in range(10):
        out = run(X=d["X"][t], **params)
        np.testing.assert_allclose(out["H"], want[f"H{t + 1}"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(out["Y"], want[f"Y{t + 1}"], rtol=1e-12, atol=1e-12)
    assert run.time == 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_window_of_two_and_lagged_input(backend):
    # A second-order recurrence reading two steps back, and an input read one step late.
    src = "F[i,*t] = A[i] F[i,*t-1] + B[i] F[i,*t-2] + X[i,*t-1]\nexport F"
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=3), rng.normal(size=3)
    xs = rng.normal(size=(6, 3))
    f1, f2 = rng.normal(size=3), rng.normal(size=3)  # F at t-2, t-1
    run = Program(src).compile(backend, mode="streaming")
    run.reset(F=np.stack([f1, f2]))
    prev2, prev1, xprev = f1, f2, np.zeros(3)
    for t in range(6):
        got = run(A=a, B=b, X=xs[t])["F"]
        want = a * prev1 + b * prev2 + xprev
        np.testing.assert_allclose(got, want, rtol=1e-12)
        prev2, prev1, xprev = prev1, want, xs[t]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_read_only_from_earlier_steps_is_an_input_of_every_step(backend):
    # X is read only as X[*t-1]: the step program reads its history, yet each call gives X to be kept. It is
    # listed as an input; a call without it, or with the wrong rank, is a located error (a KeyError and an
    # unlocated "missing input" before, found by running text mutants).
    run = Program("Y[i, *t] = X[i, *t-1] + Z[i, *t]\nexport Y").compile(backend, mode="streaming")
    assert sorted(run.input_names()) == ["X", "Z"]
    spec = run.input_specs()["X"]
    assert (spec.rank, spec.dtype, spec.loc.line, spec.loc.col) == (1, np.float64, 1, 12)
    np.testing.assert_array_equal(run(X=np.ones(3), Z=np.ones(3))["Y"], [1.0, 1.0, 1.0])  # zero history
    np.testing.assert_array_equal(run(X=np.full(3, 5.0), Z=np.ones(3))["Y"], [2.0, 2.0, 2.0])
    for given, match in [({"Z": np.ones(3)}, "missing input X"), ({"X": np.ones((3, 3)), "Z": np.ones(3)}, "rank 1")]:
        with pytest.raises(FuseRuntimeError, match=match) as err:
            run(**given)
        assert "<string>:1:12" in str(err.value)
    np.testing.assert_array_equal(run(X=np.ones(3), Z=np.ones(3))["Y"], [6.0, 6.0, 6.0])  # the errors kept nothing


@pytest.mark.parametrize("backend", BACKENDS)
def test_history_defaults_to_zero_when_its_shape_follows_from_the_inputs(backend):
    run = Program(RNN).compile(backend, mode="streaming")
    d = rnn_data()
    params = {k: d[k] for k in ("W", "U", "Bh", "V")}
    out = run(X=d["X"][0], **params)
    np.testing.assert_allclose(out["H"], np.tanh(d["U"] @ d["X"][0] + d["Bh"]), rtol=1e-12)
    # Giving the state in a call sets it (like reset for that tensor, without restarting time).
    out = run(X=d["X"][1], H=np.zeros(5), **params)
    np.testing.assert_allclose(out["H"], np.tanh(d["U"] @ d["X"][1] + d["Bh"]), rtol=1e-12)
    assert run.time == 2
    run.reset()
    assert run.time == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "src",
    [
        "T[k, *t] = X[k, *t]\nU[k, *t] = T[k, *t-1]\nexport T, U",
        "T[k, *t] = X[k, *t] + T[k, *t-2]\nU[k, *t] = T[k, *t-1]\nexport T, U",
        "U[k, *t] = T[k, *t-1]\nT[k, *t] = X[k, *t] + T[k, *t-2]\nexport T, U",
    ],
)
def test_zero_history_read_by_another_equation(backend, src):
    """A history read only by another tensor's equation (U reads T one step back, tying T's history to no input)
    has the shape of the tensor's own value this step (T's, from X): zeros before T was computed (it was an
    error asking for runner.reset, found by the differential fuzzer, seed 9473 with --streaming 0.3)."""
    run = Program(src).compile(backend, mode="streaming")
    xs = [np.array([1.0, -2.0]), np.array([0.5, 4.0]), np.array([3.0, 1.0])]
    lag2 = "*t-2" in src
    t_hist: list[np.ndarray] = []
    for x in xs:
        out = run(X=x)
        want_t = x + (t_hist[-2] if lag2 and len(t_hist) >= 2 else 0)
        np.testing.assert_allclose(out["T"], want_t, rtol=1e-12)
        np.testing.assert_allclose(out["U"], t_hist[-1] if t_hist else np.zeros(2), rtol=1e-12)
        t_hist.append(want_t)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_history_tied_to_an_input_through_the_left_hand_side(backend):
    """T's history two steps back is tied to X only through the left-hand side's extents (the check compares it
    with T[k, i], which another check compares with X): the tied extents are followed as one class (the
    fuzzer's seed 9473, which asked for runner.reset)."""
    src = (
        "U[k, i, *t+1] = T[k, i, *t+1] - T[k, i, *t]\nT[k, i, *t+1] = X[k, i, *t+1] + tanh(T[k, i, *t-1])\nexport T, U"
    )
    run = Program(src).compile(backend, mode="streaming")
    rng = np.random.default_rng(5)
    hist = [np.zeros((3, 2)), np.zeros((3, 2))]
    for _ in range(4):
        x = rng.standard_normal((3, 2))
        out = run(X=x)
        t = x + np.tanh(hist[-2])
        np.testing.assert_allclose(out["T"], t, rtol=1e-12)
        np.testing.assert_allclose(out["U"], t - hist[-1], rtol=1e-12)
        hist.append(t)


def test_an_input_of_the_wrong_rank_is_named_before_the_missing_history():
    """Zero history takes its shape from the inputs; an input of the wrong rank gives none, and the error names
    that input (located), not a missing initial value (it was an IndexError before the rank was checked)."""
    run = Program("T[k, i, *t+1] = X[k, i, *t+1] + tanh(T[k, i, *t-1])\nexport T").compile(
        "reference", mode="streaming"
    )
    with pytest.raises(FuseRuntimeError, match="input X must have rank 2 but has shape") as info:
        run(X=np.ones(3))
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (1, 17)


ZERO_HISTORY = [
    # (program, inputs, dtype of every step, the step in NumPy from the values 1 and 2 steps back): the zero
    # history has the tensor's own dtype, as a recursive tensor in fixpoint mode has, so an integer counter
    # stays integer and a float32 recurrence float32
    ("S[i,*t+1] = X[i] + S[i,*t]", {"X": np.array([1, -2, 3], np.int32)}, "int32", lambda x, s1, s2: x + s1),
    (
        "S[i,*t+1] = X[i] + 0.5 S[i,*t]",
        {"X": np.array([1.0, -2.0], np.float32)},
        "float32",
        lambda x, s1, s2: x + np.float32(0.5) * s1,
    ),
    ("S[i,*t+1] = X[i] + 0.5 S[i,*t]", {"X": np.array([1, -2], np.int32)}, "float64", lambda x, s1, s2: x + 0.5 * s1),
    ("S[*t+1] = S[*t] + 1", {}, "float64", lambda x, s1, s2: s1 + 1),
    (
        "S(i,*t+1) = X[i] + S[i,*t]",
        {"X": np.array([0.0, 1.5, 0.0])},
        "int8",
        lambda x, s1, s2: ((x + s1) != 0).astype(np.int8),
    ),
    # read only two steps back: the step program has no t-1 input, and the t-2 history is zero at first
    ("S[i,*t+1] = X[i] + 2 S[i,*t-1]", {"X": np.array([1, 3], np.int8)}, "int8", lambda x, s1, s2: x + 2 * s2),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src,inputs,dtype,step", ZERO_HISTORY, ids=[c[0] for c in ZERO_HISTORY])
def test_zero_history_has_the_tensors_own_dtype(backend, src, inputs, dtype, step):
    """Four steps from the implicit zero history, against the recurrence stepped in NumPy from zeros of the
    expected dtype."""
    run = Program(src + "\nexport S").compile(backend, mode="streaming")
    x = inputs.get("X", np.zeros(()))
    past = [np.zeros(np.shape(x), dtype)] * 2
    for _ in range(4):
        got = run(**inputs)["S"]
        want = np.asarray(step(x, past[-1], past[-2])).astype(dtype)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)
        past.append(want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_history_beside_a_time_input_read_late(backend):
    """The time input's history (zeros of its own dtype at first) takes part in finding S's dtype: float32."""
    run = Program("S[i,*t+1] = X[i,*t+1] + 0.5 X[i,*t] - S[i,*t]\nexport S").compile(backend, mode="streaming")
    xs = np.array([[1.0, -2.0], [0.5, 4.0], [-1.5, 0.25]], np.float32)
    s, x_prev = np.zeros(2, np.float32), np.zeros(2, np.float32)
    for x in xs:
        got = run(X=x)["S"]
        s = x + np.float32(0.5) * x_prev - s
        x_prev = x
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float32_rnn_stays_float32(backend):
    d = {k: v.astype(np.float32) for k, v in rnn_data().items()}
    run = Program(RNN).compile(backend, mode="streaming")
    h = np.zeros(5, np.float32)
    for t in range(4):
        out = run(X=d["X"][t], **{k: d[k] for k in ("W", "U", "Bh", "V")})
        h = np.tanh(d["W"] @ h + d["U"] @ d["X"][t] + d["Bh"])
        assert out["H"].dtype == np.float32 and out["Y"].dtype == np.float32
        np.testing.assert_allclose(out["H"], h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["Y"], d["V"] @ h, rtol=1e-4, atol=1e-5)


def test_missing_initial_state_is_a_clear_error():
    # H's extent comes from nothing but H itself: the first step cannot size a zero history.
    run = Program("H[i,*t+1] = relu(H[i,*t]) + 1.0\nexport H").compile("reference", mode="streaming")
    with pytest.raises(FuseRuntimeError, match=r"reset\(H=...\)") as err:
        run()
    assert "<string>:1:18: error: H is read from step t-1" in str(err.value)  # where the step reads it
    run.reset(H=np.array([-1.0, 2.0]))
    np.testing.assert_array_equal(run()["H"], [1.0, 3.0])
    np.testing.assert_array_equal(run()["H"], [2.0, 4.0])


def test_only_the_user_exports_are_returned():
    src = "H[i,*t+1] = H[i,*t] + X[i,*t+1]\nS[*t+1] = H[i,*t+1]\nexport S"
    run = Program(src).compile("reference", mode="streaming")
    run.reset(H=np.zeros(2))
    assert set(run(X=np.ones(2))) == {"S"}
    assert float(run(X=np.ones(2))["S"]) == 4.0
    assert run.input_names() == ["X"]


@pytest.mark.parametrize(
    ("src", "match"),
    [
        ("H[i,*t] = H[i,*t+1]", "ahead"),
        ("Y[i] = X[i,*t]", "no time index"),
        ("H[i,*t] = X[i,*t]\nY[i,*t] = H[*t,i]", "position"),
        ("H[i,*t] = X[i,*s]", "one clock"),
        ("H[i,*t] = X[i,*t]\nH[i,*t+1] += X[i,*t]", "different time steps"),
        ("H[i,*t] = X[i,*t]\nY[i] = H[i]", "without it"),
    ],
)
def test_bad_streaming_programs(src, match):
    with pytest.raises(FuseError, match=match):
        Program(src).compile("reference", mode="streaming")


def test_bad_initial_values():
    run = Program(RNN).compile("reference", mode="streaming")
    with pytest.raises(FuseRuntimeError, match="no initial value"):
        run.reset(Y=np.zeros(2))
    with pytest.raises(FuseRuntimeError, match="rank 1"):
        run.reset(H=np.zeros((2, 2, 2)))
    with pytest.raises(FuseRuntimeError, match="window is 1"):
        run.reset(H=np.zeros((3, 5)))


def test_single_mode_points_to_streaming_and_unknown_modes_are_errors():
    with pytest.raises(FuseError, match="mode='streaming'"):
        Program(RNN).compile("reference")(W=np.ones((1, 1)))
    with pytest.raises(FuseError, match="unknown mode"):
        Program("Y[i] = X[i]").compile("reference", mode="bogus")


def test_streaming_runner_has_no_demand_queries():
    run = Program(RNN).compile("reference", mode="streaming")
    with pytest.raises(FuseRuntimeError, match="not available in streaming mode"):
        run.query("H", {})


def _streamed_corpus() -> list[tuple[str, str, str, dict[str, np.ndarray]]]:
    """Every builtin and one-line semantics case as a streaming recurrence: ``Y[i,j] = expr`` becomes
    ``Y[i,j,*t+1] = expr; Y[i,j,*t+1] += 0.5 Y[i,j,*t]``, so after three steps Y is 1.75 times the single-mode
    value. Returns (case, streaming source, name, inputs) for the cases the single-mode reference accepts."""
    import re

    from tests.test_fixpoint import WRAPPED

    out = []
    for case, src, inputs in WRAPPED:
        line = src.split("\n")[0]
        lhs, rhs = line.split(" = ", 1)
        m = re.fullmatch(r"(\w+)(?:\[([^\]]*)\])?", lhs)
        assert m is not None, line
        name, idx = m.group(1), m.group(2)
        plain = ", ".join(x.strip().rstrip(".") for x in idx.split(",")) if idx else ""
        head, prev = (f"{name}[{idx}, *t+1]", f"{name}[{plain}, *t]") if idx else (f"{name}[*t+1]", f"{name}[*t]")
        out.append((case, f"{head} = {rhs}\n{head} += 0.5 {prev}", name, inputs))
    return out


STREAMED = _streamed_corpus()


@pytest.mark.parametrize("case,src,name,inputs", STREAMED, ids=[s[0] for s in STREAMED])
def test_every_construct_inside_a_streaming_recurrence(case, src, name, inputs):
    """Three steps on both backends: equal dtypes, shapes and values, and 1.75 times the single-mode value.

    A tensor whose shape its inputs do not fix (a concat's axis, numeric left-hand positions, a slice on the
    left) starts from the zero history given with ``reset``; the others start from the implicit zeros.
    """
    try:
        single = np.asarray(
            Program(src.split("\n")[0].replace(", *t+1]", "]").replace("[*t+1]", "")).compile()(**inputs)[name]
        )
    except FuseError:
        pytest.skip("the single-mode reference rejects this case")
    steps = {}
    for backend in BACKENDS:
        run = Program(src).compile(backend, mode="streaming")
        try:
            run(**inputs)
        except FuseRuntimeError as e:
            assert f"{name} is read from step t-1 before any step computed it" in str(e)
            run.reset(**{name: np.zeros(single.shape)})
            run(**inputs)
        steps[backend] = [run(**inputs), run(**inputs)]
    ref, got = steps["reference"], steps["llvm"]
    for a, b in zip(ref, got):
        assert list(a) == list(b)
        for k in a:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
            np.testing.assert_allclose(b[k], a[k], rtol=1e-9, atol=1e-12, err_msg=k)
    if single.dtype.kind == "f":
        np.testing.assert_allclose(ref[-1][name], 1.75 * single, rtol=1e-9, atol=1e-12)
    assert ref[-1][name].shape == single.shape


def test_state_shapes_follow_every_tie_of_the_extent_checks() -> None:
    # A, B and C are each checked against A's extent (a star of te.check_dim ops) and D against it too: a
    # chain of three unions before D's known extent joins. The union-find's path compression assigned in the
    # wrong order (``x = parent[x] = grandparent`` made the grandparent its own root), cutting the class from
    # D's extent: no state shape was found.
    from fuse_mlir.interp.shapes import tied_extents
    from fuse_mlir.modes.streaming import _state_shapes

    lowered = Program("Y[i] = A[i] + B[i] + C[i] + D[i]\nexport Y").lower()
    tied = tied_extents(lowered.module, {"D": (5,)})
    assert tied == {("axis", n, 0): ("int", 5) for n in "ABC"}
    assert _state_shapes(lowered, {"D": np.ones(5)}) == {"A": (5,), "B": (5,), "C": (5,)}
    # with nothing known: one class, represented by one of its axes
    assert len(set(tied_extents(lowered.module, {}).values())) == 1
