"""CI sample of the differential fuzzer: fixed seeds, reference + llvm-O2, and text mutants.

Marked ``fuzz`` (``-m "not fuzz"`` skips it in the quick subset). Any
disagreement, crash or hang fails, with the minimised reproducers in the
message: there is no list of known failures.
"""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir.targets import checked_build
from fuse_mlir.testing.fuzz import run_mutants, run_programs

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]


def test_programs_agree_with_the_oracle() -> None:
    # Small programs (at most two equation groups): the llvm compile per program is the cost. The plain pass
    # runs seeds 0-249 and the checked pass (--check-bounds, FUSE_CHECK_BOUNDS) seeds 250-399, so CI's two
    # passes fuzz 400 distinct programs, each once. The checked pass runs fewer because its compiles cost
    # more (about 1 s per program against 0.8) and it is the longer of CI's two passes.
    n, seed = (150, 250) if checked_build() else (250, 0)
    rep = run_programs(n, ["reference", "llvm-O2"], seed=seed, timeout=60, max_minimise=3, max_groups=2)
    assert rep.programs >= n * 0.9
    assert not rep.failures, rep.table(["reference", "llvm-O2"]) + "\n" + rep.explain()


def test_text_mutants_give_located_errors_or_agree() -> None:
    # Half the mutants keep their syntax, so they compile on llvm and run (on tiny inputs) against the
    # reference: about 0.1 s each, where a mutant the parser stops costs a few ms. The plain pass runs 600
    # mutants of seed 0 and the checked pass 250 of seed 1 (its compiles cost more), 850 distinct in all.
    n, seed = (250, 1) if checked_build() else (600, 0)
    rep = run_mutants(n, ["reference", "llvm-O2"], seed=seed, timeout=30)
    assert rep.programs == n
    assert not rep.failures, rep.table(["mutants"]) + "\n" + rep.explain()


def test_oracle_reads_the_spec_examples() -> None:
    """The oracle's own rules on hand-written programs whose values LANGUAGE.md states."""
    from fuse_mlir.testing.fuzz.oracle import evaluate
    from fuse_mlir.testing.fuzz.program import Bin, Call, Eq, FuzzProgram, IName, InputSpec, Ref

    W = np.arange(6.0).reshape(2, 3)
    X = np.array([1.0, -1.0, 2.0])
    i, j = IName("i"), IName("j")
    # Y[i] = relu(W[i,j] X[j]): relu of the contracted vector (§4 function calls)
    p = FuzzProgram(
        eqs=[Eq("Y", (i,), "=", Call("relu", (Bin("*", Ref("W", (i, j)), Ref("X", (j,)), True),)))],
        inputs={"W": InputSpec((2, 3), "float64"), "X": InputSpec((3,), "float64")},
        exports=["Y"],
        extents={"i": 2, "j": 3},
    )
    np.testing.assert_allclose(evaluate(p, {"W": W, "X": X})["Y"], np.maximum(W @ X, 0))
    # P[a, b.] = softmax(T[a, b, c]): c is projected inside the call, rows sum to 1
    T = np.random.default_rng(0).normal(size=(2, 3, 4))
    a, b, c = IName("a"), IName("b", True), IName("c")
    p = FuzzProgram(
        eqs=[Eq("P", (a, b), "=", Call("softmax", (Ref("T", (a, IName("b"), c)),)))],
        inputs={"T": InputSpec((2, 3, 4), "float64")},
        exports=["P"],
        extents={"a": 2, "b": 3, "c": 4},
    )
    got = evaluate(p, {"T": T})["P"]
    np.testing.assert_allclose(got.sum(axis=1), 1.0)
    s = T.sum(axis=2)
    np.testing.assert_allclose(got, np.exp(s) / np.exp(s).sum(axis=1, keepdims=True))
    # I32[j] 3 stays int32 (NEP 50 weak literal)
    from fuse_mlir.testing.fuzz.program import Lit

    p = FuzzProgram(
        eqs=[Eq("Z", (j,), "=", Bin("*", Lit(3), Ref("I", (j,)), True))],
        inputs={"I": InputSpec((3,), "int32")},
        exports=["Z"],
        extents={"j": 3},
    )
    assert evaluate(p, {"I": np.arange(3, dtype=np.int32)})["Z"].dtype == np.int32


def test_oracle_literals_and_flatten() -> None:
    """Literal-only arithmetic stays a weak literal (§8), and a one-argument concat flattens the argument's
    last two indices that the left side lacks into the one left index it lacks (§6)."""
    from fuse_mlir.testing.fuzz.oracle import evaluate
    from fuse_mlir.testing.fuzz.program import Bin, Call, Eq, FuzzProgram, IName, InputSpec, Lit, Ref

    j = IName("j")
    x = np.array([0.5, 2.0], dtype=np.float32)
    p = FuzzProgram(
        eqs=[Eq("Z", (j,), "=", Bin("-", Ref("X", (j,)), Bin("*", Lit(1.0), Lit(1.5), True)))],
        inputs={"X": InputSpec((2,), "float32")},
        exports=["Z"],
        extents={"j": 2},
    )
    z = evaluate(p, {"X": x})["Z"]
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, x - 1.5)
    a = np.arange(24.0).reshape(2, 3, 4)
    r, u, c, k = IName("r"), IName("u"), IName("c"), IName("k")
    p = FuzzProgram(
        eqs=[Eq("F", (r, k), "=", Call("concat", (Ref("A", (r, u, c)),)))],
        inputs={"A": InputSpec((2, 3, 4), "float64")},
        exports=["F"],
        extents={"r": 2, "u": 3, "c": 4},
    )
    np.testing.assert_array_equal(evaluate(p, {"A": a})["F"], a.reshape(2, 12))


def test_oracle_product_dtype_is_one_promotion_of_all_factors() -> None:
    """A term's factors join at once (§4): weak literals anywhere in it do not widen (§8), whatever their place."""
    from fuse_mlir.testing.fuzz.oracle import evaluate
    from fuse_mlir.testing.fuzz.program import Bin, Eq, FuzzProgram, IName, InputSpec, Lit, Ref

    i = IName("i")
    b = np.array([1, -2], dtype=np.int8)
    x = np.array([0.5, 2.0], dtype=np.float32)
    orders = [
        Bin("*", Bin("*", Ref("B", (i,)), Lit(0.5), True), Ref("X", (i,)), True),  # B[i] 0.5 X[i]
        Bin("*", Bin("*", Ref("X", (i,)), Ref("B", (i,)), True), Lit(0.5), True),  # X[i] B[i] 0.5
        Bin("*", Lit(0.5), Bin("*", Ref("B", (i,)), Ref("X", (i,)), True), True),  # 0.5 (B[i] X[i])
    ]
    for rhs in orders:
        p = FuzzProgram(
            eqs=[Eq("Y", (i,), "=", rhs)],
            inputs={"B": InputSpec((2,), "int8"), "X": InputSpec((2,), "float32")},
            exports=["Y"],
            extents={"i": 2},
        )
        y = evaluate(p, {"B": b, "X": x})["Y"]
        assert y.dtype == np.float32, rhs
        np.testing.assert_array_equal(y, b * x * np.float32(0.5))
    p = FuzzProgram(
        eqs=[Eq("Y", (i,), "=", Bin("*", Ref("B", (i,)), Lit(0.5), True))],
        inputs={"B": InputSpec((2,), "int8")},
        exports=["Y"],
        extents={"i": 2},
    )
    assert evaluate(p, {"B": b})["Y"].dtype == np.float64  # an int tensor times a float literal is float
