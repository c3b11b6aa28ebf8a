"""contract-order: n-way sum contractions become pairwise ones in a cheap order, with the same results."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir import Program
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.reference import run_module
from fuse_mlir.ir import make_context
from fuse_mlir.passes.transforms.contract_order import ContractOrder
from tests.strategies import GenProgram, programs


def ordered(src: str, dtypes=None):
    low = Program(src).lower(dtypes)
    module = low.module.clone()
    ContractOrder().apply(make_context(), module)
    module.verify()
    return low, module


def test_matrix_chain_goes_the_cheap_way():
    src = "A[i,j] = const([[1.0,2.0],[3.0,4.0],[5.0,6.0]])\nY[i,l] = A[i,j] B[j,k] C[k,l]\nexport Y"
    low, module = ordered(src)
    contracts = [op for op in module.walk() if isinstance(op, te.ContractOp)]
    assert len(contracts) == 2 and all(len(op.inputs) == 2 for op in contracts)
    rng = np.random.default_rng(0)
    inputs = {"B": rng.standard_normal((2, 7)), "C": rng.standard_normal((7, 3))}
    want = run_module(low.module, inputs, low.sources).exports["Y"]
    got = run_module(module, inputs, low.sources).exports["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_max_projection_is_left_whole():
    _, module = ordered("Y[i] max= A[i,j] B[j,k] C[k]")
    assert [len(op.inputs) for op in module.walk() if isinstance(op, te.ContractOp)] == [3]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs_keep_their_values(prog: GenProgram, seed: int):
    arrays = prog.arrays(seed)
    low, module = ordered(prog.source(), {k: v.dtype for k, v in arrays.items()})
    want = run_module(low.module, arrays, low.sources).exports
    got = run_module(module, arrays, low.sources).exports
    for k in want:
        assert got[k].dtype == want[k].dtype
        np.testing.assert_allclose(got[k], want[k], rtol=1e-9, atol=1e-9)
