"""Semi-naive evaluation: the delta-rule rewrite gives naive iteration's results and iteration counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir import Program
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.lowered import LowerOptions
from fuse_mlir.passes.transforms.semi_naive import semi_naive

# Candidate terms of A's rule and of B's (mutually recursive) rule; E and F are boolean relations.
A_TERMS = [
    "E(x,z)",
    "A(x,y) E(y,z)",
    "E(x,y) A(y,z)",
    "A(x,y) A(y,z)",
    "A(x,y) F(y,z)",
    "A(x,z) F(x,z)",
    "A(z,x)",
    "B(x,y) E(y,z)",
]
B_TERMS = ["F(x,z)", "A(x,y) F(y,z)", "A(z,x)", "B(x,y) B(y,z)"]


def program_text(a_terms: list[str], b_terms: list[str], unary: bool, n: int) -> str:
    lines = [f"axis x = {n}", f"axis y = {n}", f"axis z = {n}", "E(x,y) = Ein(x,y)", "F(x,y) = Fin(x,y)"]
    if any("B(" in t for t in a_terms) and not b_terms:
        b_terms = ["F(x,z)"]
    lines.append("A(x,z) = " + " + ".join(a_terms))
    if b_terms:
        lines.append("B(x,z) = " + " + ".join(b_terms))
    exports = ["A"] + (["B"] if b_terms else [])
    if unary:
        lines.append("Start(x) = S(x)")
        lines.append("R(x) = Start(x) + R(y) A(y,x)")
        exports.append("R")
    lines.append("export " + ", ".join(exports))
    return "\n".join(lines)


def inputs_for(prog: Program, n: int, rng: np.random.Generator, p: float) -> dict[str, np.ndarray]:
    names = prog.compile("reference", mode="fixpoint").input_names()
    out = {}
    for name in names:
        shape = (n,) if name == "S" else (n, n)
        out[name] = (rng.random(shape) < p).astype(np.int8)
    return out


def run_both(prog: Program, inputs, backend: str):
    naive = prog.compile(backend, mode="fixpoint", semi_naive=False, max_iters=64)
    semi = prog.compile(backend, mode="fixpoint", semi_naive=True, max_iters=64)
    return naive, naive(**inputs), semi, semi(**inputs)


def rewritten(prog: Program) -> int:
    """How many fixpoints of the program the semi-naive rewrite turned into delta rules."""
    module = prog.lower({"Ein": np.int8, "Fin": np.int8}, LowerOptions(mode="fixpoint")).module
    return sum("delta" in str(op.names) for op in module.walk() if isinstance(op, te.FixpointOp))


def fixpoints(prog: Program) -> int:
    module = prog.lower({"Ein": np.int8, "Fin": np.int8}, LowerOptions(mode="fixpoint", semi_naive=False)).module
    return sum(isinstance(op, te.FixpointOp) for op in module.walk())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a_terms=st.lists(st.sampled_from(A_TERMS), min_size=1, max_size=4, unique=True),
    b_terms=st.lists(st.sampled_from(B_TERMS), max_size=2, unique=True),
    unary=st.booleans(),
    n=st.integers(2, 7),
    seed=st.integers(0, 2**16),
    p=st.sampled_from([0.1, 0.25, 0.5]),
)
def test_semi_naive_equals_naive_on_random_recursive_programs(a_terms, b_terms, unary, n, seed, p):
    prog = Program(program_text(a_terms, b_terms, unary, n))
    inputs = inputs_for(prog, n, np.random.default_rng(seed), p)
    naive, want, semi, got = run_both(prog, inputs, "reference")
    assert want.keys() == got.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    assert naive.last_run.iterations == semi.last_run.iterations
    assert naive.last_run.converged and semi.last_run.converged
    assert rewritten(prog) == fixpoints(prog)  # every group here is boolean and monotone


@pytest.mark.parametrize(
    "a_terms,b_terms,unary",
    [
        (["E(x,z)", "A(x,y) E(y,z)"], [], False),
        (["E(x,z)", "A(x,y) A(y,z)", "B(x,y) E(y,z)"], ["F(x,z)", "A(z,x)"], True),
    ],
)
def test_semi_naive_equals_naive_on_llvm(a_terms, b_terms, unary):
    prog = Program(program_text(a_terms, b_terms, unary, 9))
    inputs = inputs_for(prog, 9, np.random.default_rng(3), 0.2)
    naive, want, semi, got = run_both(prog, inputs, "llvm")
    _, ref, _, _ = run_both(prog, inputs, "reference")
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        np.testing.assert_array_equal(got[k], ref[k])
    assert naive.last_run.iterations == semi.last_run.iterations


def test_boolean_groups_are_rewritten():
    prog = Program(program_text(["E(x,z)", "A(x,y) A(y,z)", "B(x,y) E(y,z)"], ["F(x,z)"], True, 4))
    assert rewritten(prog) == 2  # the A/B group and the R group


@pytest.mark.parametrize(
    "src",
    [
        # Ein is an int8 input: it may hold negative values, so OR-of-sums is not monotone in it.
        "A(x,z) = Ein(x,z) + A(x,y) Ein(y,z)",
        # Negation is not monotone.
        "E(x,y) = Ein(x,y)\nA(x,z) = E(x,z) + !A(z,x)",
        # A sum-valued (non-boolean) recursion.
        "X[i] = 0.5 X[i] + Fin[i,i]",
        # max of two possibly negative factors may be negative.
        "E(x,y) = Ein(x,y)\nA(x,z) = E(x,z) + A(x,y) max(Fin(y,z), Fin(y,z))",
    ],
)
def test_non_monotone_groups_stay_naive(src):
    prog = Program(src)
    assert rewritten(prog) == 0
    module = prog.lower({"Ein": np.int8, "Fin": np.int8}, LowerOptions(mode="fixpoint", semi_naive=False)).module
    skipped = []
    assert semi_naive(module, skipped.append) == 0 and len(skipped) == 1


def test_max_with_one_non_negative_factor_is_rewritten():
    prog = Program("E(x,y) = Ein(x,y)\nA(x,z) = E(x,z) + A(x,y) max(E(y,z), Fin(y,z))")
    assert rewritten(prog) == 1
    rng = np.random.default_rng(0)
    inputs = {"Ein": (rng.random((5, 5)) < 0.3).astype(np.int8), "Fin": rng.integers(-2, 2, (5, 5)).astype(np.int8)}
    _, want, _, got = run_both(prog, inputs, "reference")
    np.testing.assert_array_equal(got["A"], want["A"])


def test_facts_from_files_allow_the_rewrite(tmp_path):
    (tmp_path / "par.tsv").write_text("0\t1\n1\t2\n2\t3\n")
    (tmp_path / "p.fuse").write_text('Par(x,y) = "par.tsv"\nAnc(x,z) = Par(x,z) + Anc(x,y) Par(y,z)\nexport Anc')
    prog = Program.from_file(tmp_path / "p.fuse")
    module = prog.lower(None, LowerOptions(mode="fixpoint")).module
    assert "Anc.delta" in str(module)
    out = prog.compile("reference", mode="fixpoint")()
    np.testing.assert_array_equal(out["Anc"], np.triu(np.ones((4, 4), np.int8), 1))


@pytest.mark.parametrize(
    "src,shapes,dtype",
    [
        ("C[i,k] = A[i,j] B[j,k]", {"A": (5, 4), "B": (4, 3)}, np.int8),
        ("C[b,i,k] = A[b,i,j] B[b,j,k]", {"A": (2, 3, 4), "B": (2, 4, 5)}, np.int64),
        ("C[i] = A[i,j] B[j]", {"A": (4, 6), "B": (6,)}, np.uint8),
        ("C[k,i] = A[i,j] B[j,k] + 1", {"A": (3, 3), "B": (3, 2)}, np.int16),
    ],
)
def test_integer_joins_that_skip_zeros_equal_the_reference(src, shapes, dtype):
    """The zero-skipping loop order for integer sums of products (what makes delta joins cheap) is exact."""
    rng = np.random.default_rng(7)
    lo = 0 if np.dtype(dtype).kind == "u" else -3
    inputs = {k: (rng.integers(lo, 4, s) * (rng.random(s) < 0.4)).astype(dtype) for k, s in shapes.items()}
    prog = Program(src)
    want = prog.compile("reference")(**inputs)
    got = prog.compile("llvm")(**inputs)
    np.testing.assert_array_equal(got["C"], want["C"])
    loop_text = str(prog.compile("llvm").executor.program_for(prog.lower({k: dtype for k in shapes})).loop_module)
    assert "arith.select" in loop_text and "arith.cmpi ne" in loop_text
