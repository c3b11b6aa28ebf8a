"""The hand-off backends (torch, jax, numba) against the reference interpreter.

Every semantics case, builtin, block, example, benchmark workload and random
program runs on each installed framework and must give the reference's
values, dtypes and shapes; errors the reference raises at run time must be
FuseRuntimeErrors here too. A framework that is not installed skips its
tests. ``torch.compile`` and numba are slow to compile, so compile mode runs
on a few programs, and numba (serial; ``parallel=True`` on a few programs)
on every example, block and workload and on a fixed fifth of the larger
corpora (semantics cases, builtins, random programs).
"""

from __future__ import annotations

import importlib.util
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workloads import WORKLOADS
from fuse_mlir import FuseError, FuseRuntimeError, Program
from tests.strategies import GenProgram, programs
from tests.test_builtins_lang import AXIS, ELEMENTWISE, M, P, X, softmax
from tests.test_lower_te_to_ew import BLOCKS
from tests.test_semantics import CASES

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.fuse"))
BACKENDS = ["torch", "jax", "numba"]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    pytest.importorskip(request.param)
    return request.param


def sample(backend: str, *key: object) -> None:
    """Skip four fifths of a large corpus on numba (by a stable hash of the case), whose compiles take seconds."""
    if backend == "numba" and zlib.crc32(repr(key).encode()) % 5:
        pytest.skip("numba runs a fixed fifth of this corpus")


def options(backend: str) -> dict:
    return {"parallel": False} if backend == "numba" else {}


def same(
    prog: Program, inputs: dict, backend: str, rtol: float = 1e-10, out_root=None, **opts
) -> dict[str, np.ndarray]:
    ref = prog.compile("reference", out_root=out_root)(**inputs)
    got = prog.compile(backend, out_root=out_root, **(options(backend) | opts))(**inputs)
    assert list(got) == list(ref)
    for k in ref:
        assert isinstance(got[k], np.ndarray), k
        assert got[k].dtype == ref[k].dtype, k
        assert got[k].shape == ref[k].shape, k
        np.testing.assert_allclose(got[k], ref[k], rtol=rtol, atol=rtol, err_msg=k)
    return got


@pytest.mark.parametrize("name,src,inputs,expected", CASES, ids=[c[0] for c in CASES])
def test_semantics_cases(backend, name, src, inputs, expected):
    sample(backend, name)
    same(Program(src), inputs, backend)


@pytest.mark.parametrize("name,expr,x,f", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_elementwise_builtins(backend, name, expr, x, f, dtype):
    sample(backend, name, dtype)
    if dtype == np.int64 and name in ("log", "sqrt"):
        x = np.abs(x) + 1
    arr = (x * 3).astype(dtype) if dtype == np.int64 else x.astype(dtype)
    same(Program(f"Y[i,j] = {expr}"), {"X": arr}, backend, 1e-10 if dtype != np.float32 else 2e-6)


@pytest.mark.parametrize("name,src,f", AXIS, ids=[a[0] for a in AXIS])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_axis_builtins(backend, name, src, f, dtype):
    sample(backend, name, dtype)
    inputs = dict(X=X, M=M, P=P, S=softmax(X, 1), G=np.ones_like(X))
    inputs = {k: (v.astype(dtype) if v.dtype.kind == "f" else v) for k, v in inputs.items() if f"{k}[" in src}
    same(Program(src), inputs, backend, 1e-10 if dtype == np.float64 else 2e-5)


@pytest.mark.parametrize("name,src", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_blocks(backend, name, src):
    rng = np.random.default_rng(3)
    inputs = {"Q": rng.standard_normal((4, 6)), "K": rng.standard_normal((4, 6)), "V": rng.standard_normal((4, 2))}
    inputs["Mk"] = np.tril(np.ones((4, 4)))
    same(Program(src), {n: a for n, a in inputs.items() if f"{n}[" in src}, backend)


# Builtins the runtime runs on NumPy (loop.host_call; numba leaves nopython mode for them), with a result no export
# reads: the call stays for its checks. Numba rejected a typed objmode output that is never read after the block
# (fuzzer seeds 916064 and 916080, a dead concat), so each runs dead, and read, on every hand-off.
HOST_CALLS = [
    ("concat", "T[i, c] = concat(X[i, c], P[i, c], axis=c)"),
    ("tucker_dense", "T[i, j] = tucker_dense(X[i, j], rank=1)"),
]


@pytest.mark.parametrize("name,eq", HOST_CALLS, ids=[h[0] for h in HOST_CALLS])
@pytest.mark.parametrize("dead", [True, False], ids=["dead", "read"])
def test_host_calls_dead_or_read(backend, name, eq, dead):
    rng = np.random.default_rng(5)
    inputs = {"X": rng.standard_normal((3, 4)), "P": rng.standard_normal((3, 2))}
    src = f"{eq}\nY[i] = X[i, 0] 2\nexport Y" if dead else f"{eq}\nY[i] = T[i, 1] 2\nexport Y, T"
    same(Program(src), {n: a for n, a in inputs.items() if f"{n}[" in src}, backend, rtol=1e-9)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples(backend, path, tmp_path):
    prog = Program.from_file(path)
    ref = prog.compile("reference", out_root=tmp_path / "ref")()
    got = prog.compile(backend, out_root=tmp_path / "got", **options(backend))()
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape, k
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-10, atol=1e-10, err_msg=k)
    ref_files = sorted(p.relative_to(tmp_path / "ref") for p in (tmp_path / "ref").rglob("*") if p.is_file())
    got_files = sorted(p.relative_to(tmp_path / "got") for p in (tmp_path / "got").rglob("*") if p.is_file())
    assert got_files == ref_files  # the same sinks were written
    for f in ref_files:
        if f.suffix == ".npy":
            np.testing.assert_allclose(np.load(tmp_path / "got" / f), np.load(tmp_path / "ref" / f), rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workloads(backend, w, dtype):
    inputs = w.inputs(np.random.default_rng(1), np.dtype(dtype), True)
    same(Program(w.source), inputs, backend, 1e-10 if dtype == np.float64 else 1e-4)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs(backend, prog: GenProgram, seed: int):
    sample(backend, prog.source(), seed)
    same(Program(prog.source()), prog.arrays(seed), backend, 1e-9)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(prog=programs(allow_empty=False), seed=st.integers(0, 2**16))
def test_random_programs_float32(backend, prog: GenProgram, seed: int):
    sample(backend, prog.source(), seed)
    same(Program(prog.source()), prog.arrays(seed, np.float32), backend, 2e-4)


class TestCallSemantics:
    def test_new_values_same_shapes_give_new_results(self, backend):
        run = Program("Y[i] = W[i, j] X[j]\nexport Y").compile(backend)
        w = np.arange(6.0).reshape(2, 3)
        a = run(W=w, X=np.ones(3))["Y"]
        b = run(W=w, X=np.array([1.0, 0.0, 2.0]))["Y"]
        np.testing.assert_allclose(a, w.sum(1))
        np.testing.assert_allclose(b, w @ [1.0, 0.0, 2.0])
        c = run(W=np.ones((4, 2)), X=np.ones(2))["Y"]  # new shapes: a new trace / kernel
        np.testing.assert_allclose(c, np.full(4, 2.0))

    def test_float32_stays_float32(self, backend):
        got = Program("Y[i] = exp(X[i])").compile(backend)(X=np.ones(3, dtype=np.float32))["Y"]
        assert got.dtype == np.float32

    def test_native_return_type(self, backend):
        got = Program("Y[i] = X[i] * 2").compile(backend, return_type="native")(X=np.arange(3.0))["Y"]
        if backend == "torch":
            import torch

            assert isinstance(got, torch.Tensor)
        elif backend == "jax":
            import jax

            assert isinstance(got, jax.Array)
        else:
            assert isinstance(got, np.ndarray)  # numba's arrays are NumPy arrays
        np.testing.assert_allclose(np.asarray(got), [0.0, 2.0, 4.0])

    def test_bad_return_type(self, backend):
        with pytest.raises(FuseError, match="return_type"):
            Program("Y[i] = X[i]").compile(backend, return_type="list")

    def test_common_options(self, backend):
        run = Program("Y[i] = X[i] + 1").compile(backend, opt_level=0, donate=["X"])
        np.testing.assert_allclose(run(X=np.arange(3.0))["Y"], [1.0, 2.0, 3.0])
        with pytest.raises(FuseError, match="optimisation level"):
            Program("Y[i] = X[i]").compile(backend, opt_level=7)

    def test_unknown_option(self, backend):
        with pytest.raises(FuseError, match="no option bogus"):
            Program("Y[i] = X[i]").compile(backend, bogus=True)


class TestErrors:
    def test_extent_mismatch(self, backend):
        with pytest.raises(FuseRuntimeError, match="j is 4 in V\\[j\\] but 3 in W\\[i, j\\]"):
            Program("Y[i] = W[i,j] V[j]").compile(backend)(W=np.ones((2, 3)), V=np.ones(4))

    def test_gather_out_of_range(self, backend):
        run = Program("E[t,d] = T[I[t], d]").compile(backend)
        with pytest.raises(FuseRuntimeError, match="index 3 is out of range .*extent 3") as e:
            run(T=np.ones((3, 2)), I=np.array([0, 3]))
        assert e.value.loc is not None and e.value.loc.line == 1
        with pytest.raises(FuseRuntimeError, match="index -1 is out of range"):
            run(T=np.ones((3, 2)), I=np.array([-1]))
        np.testing.assert_allclose(run(T=np.eye(3, 2), I=np.array([1, 0]))["E"], [[0, 1], [1, 0]])

    def test_numeric_position_out_of_range(self, backend):
        with pytest.raises(FuseRuntimeError, match="out of range"):
            Program("Y[d] = X[5, d]").compile(backend)(X=np.ones((3, 2)))

    def test_max_of_empty_axis(self, backend):
        # The reduction's identity on every backend (README "Semantics notes"), as the loop level computes it.
        got = Program("Y[i] max= X[i, j]\nZ[i] min= I[i, j]").compile(backend)(
            X=np.ones((2, 0)), I=np.ones((2, 0), np.int32)
        )
        np.testing.assert_array_equal(got["Y"], [-np.inf, -np.inf])
        assert got["Z"].dtype == np.int32 and got["Z"].tolist() == [2**31 - 1] * 2

    def test_integer_negative_power(self, backend):
        with pytest.raises(FuseRuntimeError, match="negative integer power") as info:
            Program("Y[i] = X[i] ** E[i]").compile(backend)(X=np.array([2, 3]), E=np.array([1, -1]))
        assert info.value.loc is not None


PARALLEL_PROGRAMS = ["svm.fuse"]


@pytest.mark.parametrize("name", PARALLEL_PROGRAMS)
def test_numba_parallel(name, tmp_path):
    pytest.importorskip("numba")
    same(
        Program.from_file(Path(__file__).parent.parent / "examples" / name),
        {},
        "numba",
        out_root=tmp_path,
        parallel=True,
    )


def test_numba_renders_prange_for_parallel_loops():
    pytest.importorskip("numba")
    from fuse_mlir.backends.numba.render import render_module
    from fuse_mlir.passes.lowering import lower_to_loop

    module = lower_to_loop(Program("Y[i, j] = exp(X[i, j]) + 1").lower().module, strict=True)
    assert "prange(" in render_module(module, parallel=True)[0]
    assert "prange(" not in render_module(module, parallel=False)[0]


@pytest.mark.parametrize("src", ["S = X[i] X[i]", "S = 2.0 * 3", "Y[i] = X[i] + 1\nS = X[i] X[i]"])
def test_numba_parallel_warns_of_nothing(src: str):
    # A program without a parallel loop (full reductions, scalars) is jitted without parallel=True, so numba's
    # "no transformation for parallel execution was possible" does not reach the user at the first call.
    numba = pytest.importorskip("numba")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", numba.NumbaPerformanceWarning)
        got = Program(src).compile("numba", parallel=True)(**({"X": np.arange(3.0)} if "X" in src else {}))
    assert float(got["S"]) == (5.0 if "X" in src else 6.0)


COMPILE_PROGRAMS = ["embedding.fuse", "attention.fuse"]


@pytest.mark.parametrize("name", COMPILE_PROGRAMS)
def test_torch_compile_mode(name, tmp_path):
    pytest.importorskip("torch")
    same(
        Program.from_file(Path(__file__).parent.parent / "examples" / name),
        {},
        "torch",
        out_root=tmp_path,
        mode="compile",
    )


def test_torch_compile_mode_new_values_and_errors():
    pytest.importorskip("torch")
    run = Program("E[t] = T[I[t]] * S[t]").compile("torch", mode="compile")
    np.testing.assert_allclose(run(T=np.arange(4.0), I=np.array([3, 1]), S=np.ones(2))["E"], [3.0, 1.0])
    np.testing.assert_allclose(run(T=np.arange(4.0), I=np.array([0, 2]), S=np.full(2, 2.0))["E"], [0.0, 4.0])
    with pytest.raises(FuseRuntimeError, match="gathered index 7"):
        run(T=np.arange(4.0), I=np.array([7, 1]), S=np.ones(2))
    with pytest.raises(FuseRuntimeError, match="t is"):
        run(T=np.arange(4.0), I=np.array([0, 1]), S=np.ones(3))


def test_torch_options():
    pytest.importorskip("torch")
    with pytest.raises(FuseError, match="mode"):
        Program("Y[i] = X[i]").compile("torch", mode="fast")
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(FuseError, match="no CUDA device"):
            Program("Y[i] = X[i]").compile("torch", device="cuda")


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
class TestJaxOptions:
    def test_donate(self):
        run = Program("Y[i] = X[i] + 1").compile("jax", donate=["X"])
        np.testing.assert_allclose(run(X=np.arange(3.0))["Y"], [1.0, 2.0, 3.0])
        with pytest.raises(FuseRuntimeError, match="not inputs"):
            Program("Y[i] = X[i] + 1").compile("jax", donate=["Z"])(X=np.arange(3.0))

    def test_device(self):
        import jax

        run = Program("Y[i] = X[i] * 2").compile("jax", device="cpu", return_type="native")
        y = run(X=np.arange(3.0))["Y"]
        assert y.devices() == {jax.devices("cpu")[0]}
        with pytest.raises(FuseError, match="device"):
            Program("Y[i] = X[i]").compile("jax", device="cpu:99")

    def test_bad_shard_axis(self):
        with pytest.raises(FuseError, match="mesh axis"):
            Program("Y[i] = X[i]").compile("jax", shard={"i": "model"})

    def test_float64_is_kept(self):
        got = Program("Y[i] = X[i] / 3").compile("jax")(X=np.ones(2))["Y"]
        assert got.dtype == np.float64 and got[0] == 1.0 / 3


SHARDED = r"""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np
import jax
from jax.sharding import PartitionSpec as P
from fuse_mlir import Program

assert len(jax.devices()) == 8, jax.devices()
src = "H[b, h] = relu(W[h, i] X[b, i] + B[h])\nY[b] = H[b, h] V[h]\nexport H, Y"
rng = np.random.default_rng(0)
inputs = dict(W=rng.standard_normal((6, 5)), X=rng.standard_normal((16, 5)), B=rng.standard_normal(6), V=rng.standard_normal(6))
prog = Program(src)
ref = prog.compile("reference")(**inputs)
named = prog.compile("jax", shard={"b": "data"}, return_type="native")(**inputs)
assert len(named["H"].sharding.device_set) == 8, named["H"].sharding
mesh = jax.make_mesh((4, 2), ("data", "model"))
explicit = prog.compile("jax", mesh=mesh, in_shardings={"X": P("data", None), "W": P("model", None)})(**inputs)
for got in (named, explicit):
    for k in ref:
        np.testing.assert_allclose(np.asarray(got[k]), ref[k], rtol=1e-12, atol=1e-12)
print("sharded ok")
"""


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_sharded_equals_unsharded(tmp_path):
    """On 8 forced host devices (XLA_FLAGS must be set before jax starts, hence a subprocess)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    script = tmp_path / "sharded.py"
    script.write_text(SHARDED)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sharded ok" in out.stdout


class TestAuto:
    def test_cpu_runs_llvm(self):
        from fuse_mlir.backends.handoff import choose_backend

        assert choose_backend({}) == "llvm"
        assert choose_backend({"device": "cpu"}) == "llvm"
        assert choose_backend({"strict": True}) == "llvm"
        assert choose_backend({"donate": (), "opt_level": 2}) == "llvm"  # defaults do not hand off
        run = Program("Y[i] = X[i] * 2").compile("auto", device="cpu")
        assert run.executor.backend_name == "llvm"
        np.testing.assert_allclose(run(X=np.arange(3.0))["Y"], [0.0, 2.0, 4.0])

    def test_sharding_and_donation_hand_off_to_jax(self):
        from fuse_mlir.backends.handoff import choose_backend

        assert choose_backend({"shard": {"b": "data"}}) == "jax"
        assert choose_backend({"donate": ["X"]}) == "jax"
        assert choose_backend({"mode": "compile"}) == "torch"

    def test_jax_device_hands_off_to_jax(self):
        jax = pytest.importorskip("jax")
        run = Program("Y[i] = X[i] * 2").compile("auto", device=jax.devices("cpu")[0])
        assert run.executor.backend_name == "jax"
        np.testing.assert_allclose(run(X=np.arange(3.0))["Y"], [0.0, 2.0, 4.0])

    def test_cuda_without_a_gpu_is_a_clear_error(self):
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            assert Program("Y[i] = X[i]").compile("auto", device="cuda").executor.backend_name == "torch"
            return
        with pytest.raises(FuseError, match="no installed framework"):
            Program("Y[i] = X[i]").compile("auto", device="cuda")

    def test_unknown_device(self):
        with pytest.raises(FuseError, match="does not know device"):
            Program("Y[i] = X[i]").compile("auto", device="abacus")
