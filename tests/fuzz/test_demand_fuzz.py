"""The fuzzer's demand mode: queries drawn for generated programs, their oracle values, the driver asking them
of a runner, and the minimiser dropping the ones a failure does not need.

Fast except the last test (a fixed-seed sample run on the backends, marked ``fuzz``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fuse_mlir.targets import checked_build
from fuse_mlir.testing.fuzz import _run_args, driver, oracle, reproducer, run_programs
from fuse_mlir.testing.fuzz.generate import Generator
from fuse_mlir.testing.fuzz.minimise import minimise
from fuse_mlir.testing.fuzz.program import Bin, Call, Eq, FuzzProgram, IName, InputSpec, INum, Lit, Query, Ref

i, j = IName("i"), IName("j")


def matrix_program(queries: list[Query], mode: str = "single") -> FuzzProgram:
    """Y[i, j] = 2 X[i, j] + 1 and Z[i] = relu(X[i, j]) (a sum over j), on a 3x4 float64 X."""
    rhs = Bin("+", Bin("*", Lit(2), Ref("X", (i, j)), True), Lit(1))
    p = FuzzProgram(
        eqs=[Eq("Y", (i, j), "=", rhs), Eq("Z", (i,), "=", Call("relu", (Ref("X", (i, j)),)))],
        inputs={"X": InputSpec((3, 4), "float64")},
        exports=["Y", "Z"],
        extents={"i": 3, "j": 4},
        queries=queries,
        mode=mode,
    )
    p.data = {"X": (np.arange(12, dtype=np.float64).reshape(3, 4) - 5) / 8}
    return p


SELECTIONS = [
    Query("Y"),
    Query("Y", (("i", 1),)),
    Query("Y", (("j", -1), (0, (None, None, -1)))),
    Query("Y", ((-1, (-6, 9, 2)), ("i", (2, None, None)))),
    Query("Z", ((0, (5, None, None)),)),  # an empty slice
    Query("X", ((1, 3), (-2, -1))),  # an input, by position only
]


def test_query_labels_and_numpy_indices() -> None:
    q = Query("Y", (("j", -1), (0, (None, None, -1))))
    assert q.selection() == {"j": -1, 0: slice(None, None, -1)}
    assert q.label() == "Y?{'j': -1, 0: slice(None, None, -1)}"
    assert q.index(("i", "j")) == (slice(None, None, -1), -1)
    assert q.text() == "runner.query('Y', {'j': -1, 0: slice(None, None, -1)})"
    with pytest.raises(IndexError):
        Query("Y", (("k", 0),)).index(("i", "j"))
    with pytest.raises(IndexError):
        Query("Y", ((2, 0),)).index(("i", "j"))


def test_oracle_and_backends_answer_queries_alike() -> None:
    p = matrix_program(SELECTIONS)
    x = p.data["X"]
    want = oracle.evaluate(p, p.arrays())
    y = 2 * x + 1
    expected = [y, y[1], y[::-1, -1], y[2:, -6:9:2], np.maximum(x, 0).sum(axis=1)[5:], x[-1, 3]]
    for q, e in zip(SELECTIONS, expected):
        np.testing.assert_array_equal(want[q.label()], e)
    for config in ("reference", "llvm-O2", "llvm-threads"):
        answer = driver.run_one(p.source(), p.arrays(), config, *_run_args(p))
        assert answer[0] == "ok", answer
        assert set(answer[1]) == set(want)
        assert driver.classify(want, answer, config).kind == "agree"
    # a wrong answer to a query is a disagreement naming the query
    status, got = driver.run_one(p.source(), p.arrays(), "llvm-O2", *_run_args(p))
    got[SELECTIONS[1].label()] = got[SELECTIONS[1].label()] + 1.0
    out = driver.classify(want, (status, got), "llvm-O2")
    assert out.kind == "disagree" and out.detail.startswith("Y?{'i': 1}")


def test_queries_in_fixpoint_mode() -> None:
    """A recursive tensor and a reader of it, queried on a fixpoint runner (queries lower in its mode)."""
    step = Bin("+", Ref("X", (i, INum(0))), Bin("*", Lit(0.5), Call("tanh", (Ref("R", (i,)),)), True))
    p = FuzzProgram(
        eqs=[Eq("R", (i,), "=", step), Eq("S", (i,), "=", Bin("*", Ref("R", (i,)), Ref("R", (i,)), True))],
        inputs={"X": InputSpec((3, 4), "float64")},
        exports=["S"],
        extents={"i": 3},
        queries=[Query("R", (("i", -1),)), Query("S", ((0, (None, None, -2)),))],
        mode="fixpoint",
        max_iters=64,
    )
    p.data = {"X": (np.arange(12, dtype=np.float64).reshape(3, 4) - 5) / 8}
    want = oracle.evaluate(p, p.arrays())
    for config in ("reference", "llvm-O2"):
        answer = driver.run_one(p.source(), p.arrays(), config, *_run_args(p))
        assert driver.classify(want, answer, config, slack=["R"]).kind == "agree", answer


def test_axis_names() -> None:
    p = matrix_program([])
    assert p.axis_names("Y") == ("i", "j") and p.axis_names("X") == (None, None)
    p.eqs.append(Eq("Y", (j, i), "+=", Ref("X", (j, i))))  # the second equation writes other names at each axis
    assert p.axis_names("Y") == (None, None)
    p.eqs += [Eq("D", (i, i), "=", Ref("X", (i, i))), Eq("N", (i, INum(1)), "=", Ref("X", (i, j)))]
    assert p.axis_names("D") == (None, None)  # repeated
    assert p.axis_names("N") == ("i", None)  # a numeric position


def test_generator_draws_queries_and_leaves_programs_alone() -> None:
    seen: Counter[str] = Counter()
    for seed in range(80):
        plain = Generator(seed, max_groups=2, fixpoint=0.2).program()
        asked = Generator(seed, max_groups=2, fixpoint=0.2, demand=1.0).program()
        assert asked.source() == plain.source() and not plain.queries
        assert 1 <= len(asked.queries) <= 3, reproducer(asked)
        want = oracle.evaluate(asked, asked.arrays())
        for q in asked.queries:
            assert q.label() in want
            seen["input" if q.name in asked.inputs else asked.mode] += 1
            for axis, pick in q.select:
                seen["by name" if isinstance(axis, str) else "negative axis" if axis < 0 else "by position"] += 1
                if isinstance(pick, int):
                    seen["int"] += 1
                else:
                    seen["negative step" if (pick[2] or 1) < 0 else "slice"] += 1
            seen["whole"] += not q.select
    wanted = ("single", "fixpoint", "input", "by name", "by position", "negative axis", "int", "slice")
    assert all(seen[k] for k in (*wanted, "negative step", "whole")), seen
    # streamed programs make none (a streaming runner has no queries)
    assert not Generator(3, max_groups=2, streaming=1.0, demand=1.0).program().queries


def test_minimiser_drops_queries_a_failure_does_not_need() -> None:
    p = matrix_program(SELECTIONS)
    bad = SELECTIONS[2]
    small = minimise(p, lambda c: bad in c.queries and oracle.evaluate(c, c.arrays()) is not None)
    assert small.queries == [bad]
    assert [e.lhs for e in small.eqs] == ["Y"]


@pytest.mark.fuzz
@pytest.mark.slow
def test_demand_queries_agree_with_the_oracle() -> None:
    # The plain pass runs seeds 0-13 and the checked pass (--check-bounds) seeds 14-23; a fifth in fixpoint mode
    n, seed = (10, 14) if checked_build() else (14, 0)
    configs = ["reference", "llvm-O2"]
    rep = run_programs(n, configs, seed=seed, max_minimise=3, max_groups=2, fixpoint=0.2, demand=1.0)
    assert rep.programs >= n * 0.9
    assert not rep.failures, rep.table(configs) + "\n" + rep.explain()
