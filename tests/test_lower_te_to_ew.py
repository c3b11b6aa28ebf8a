"""tensor_eq → elemwise: every program gives the reference's results and dtypes when run at the ew level."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir import FuseRuntimeError, Program
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.interp.ew_interp import run_ew_module
from fuse_mlir.interp.reference import run_module
from fuse_mlir.ir import make_context, parse_mlir, print_module
from fuse_mlir.passes.conversions.lower_te_to_ew import lower_te_to_ew
from fuse_mlir.passes.transforms.fuse import Fuse
from tests.strategies import GenProgram, programs
from tests.test_builtins_lang import AXIS, ELEMENTWISE, M, P, X, softmax
from tests.test_semantics import CASES

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.fuse"))


def check(prog: Program, inputs: dict, rtol: float = 1e-12) -> None:
    arrays = {k: np.asarray(v) for k, v in inputs.items()}
    arrays = {k: (v.astype(np.int8) if v.dtype == bool else v) for k, v in arrays.items()}
    low = prog.lower({k: v.dtype for k, v in arrays.items()})
    ref = run_module(low.module, arrays, low.sources).exports
    module = lower_te_to_ew(low.module.clone())
    module.verify()
    text = print_module(module)
    assert print_module(parse_mlir(text, "ew.mlir")) == text
    assert not any(op.name.startswith("te.") and op.name not in KEPT for op in module.walk())
    got = run_ew_module(module, arrays, low.sources).exports
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype, k
        np.testing.assert_allclose(got[k], ref[k], rtol=rtol, atol=rtol)
    # The same after producer-consumer fusion.
    Fuse().apply(make_context(), module)
    module.verify()
    fused = run_ew_module(module, arrays, low.sources).exports
    for k in ref:
        assert fused[k].dtype == ref[k].dtype, k
        np.testing.assert_allclose(fused[k], ref[k], rtol=rtol, atol=rtol)


KEPT = {"te.input", "te.source", "te.constant", "te.dim", "te.slice_len", "te.check_dim", "te.sink", "te.export"}


@pytest.mark.parametrize("name,src,inputs,expected", CASES, ids=[c[0] for c in CASES])
def test_semantics_cases(name, src, inputs, expected):
    check(Program(src), inputs)


@pytest.mark.parametrize("name,expr,x,f", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_elementwise_builtins(name, expr, x, f, dtype):
    if dtype == np.int64 and name in ("log", "sqrt"):
        x = np.abs(x) + 1
    check(Program(f"Y[i,j] = {expr}"), {"X": (x * 3).astype(dtype) if dtype == np.int64 else x.astype(dtype)}, 2e-6)


@pytest.mark.parametrize("name,src,f", AXIS, ids=[a[0] for a in AXIS])
def test_axis_builtins(name, src, f):
    s = softmax(X, 1)
    g = np.ones_like(X)
    inputs = {k: v for k, v in dict(X=X, M=M, P=P, S=s, G=g).items() if f"{k}[" in src}
    check(Program(src), inputs)


BLOCKS = [
    ("attention", "Y[p,e] = attention(Q[p,d], K[p',d], V[p',e])"),
    ("attention causal", "Y[p,e] = attention(Q[p,d], K[p',d], V[p',e], causal=true, scale=0.5)"),
    ("attention mask", "Y[p,e] = attention(Q[p,d], K[p',d], V[p',e], Mk[p,p'])"),
    ("rope", "Y[p,d] = rope(Q[p,d])"),
    ("tucker", "Y[p,d] = tucker_dense(Q[p,d], rank=1)"),
]


@pytest.mark.parametrize("name,src", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_blocks(name, src):
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((4, 6)), rng.standard_normal((4, 6)), rng.standard_normal((4, 2))
    inputs = {"Q": q, "K": k, "V": v, "Mk": np.tril(np.ones((4, 4)))}
    check(Program(src), {n: a for n, a in inputs.items() if f"{n}[" in src})


def test_topk_sink(tmp_path):
    check(Program('"t.npz" = topk(X[i,j], k=2)\nY[i] = X[i,j]'), {"X": X})


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples(path):
    check(Program.from_file(path), {})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs(prog: GenProgram, seed: int):
    check(Program(prog.source()), prog.arrays(seed), 1e-9)


def test_contractions_become_ew_contract():
    low = Program("C[i,k] = A[i,j] B[j,k]").lower()
    module = lower_te_to_ew(low.module.clone())
    assert [op.name for op in module.walk() if isinstance(op, ew.ContractOp)] == ["ew.contract"]


def test_gather_out_of_range_is_located_at_the_ew_level():
    low = Program("E[t,d] = T[I[t], d]").lower({"I": np.dtype(np.int64)})
    module = lower_te_to_ew(low.module.clone())
    with pytest.raises(FuseRuntimeError, match="out of range") as e:
        run_ew_module(module, {"T": np.ones((3, 2)), "I": np.array([0, 5])}, {})
    assert e.value.loc is not None and e.value.loc.line == 1


def kernels(src: str, fuse: bool) -> list[str]:
    module = lower_te_to_ew(Program(src).lower().module.clone())
    if fuse:
        Fuse().apply(make_context(), module)
        module.verify()
    return [op.name for op in module.walk() if op.name.startswith("ew.") and op.parent_op() is module]


def test_fusion_makes_one_kernel_of_a_map_chain_and_its_reduction():
    src = "S = (exp(X[i]) Y[i] + Z[i])\nexport S"
    assert len(kernels(src, False)) == 4
    assert kernels(src, True) == ["ew.generic"]


def test_fusion_computes_a_value_used_twice_once():
    src = "E[i] = exp(X[i])\nA[i] = E[i] + 1\nB[i] = E[i] * 2\nexport A, B"
    assert kernels(src, True) == ["ew.generic"]  # A and B are siblings (both read E): one kernel
    module = lower_te_to_ew(Program(src).lower().module.clone())
    Fuse().apply(make_context(), module)
    (kernel,) = [op for op in module.walk() if isinstance(op, ew.GenericOp)]
    assert len(kernel.outputs) == 2
    assert sum(op.name == "math.exp" for op in kernel.body.block.ops) == 1  # E computed once


def test_softmax_and_lnorm_keep_no_full_size_temporary():
    for src in ["Y[r, c.] = softmax(X[r, c])\nexport Y", "Y[r, c.] = lnorm(X[r, c])\nexport Y"]:
        module = lower_te_to_ew(Program(src).lower().module.clone())
        Fuse().apply(make_context(), module)
        full = [op for op in module.walk() if isinstance(op, ew.GenericOp) and op.result.type.get_num_dims() == 2]
        assert len(full) == 1, src  # only the output
