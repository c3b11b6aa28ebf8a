"""Monte Carlo projection: exact when S >= count, unbiased within its standard error otherwise, reproducible.

Tolerances come from the estimators' variance, not from tuning: the sum
estimate C * mean(f(samples)) has standard error C * sigma / sqrt(S) (sigma:
the population standard deviation of the projected values), so a correct
estimator lies within Z = 5 standard errors except with probability < 1e-6
(normal tail); a sample max m is plausible when P(max of S uniform draws <= m)
= (#{f <= m} / C)^S is at least 1e-9.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.program import Program
from tests.heap import collecting_only_new_objects
from tests.strategies import GenProgram, programs

BACKENDS = ["reference", "llvm"]
Z = 5.0
SRC = """
S[i] = A[i,j] B[j]
M[i] avg= A[i,j] B[j]
X[i] max= A[i,j] B[j]
T = A[i,j]
export S, M, X, T
"""
N = 400  # the projected extent of j


def data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": rng.normal(size=(3, N)), "B": rng.uniform(0.5, 2.0, size=N)}


def compile_mc(backend: str, samples: int, seed: int = 7):
    return Program(SRC).compile(backend, projection="monte_carlo", samples=samples, seed=seed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_enough_samples_is_exact(backend):
    d = data()
    exact = Program(SRC).compile(backend)(**d)
    got = compile_mc(backend, samples=3 * N)(**d)
    for k in exact:
        np.testing.assert_array_equal(got[k], exact[k])


@pytest.mark.parametrize("backend", BACKENDS)
def test_estimates_are_within_their_standard_error(backend):
    d = data()
    f = d["A"] * d["B"]  # the projected values of S, M and X, per i
    exact = Program(SRC).compile(backend)(**d)
    samples = 100
    got = compile_mc(backend, samples)(**d)
    sigma = f.std(axis=1)
    assert np.all(np.abs(got["S"] - exact["S"]) <= Z * N * sigma / np.sqrt(samples))
    assert np.all(np.abs(got["M"] - exact["M"]) <= Z * sigma / np.sqrt(samples))
    assert np.all(got["S"] != exact["S"])  # it did sample
    # Max: a lower bound, and not implausibly low for S uniform draws.
    assert np.all(got["X"] <= exact["X"])
    for i in range(3):
        below = np.mean(f[i] <= got["X"][i])
        assert below**samples >= 1e-9
    # T sums over i and j (count 3N): joint samples of both indices.
    total_sigma = d["A"].std()
    assert abs(float(got["T"]) - float(exact["T"])) <= Z * 3 * N * total_sigma / np.sqrt(samples)


def test_unbiased_over_seeds():
    d = data(1)
    f = d["A"] * d["B"]
    exact = Program(SRC).compile("reference")(**d)
    samples, seeds = 50, 40
    runs = [compile_mc("reference", samples, seed)(**d)["S"] for seed in range(seeds)]
    mean = np.mean(runs, axis=0)
    assert np.all(np.abs(mean - exact["S"]) <= Z * N * f.std(axis=1) / np.sqrt(samples * seeds))


def test_seeded_runs_are_reproducible_across_calls_backends_and_processes():
    d = data()
    ref = compile_mc("reference", 64, seed=11)
    first = ref(**d)
    again = ref(**d)
    other = compile_mc("reference", 64, seed=12)(**d)
    native = compile_mc("llvm", 64, seed=11)(**d)
    for k in first:
        np.testing.assert_array_equal(first[k], again[k])
        np.testing.assert_allclose(native[k], first[k], rtol=1e-12)
    assert not np.array_equal(first["S"], other["S"])
    code = (
        "import numpy as np\n"
        "from tests.test_monte_carlo import compile_mc, data\n"
        "print(compile_mc('reference', 64, seed=11)(**data())['S'].tobytes().hex())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == first["S"].tobytes().hex()


def test_integer_and_min_projections_stay_exact():
    src = "S[i] = A[i,j]\nL[i] min= F[i,j]"
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    f = np.random.default_rng(0).normal(size=(3, 4))
    got = Program(src).compile("reference", projection="monte_carlo", samples=1, seed=0)(A=a, F=f)
    np.testing.assert_array_equal(got["S"], a.sum(1))
    np.testing.assert_array_equal(got["L"], f.min(1))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"projection": "monte_carlo"}, "samples="),
        ({"projection": "monte_carlo", "samples": 0}, "samples="),
        ({"projection": "monte_carlo", "samples": 4, "seed": -1}, "seed="),
        ({"samples": 4}, "apply to projection='monte_carlo'"),
        ({"projection": "guess"}, "unknown projection"),
    ],
)
def test_bad_options(options, match):
    with pytest.raises(FuseError, match=match):
        Program(SRC).compile("reference", **options)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16), samples=st.integers(1, 3))
def test_random_programs_sample_the_same_on_both_backends(prog: GenProgram, seed: int, samples: int):
    """The rewrite is valid on any program: both backends agree (same tables), and plenty of samples is exact."""
    arrays = prog.arrays(seed)
    name = prog.equations[-1].lhs
    ref = Program(prog.source()).compile("reference", projection="monte_carlo", samples=samples, seed=seed)(**arrays)
    nat = Program(prog.source()).compile("llvm", projection="monte_carlo", samples=samples, seed=seed)(**arrays)
    np.testing.assert_allclose(nat[name], ref[name], rtol=1e-9, atol=1e-9)
    exact = Program(prog.source()).compile("reference")(**arrays)[name]
    plenty = Program(prog.source()).compile("reference", projection="monte_carlo", samples=10_000, seed=seed)
    np.testing.assert_array_equal(plenty(**arrays)[name], exact)


def test_relowered_programs_never_reuse_a_freed_lowerings_sampled_module(tmp_path) -> None:
    """Sampled modules are kept per lowering weakly, never by id(): after replace_sources each call's lowering is
    new, and a freed lowering's id (reused by CPython) must not find its sampled module (with the old sources)."""
    import gc

    np.save(tmp_path / "w.npy", np.zeros(N))
    prog = Program('W[j] = "w.npy"\nM avg= W[j] X[j]\nexport M\n', str(tmp_path / "p.fuse"), tmp_path)
    run = prog.compile("reference", projection="monte_carlo", samples=8, seed=0)
    with collecting_only_new_objects():
        for step in range(40):
            prog.replace_sources({"W": np.full(N, float(step))})
            assert float(run(X=np.ones(N))["M"]) == float(step)  # every sample of a constant product is exact
            gc.collect()
            assert len(run.rewrite.modules) <= 2  # freed lowerings take their sampled modules with them


def _corpus() -> list[tuple[str, str, dict[str, np.ndarray]]]:
    """Every builtin and one-line semantics case (the fixpoint sweep's corpus), as its single-mode line."""
    from tests.test_fixpoint import WRAPPED

    return [(case, src.split("\n")[0], inputs) for case, src, inputs in WRAPPED]


CORPUS = _corpus()


@pytest.mark.parametrize("case,src,inputs", CORPUS, ids=[c[0] for c in CORPUS])
def test_every_construct_samples_the_same_on_both_backends(case, src, inputs):
    """With 1, 2 and 3 samples: llvm equals the reference in dtype, shape and value, or both reject the program
    with the same error. (28 of the 102 cases project over more positions than one sample, so their values are
    estimates; the others have no float sum/mean/max projection and stay exact, which is checked too.)"""
    for samples in (1, 2, 3):
        got = {}
        for backend in ("reference", "llvm"):
            try:
                got[backend] = Program(src).compile(backend, projection="monte_carlo", samples=samples, seed=7)(
                    **inputs
                )
            except FuseError as e:
                got[backend] = str(e).splitlines()[0]
        ref, out = got["reference"], got["llvm"]
        if isinstance(ref, str) or isinstance(out, str):
            assert ref == out
            continue
        assert list(ref) == list(out)
        for k in ref:
            assert ref[k].dtype == out[k].dtype and ref[k].shape == out[k].shape, k
            np.testing.assert_allclose(out[k], ref[k], rtol=1e-9, atol=1e-12, err_msg=f"{k}, {samples} samples")
