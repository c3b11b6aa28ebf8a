"""The fuzzer's streaming mode: the oracle's steps against NumPy, the generator's streamed recurrences, and the
driver's step-by-step runs.

Fast except the last test (a fixed-seed sample run on the backends, marked ``fuzz``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fuse_mlir.targets import checked_build
from fuse_mlir.testing.fuzz import driver, oracle, reproducer, run_programs
from fuse_mlir.testing.fuzz.generate import Generator
from fuse_mlir.testing.fuzz.program import Bin, Eq, FuzzProgram, IName, InputSpec, ITime, Lit, Ref, nodes

i, j = IName("i"), IName("j")


def stream_program(eqs: list[Eq], inputs: dict[str, InputSpec], steps: int) -> FuzzProgram:
    return FuzzProgram(
        eqs=eqs,
        inputs=inputs,
        exports=list(dict.fromkeys(e.lhs for e in eqs)),
        extents={"i": 3, "j": 3},
        mode="streaming",
        steps=steps,
    )


def test_oracle_steps_a_recurrence_like_numpy() -> None:
    """S[i,*t+1] = W[i,j] S[j,*t] + U[i,*t+1] - 0.5 U[i,*t] and Y[*t+1] = S[i,*t+1] (a sum), in float32."""
    rng = np.random.default_rng(0)
    w = (rng.integers(-4, 5, (3, 3)) / 8).astype(np.float32)
    u = (rng.integers(-8, 9, (3, 4)) / 8).astype(np.float32)  # four steps along the last axis
    rule = Bin(
        "-",
        Bin("+", Bin("*", Ref("W", (i, j)), Ref("S", (j, ITime(0))), True), Ref("U", (i, ITime(1)))),
        Bin("*", Lit(0.5), Ref("U", (i, ITime(0))), True),
    )
    p = stream_program(
        [Eq("S", (i, ITime(1)), "=", rule), Eq("Y", (ITime(1),), "=", Ref("S", (i, ITime(1))))],
        {"W": InputSpec((3, 3), "float32"), "U": InputSpec((3, 4), "float32")},
        4,
    )
    assert p.source().splitlines()[0] == "S[i, *t+1] = W[i, j] S[j, *t] + U[i, *t+1] - 0.5 U[i, *t]"
    assert p.stream_inputs() == ("U",)
    out = oracle.evaluate(p, {"W": w, "U": u})
    assert set(out) == {f"{n}@{s}" for n in "SY" for s in range(1, 5)}
    s_prev, u_prev = np.zeros(3, np.float32), np.zeros(3, np.float32)
    for t in range(4):
        s_now = w @ s_prev + u[:, t] - np.float32(0.5) * u_prev
        assert out[f"S@{t + 1}"].dtype == np.float32
        np.testing.assert_allclose(out[f"S@{t + 1}"], s_now, rtol=1e-6)
        np.testing.assert_allclose(out[f"Y@{t + 1}"], s_now.sum(), rtol=1e-6)
        s_prev, u_prev = s_now, u[:, t]


def test_oracle_reads_two_steps_back_and_keeps_an_integer_counter() -> None:
    u = np.arange(12, dtype=np.int32).reshape(3, 4)
    rule = Bin("+", Ref("U", (i, ITime(1))), Ref("S", (i, ITime(-1))))
    p = stream_program([Eq("S", (i, ITime(1)), "=", rule)], {"U": InputSpec((3, 4), "int32")}, 4)
    out = oracle.evaluate(p, {"U": u})
    hist = [np.zeros(3, np.int32)] * 2
    for t in range(4):
        hist.append(u[:, t] + hist[-2])
        assert out[f"S@{t + 1}"].dtype == np.int32
        np.testing.assert_array_equal(out[f"S@{t + 1}"], hist[-1])


def test_generator_draws_streamed_programs() -> None:
    seen: Counter[str] = Counter()
    for seed in range(60):
        p = Generator(seed, max_groups=2, streaming=1.0).program()
        assert p.mode == "streaming" and 2 <= p.steps <= 4
        assert p.stream_inputs(), reproducer(p)
        for u in p.stream_inputs():
            assert p.data[u].shape[-1] == p.steps
        lags = {
            1 - x.offset
            for e in p.eqs
            for n in nodes(e.rhs)
            if isinstance(n, Ref)
            for x in n.idx
            if isinstance(x, ITime)
        }
        seen.update(f"lag {d}" for d in lags)
        seen["reader"] += sum(any(isinstance(x, ITime) for x in e.lidx) for e in p.eqs) > 1
        out = oracle.evaluate(p, p.arrays())
        assert {k.rsplit("@", 1)[1] for k in out} == {str(s) for s in range(1, p.steps + 1)}
    assert all(seen[k] for k in ("lag 0", "lag 1", "lag 2", "reader")), seen


def test_streaming_share_leaves_other_seeds_programs_alone() -> None:
    modes: Counter[str] = Counter()
    for seed in range(40):
        plain = Generator(seed, max_groups=2).program()
        mixed = Generator(seed, max_groups=2, streaming=0.5).program()
        modes[mixed.mode] += 1
        if mixed.mode == "single":
            assert mixed.source() == plain.source()
        else:
            assert mixed.eqs[: len(plain.eqs)] == plain.eqs
    assert modes["single"] and modes["streaming"]
    # a seed drawn for fixpoint mode is not also streamed
    both = [Generator(s, max_groups=2, fixpoint=0.5, streaming=0.5).program().mode for s in range(40)]
    assert set(both) == {"single", "fixpoint", "streaming"}


def test_driver_runs_the_steps() -> None:
    u = np.array([[1.0, 2.0, 4.0]])
    p = FuzzProgram(
        eqs=[Eq("S", (i, ITime(1)), "=", Bin("+", Ref("U", (i, ITime(1))), Ref("S", (i, ITime(0)))))],
        inputs={"U": InputSpec((1, 3), "float64")},
        exports=["S"],
        extents={"i": 1},
        mode="streaming",
        steps=3,
    )
    status, got = driver.run_one(p.source(), {"U": u}, "llvm-O2", p.compile_options(), p.steps, p.stream_inputs())
    assert status == "ok"
    assert {k: v.tolist() for k, v in got.items()} == {"S@1": [1.0], "S@2": [3.0], "S@3": [7.0]}
    assert driver.classify(oracle.evaluate(p, {"U": u}), (status, got), "llvm-O2").kind == "agree"
    assert not driver.supports("torch", p.compile_options())


@pytest.mark.fuzz
@pytest.mark.slow
def test_streamed_programs_agree_with_the_oracle() -> None:
    # The plain pass runs seeds 0-29 and the checked pass (--check-bounds) seeds 30-49, all in streaming mode
    n, seed = (20, 30) if checked_build() else (30, 0)
    rep = run_programs(n, ["reference", "llvm-O2"], seed=seed, max_minimise=3, max_groups=2, streaming=1.0)
    assert rep.programs >= n * 0.9
    assert not rep.failures, rep.table(["reference", "llvm-O2"]) + "\n" + rep.explain()
