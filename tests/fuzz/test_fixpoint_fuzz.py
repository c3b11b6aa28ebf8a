"""The fuzzer's fixpoint mode: the oracle's iteration against closed forms, the generator's recursive groups,
and the comparison's run-count slack.

Fast except the last test (a fixed-seed sample run on the backends, marked ``fuzz``).
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np
import pytest

from fuse_mlir.targets import checked_build
from fuse_mlir.testing.fuzz import driver, oracle, reproducer, run_programs
from fuse_mlir.testing.fuzz.generate import Generator
from fuse_mlir.testing.fuzz.program import (
    Bin,
    Call,
    Eq,
    FuzzProgram,
    IName,
    InputSpec,
    IOff,
    Lit,
    Ref,
    Un,
    nodes,
)

i, j, k = IName("i"), IName("j"), IName("k")


def closure_by_search(edges: np.ndarray) -> np.ndarray:
    """reach[x, z] = 1 when z is reachable from x by one edge or more (breadth-first search)."""
    n = len(edges)
    out = np.zeros((n, n), dtype=np.int8)
    for x in range(n):
        queue = deque(np.flatnonzero(edges[x]))
        while queue:
            z = queue.popleft()
            if not out[x, z]:
                out[x, z] = 1
                queue.extend(np.flatnonzero(edges[z]))
    return out


def fixpoint_program(eqs: list[Eq], inputs: dict[str, InputSpec], n: int, **kw: object) -> FuzzProgram:
    names = sorted({e.lhs for e in eqs})
    return FuzzProgram(eqs=eqs, inputs=inputs, exports=names, extents={"i": n, "j": n, "k": n}, mode="fixpoint", **kw)


@pytest.mark.parametrize("seed", range(4))
def test_oracle_transitive_closure_is_breadth_first_search(seed: int) -> None:
    n = 6
    edges = (np.random.default_rng(seed).random((n, n)) < 0.25).astype(np.int8)
    rule = Bin("+", Ref("E", (i, j)), Bin("*", Ref("R", (i, k)), Ref("E", (k, j)), True))
    p = fixpoint_program([Eq("R", (i, j), "=", rule, True)], {"E": InputSpec((n, n), "int8", "bool")}, n)
    inexact: set[str] = set()
    out = oracle.evaluate(p, {"E": edges}, inexact=inexact)
    np.testing.assert_array_equal(out["R"], closure_by_search(edges))
    assert out["R"].dtype == np.int8
    assert out["R#converged"] == 1 and 1 <= out["R#iterations"] <= n + 1
    assert inexact == set()  # a boolean group settles exactly: its run count has no slack


def test_oracle_mutual_recursion_odd_and_even_paths() -> None:
    n = 5
    edges = np.zeros((n, n), dtype=np.int8)
    for a in range(n - 1):
        edges[a, a + 1] = 1  # a chain: the path from a to b has length b - a
    odd = Bin("+", Ref("E", (i, j)), Bin("*", Ref("V", (i, k)), Ref("E", (k, j)), True))
    even = Bin("*", Ref("O", (i, k)), Ref("E", (k, j)), True)
    p = fixpoint_program(
        [Eq("O", (i, j), "=", odd, True), Eq("V", (i, j), "=", even, True)], {"E": InputSpec((n, n), "int8")}, n
    )
    out = oracle.evaluate(p, {"E": edges})
    gap = np.subtract.outer(np.arange(n), np.arange(n)) * -1
    np.testing.assert_array_equal(out["O"], ((gap > 0) & (gap % 2 == 1)).astype(np.int8))
    np.testing.assert_array_equal(out["V"], ((gap > 0) & (gap % 2 == 0)).astype(np.int8))
    assert set(out) == {"O", "V", "O+V#iterations", "O+V#converged"}


def test_oracle_shifted_recursion_is_a_prefix_sum_settled_exactly() -> None:
    n = 4
    x = np.array([0.5, -1.25, 2.0, 0.125], dtype=np.float32)
    rule = Bin("+", Ref("X", (i,)), Ref("S", (IOff("i", -1),)))
    p = fixpoint_program([Eq("S", (i,), "=", rule)], {"X": InputSpec((n,), "float32")}, n)
    out = oracle.evaluate(p, {"X": x})
    np.testing.assert_array_equal(out["S"], np.cumsum(x))
    assert out["S"].dtype == np.float32  # the carried dtype is what the group reads outside itself
    assert int(out["S#iterations"]) == n + 1  # n runs to carry the sum across, one more that changes nothing


def test_oracle_contraction_converges_to_its_fixed_point_within_the_tolerance() -> None:
    b = np.array([1.0, -2.0, 0.5])
    rule = Bin("+", Ref("B", (i,)), Bin("*", Lit(0.5), Ref("R", (i,)), True))
    p = fixpoint_program([Eq("R", (i,), "=", rule)], {"B": InputSpec((3,), "float64")}, 3, max_iters=64)
    inexact: set[str] = set()
    out = oracle.evaluate(p, {"B": b}, inexact=inexact)
    # run r holds b (2 - 2^(1-r)); it stops at the first run whose change 2^(1-r)|b| is within 1e-6 + 1e-5 |new|
    runs = int(out["R#iterations"])
    np.testing.assert_allclose(out["R"], b * (2 - 2.0 ** (1 - runs)))
    change = 2.0 ** (1 - runs) * np.abs(b)
    assert np.all(change <= 1e-6 + 1e-5 * np.abs(out["R"]))
    assert np.any(2 * change > 1e-6 + 1e-5 * np.abs(b * (2 - 2.0 ** (2 - runs))))  # and not a run earlier
    assert out["R#converged"] == 1 and inexact == {"R"}
    o = oracle.Oracle(p, {"B": b})
    o.run()
    changes = o.changes["R"]  # each run's largest change over the tolerance: the last at most 1, the others above
    assert len(changes) == runs and changes[-1] <= 1 < min(changes[:-1])


def test_oracle_reaching_max_iters_keeps_the_last_run() -> None:
    b = np.array([1.0, 3.0])
    rule = Bin("+", Ref("B", (i,)), Un("-", Bin("*", Lit(0.5), Call("tanh", (Ref("R", (i,)),)), True)))
    p = fixpoint_program([Eq("R", (i,), "=", rule)], {"B": InputSpec((2,), "float64")}, 2, max_iters=3)
    out = oracle.evaluate(p, {"B": b})
    r = np.zeros(2)
    for _ in range(3):
        r = b - 0.5 * np.tanh(r)
    np.testing.assert_allclose(out["R"], r, rtol=1e-15)
    assert out["R#converged"] == 0 and out["R#iterations"] == 3


def test_oracle_recursion_outside_fixpoint_mode_is_rejected() -> None:
    rule = Bin("+", Ref("B", (i,)), Ref("R", (i,)))
    p = FuzzProgram(eqs=[Eq("R", (i,), "=", rule)], inputs={"B": InputSpec((2,), "float64")}, extents={"i": 2})
    with pytest.raises(oracle.Reject, match="outside fixpoint mode"):
        oracle.evaluate(p, {"B": np.ones(2)})


def _shapes(p: FuzzProgram) -> set[str]:
    """The recursive shapes in ``p``: a boolean closure, a shifted self-reference, a scaled self-reference."""
    out = set()
    for e in p.eqs:
        selfrefs = [n for n in nodes(e.rhs) if isinstance(n, Ref) and n.name.startswith(e.lhs)]
        if not selfrefs:
            continue
        if e.boolean:
            out.add("closure")
        if any(isinstance(x, IOff) for r in selfrefs for x in r.idx):
            out.add("shifted")
        if any(isinstance(n, Lit) and 0 < n.value <= 0.5 for n in nodes(e.rhs)):
            out.add("scaled")
    return out


def test_generator_draws_every_recursive_shape_and_setting() -> None:
    kinds: Counter[str] = Counter()
    settings: Counter[object] = Counter()
    for seed in range(80):
        p = Generator(seed, max_groups=2, fixpoint=1.0).program()
        assert p.mode == "fixpoint"
        o = oracle.Oracle(p, p.arrays())
        with np.errstate(all="ignore"):
            o.run()
        assert o.runs, reproducer(p)  # a recursive group is there
        for label, (runs, converged) in o.runs.items():
            if label in o.inexact and p.max_iters > 3:
                assert converged and runs <= p.max_iters - 2, reproducer(p)
            if label in o.inexact:  # no run's convergence test is left to rounding
                assert not any(0.8 <= c <= 1.25 for c in o.changes[label]), reproducer(p)
        shapes = _shapes(p)
        assert shapes, reproducer(p)
        kinds.update(shapes)
        settings[("semi_naive", p.semi_naive)] += 1
        settings["small max_iters" if p.max_iters <= 3 else "max_iters 64"] += 1
        settings["float" if o.inexact else "exact"] += 1
    assert kinds["closure"] and kinds["shifted"] and kinds["scaled"], kinds
    assert all(settings[s] for s in [("semi_naive", True), ("semi_naive", False), "small max_iters", "float", "exact"])


def test_fixpoint_share_leaves_other_seeds_programs_alone() -> None:
    """The recursive group is drawn after the program's other groups, from the same stream."""
    modes = Counter()
    for seed in range(40):
        plain = Generator(seed, max_groups=2).program()
        mixed = Generator(seed, max_groups=2, fixpoint=0.5).program()
        assert plain.mode == "single"
        modes[mixed.mode] += 1
        if mixed.mode == "single":
            assert mixed.source() == plain.source()
        else:
            assert mixed.eqs[: len(plain.eqs)] == plain.eqs
    assert modes["single"] and modes["fixpoint"]


def test_compare_gives_float_fixpoints_one_run_of_slack() -> None:
    want = {"R": np.array([1.0, 2.0]), "R#iterations": np.array(20), "R#converged": np.array(1, np.int8)}
    near = {**want, "R": np.array([1.00001, 2.0]), "R#iterations": np.array(21)}
    assert driver.compare(want, near, slack={"R"}) is None  # one run later, within the convergence test
    # an exact group's count must match
    assert "R#iterations" in (driver.compare(want, {**want, "R#iterations": np.array(21)}) or "")
    two_off = {**want, "R#iterations": np.array(22)}
    assert "R#iterations" in (driver.compare(want, two_off, slack={"R"}) or "")
    assert "R: value" in (driver.compare(want, {**want, "R": np.array([1.00001, 2.0])}, slack={"R"}) or "")
    far = {**near, "R": np.array([1.001, 2.0])}
    assert "R: value" in (driver.compare(want, far, slack={"R"}) or "")
    flag = {**near, "R#converged": np.array(0, np.int8)}
    assert "R#converged" in (driver.compare(want, flag, slack={"R"}) or "")


def test_fixpoint_programs_run_on_the_configurations_that_have_the_mode() -> None:
    options = {"mode": "fixpoint", "max_iters": 8, "semi_naive": True}
    assert [c for c in driver.CONFIGS if driver.supports(c, options)] == [
        "reference",
        "llvm-O0",
        "llvm-O2",
        "llvm-threads",
    ]
    assert all(driver.supports(c, {}) for c in driver.CONFIGS)


def test_the_driver_sees_a_wrong_run_limit() -> None:
    """A backend that stops early is caught by the run count and the converged flag, not only by values."""
    x = np.array([0.5, -1.25, 2.0, 0.125])
    rule = Bin("+", Ref("X", (i,)), Ref("S", (IOff("i", -1),)))
    p = fixpoint_program([Eq("S", (i,), "=", rule)], {"X": InputSpec((4,), "float64")}, 4)
    want = oracle.evaluate(p, {"X": x})
    right = driver.run_one(p.source(), {"X": x}, "reference", p.compile_options())
    assert driver.classify(want, right, "reference").kind == "agree"
    early = driver.run_one(p.source(), {"X": x}, "reference", {**p.compile_options(), "max_iters": 4})
    out = driver.classify(want, early, "reference", slack={"S"})
    assert out.kind == "disagree" and "S#converged" in out.detail


@pytest.mark.fuzz
@pytest.mark.slow
def test_fixpoint_programs_agree_with_the_oracle() -> None:
    # The plain pass runs seeds 0-29 and the checked pass (--check-bounds) seeds 30-49, all in fixpoint mode
    n, seed = (20, 30) if checked_build() else (30, 0)
    rep = run_programs(n, ["reference", "llvm-O2"], seed=seed, max_minimise=3, max_groups=2, fixpoint=1.0)
    assert rep.programs >= n * 0.9
    assert not rep.failures, rep.table(["reference", "llvm-O2"]) + "\n" + rep.explain()
