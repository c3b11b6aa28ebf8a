"""The llvm backend against the reference interpreter: every semantics case, builtin, example and random program."""

from __future__ import annotations

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


def same(prog: Program, inputs: dict, rtol: float = 1e-10, out_root=None, **options) -> dict:
    ref = prog.compile("reference", out_root=out_root)(**inputs)
    got = prog.compile("llvm", out_root=out_root, **options)(**inputs)
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype, k
        assert got[k].shape == ref[k].shape, k
        np.testing.assert_allclose(got[k], ref[k], rtol=rtol, atol=rtol, err_msg=k)
    return got


@pytest.mark.parametrize("name,src,inputs,expected", CASES, ids=[c[0] for c in CASES])
def test_semantics_cases(name, src, inputs, expected):
    same(Program(src), inputs)


@pytest.mark.parametrize("name,expr,x,f", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_elementwise_builtins(name, expr, x, f, dtype):
    if dtype == np.int64 and name in ("log", "sqrt"):
        x = np.abs(x) + 1
    arr = (x * 3).astype(dtype) if dtype == np.int64 else x.astype(dtype)
    same(Program(f"Y[i,j] = {expr}"), {"X": arr}, 1e-10 if dtype != np.float32 else 2e-6)


@pytest.mark.parametrize("name,src,f", AXIS, ids=[a[0] for a in AXIS])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_axis_builtins(name, src, f, dtype):
    inputs = dict(X=X, M=M, P=P, S=softmax(X, 1), G=np.ones_like(X))
    inputs = {k: (v.astype(dtype) if v.dtype.kind == "f" else v) for k, v in inputs.items() if f"{k}[" in src}
    same(Program(src), inputs, 1e-10 if dtype == np.float64 else 2e-5)


@pytest.mark.parametrize("name,src", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_blocks(name, src):
    rng = np.random.default_rng(3)
    inputs = {"Q": rng.standard_normal((4, 6)), "K": rng.standard_normal((4, 6)), "V": rng.standard_normal((4, 2))}
    inputs["Mk"] = np.tril(np.ones((4, 4)))
    same(Program(src), {n: a for n, a in inputs.items() if f"{n}[" in src})


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples(path, tmp_path):
    same(Program.from_file(path), {}, out_root=tmp_path)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workloads(w, dtype):
    inputs = w.inputs(np.random.default_rng(1), np.dtype(dtype), True)
    same(Program(w.source), inputs, 1e-10 if dtype == np.float64 else 1e-4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs(prog: GenProgram, seed: int):
    same(Program(prog.source()), prog.arrays(seed), 1e-9)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(allow_empty=False), seed=st.integers(0, 2**16))
def test_random_programs_float32(prog: GenProgram, seed: int):
    same(Program(prog.source()), prog.arrays(seed, np.float32), 2e-4)


class TestErrors:
    def test_extent_mismatch(self):
        with pytest.raises(FuseRuntimeError, match="j is 4 in V\\[j\\] but 3 in W\\[i, j\\]"):
            Program("Y[i] = W[i,j] V[j]").compile("llvm")(W=np.ones((2, 3)), V=np.ones(4))

    def test_gather_out_of_range_is_an_error_not_a_read(self):
        run = Program("E[t,d] = T[I[t], d]").compile("llvm")
        with pytest.raises(FuseRuntimeError, match="out of range") as e:
            run(T=np.ones((3, 2)), I=np.array([0, 3]))
        assert e.value.loc is not None and e.value.loc.line == 1
        with pytest.raises(FuseRuntimeError, match="out of range"):
            run(T=np.ones((3, 2)), I=np.array([-1]))

    def test_numeric_position_out_of_range(self):
        with pytest.raises(FuseRuntimeError, match="out of range"):
            Program("Y[d] = X[5, d]").compile("llvm")(X=np.ones((3, 2)))

    def test_bad_inputs_are_rejected_before_native_code(self):
        run = Program("Y[i] = W[i,j] V[j]").compile("llvm")
        with pytest.raises(FuseRuntimeError, match="rank"):
            run(W=np.ones(3), V=np.ones(3))
        with pytest.raises(FuseRuntimeError, match="dtype"):
            run(W=np.ones((2, 2), dtype=complex), V=np.ones(2))

    def test_non_contiguous_inputs(self):
        x = np.arange(24.0).reshape(4, 6)[::2, ::3]
        got = Program("Y[i] = X[i,j]").compile("llvm")(X=x)["Y"]
        np.testing.assert_allclose(got, x.sum(1))

    def test_unknown_option(self):
        with pytest.raises(FuseError, match=r"the llvm backend has no option bogus \(its options: strict, opt_level"):
            Program("Y[i] = X[i]").compile("llvm", bogus=True)


def test_shapes_change_without_recompiling():
    prog = Program("Y[i] = relu(W[i,j] V[j])")
    run = prog.compile("llvm")
    for n, m in [(3, 4), (7, 1), (0, 5), (5, 0), (1, 1)]:
        w, v = np.random.rand(n, m), np.random.rand(m)
        np.testing.assert_allclose(run(W=w, V=v)["Y"], np.maximum(w @ v, 0))
    assert len(run.executor.compiled) == 1


def test_identical_programs_share_a_kernel():
    from fuse_mlir.backends.llvm.executor import compile_program

    a = Program("Y[i] = exp(X[i]) + 1").lower().module
    b = Program("Y[i] = exp(X[i]) + 1").lower().module
    assert compile_program(a) is compile_program(b)


def test_strict_mode_agrees():
    x = np.random.default_rng(0).standard_normal(1000)
    got = Program("S = X[i]").compile("llvm", strict=True)(X=x)["S"]
    np.testing.assert_allclose(got, x.sum(), rtol=1e-12)


def test_outputs_are_fresh_arrays():
    run = Program("Y[i] = X[i] + 0").compile("llvm")
    x = np.arange(3.0)
    a = run(X=x)["Y"]
    b = run(X=x)["Y"]
    a[0] = 99
    assert b[0] == 0 and x[0] == 0


def test_compile_errors_are_still_fuse_errors():
    with pytest.raises(FuseError):
        Program("Y[i] = nope(X[i])").compile("llvm")
