"""Property tests: random valid programs on the reference interpreter agree with an independent oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir import Program
from tests.strategies import GenProgram, oracle, programs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_reference_matches_oracle(prog: GenProgram, seed: int):
    arrays = prog.arrays(seed)
    got = Program(prog.source()).compile()(**arrays)
    want = oracle(prog, arrays)
    last = prog.equations[-1].lhs
    np.testing.assert_allclose(got[last], want, rtol=1e-9, atol=1e-9, err_msg=prog.source())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(allow_empty=False), seed=st.integers(0, 2**16))
def test_float32_programs_stay_float32(prog: GenProgram, seed: int):
    arrays = prog.arrays(seed, np.float32)
    out = Program(prog.source()).compile()(**arrays)
    last = prog.equations[-1].lhs
    literal_terms = any(all(f.kind == "literal" for f in fs) for eq in prog.equations for _, fs in eq.terms)
    if not literal_terms:  # a term of literals alone is float64, as a literal alone is
        assert out[last].dtype == np.float32, prog.source()
    np.testing.assert_allclose(out[last], oracle(prog, arrays), rtol=2e-4, atol=2e-4, err_msg=prog.source())
