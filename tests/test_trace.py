"""The run trace (``runner.explain()``) and the shape inference behind its static estimates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir.cli import fuse
from fuse_mlir.diagnostics import FuseRuntimeError
from fuse_mlir.interp.shapes import infer_shapes
from fuse_mlir.modes.trace import GroupTrace, RunTrace, TracingInterpreter, build_trace, segments
from fuse_mlir.program import Program
from tests.strategies import GenProgram, programs

BACKENDS = ["reference", "llvm"]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

SRC = """
H[i,k] = relu(A[i,j] B[j,k])
S[i] = H[i,k]
export H, S
"""


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"A": rng.normal(size=(6, 5)), "B": rng.normal(size=(5, 4))}


@pytest.mark.parametrize("backend", BACKENDS)
def test_trace_counts_groups_flops_and_bytes(backend):
    run = Program(SRC).compile(backend)
    with pytest.raises(FuseRuntimeError, match="call the runner first"):
        run.explain()
    run(**inputs())
    trace = run.explain("json")
    assert trace["backend"] == backend and trace["mode"] == "single"
    h, s = trace["groups"]
    assert (h["name"], s["name"]) == ("H", "S")
    assert h["iterations"] == s["iterations"] == 1
    # H: a 6x5x4 contraction (2 FLOPs per point), relu on 6x4, the group; S: a 6x4 row sum.
    assert h["flops"] == 2 * 6 * 5 * 4 + 6 * 4
    assert h["kernels"] == 3
    assert s["flops"] == 6 * 4
    contract_bytes = 8 * (6 * 5 + 5 * 4 + 6 * 4)
    assert h["bytes"] == contract_bytes + 2 * 8 * 6 * 4 + 2 * 8 * 6 * 4
    assert trace["flops"] == h["flops"] + s["flops"]
    assert trace["seconds"] > 0
    text = run.explain()
    assert "H" in text and "FLOPs" in text and f"run on {backend}" in text
    json.dumps(trace)  # JSON-ready


def test_profile_times_each_group_on_the_reference_backend():
    run = Program(SRC).compile("reference", profile=True)
    run(**inputs())
    trace = run.explain("json")
    assert all(g["seconds"] is not None and g["seconds"] >= 0 for g in trace["groups"])
    assert sum(g["seconds"] for g in trace["groups"]) <= trace["seconds"]
    assert not trace["notes"]
    native = Program(SRC).compile("llvm", profile=True)
    native(**inputs())
    assert all(g["seconds"] is None for g in native.explain("json")["groups"])
    assert "not measured" in native.explain()


def test_streaming_and_monte_carlo_runs_are_traced():
    run = Program("H[i,*t+1] = relu(W[i,j] H[j,*t])\nexport H").compile("reference", mode="streaming")
    run.reset(H=np.ones(3))
    run(W=np.eye(3))
    assert run.explain("json")["mode"] == "streaming"
    mc = Program("S[i] = A[i,j]").compile("reference", projection="monte_carlo", samples=2, seed=0)
    mc(A=np.ones((2, 10)))
    group = mc.explain("json")["groups"][0]
    assert group["flops"] == 2 * 2 + 2  # two samples per row, not ten; then the scaling by the count
    assert group["extra"] == {"samples": 2}


def test_a_group_can_carry_iterations_and_extras():
    trace = RunTrace("reference", "fixpoint", 0.5, [GroupTrace("Anc", iterations=7, extra={"T": 0.5})])
    assert "Anc" in trace.text() and " 7 " in trace.text() and "T=0.5" in trace.text()
    assert trace.to_json()["groups"][0]["iterations"] == 7
    assert trace.group("Anc").iterations == 7
    assert json.loads(trace.render("json-text"))["mode"] == "fixpoint"
    with pytest.raises(ValueError):
        trace.render("xml")


def test_iterating_modes_can_annotate_the_trace():
    """What a mode that iterates groups (fixpoint) passes: iterations and extras per group, notes."""
    module = Program(SRC).lower().module
    shapes = infer_shapes(module, {"A": (6, 5), "B": (5, 4)}, {})
    trace = build_trace(
        module,
        shapes,
        backend="llvm",
        mode="fixpoint",
        seconds=0.1,
        iterations={"H": 4},
        group_extra={"H": {"converged": True}},
        notes=["fixpoint H: 4 iterations, converged"],
    )
    assert trace.group("H").iterations == 4 and trace.group("S").iterations == 1
    assert trace.group("H").extra == {"converged": True}
    assert trace.notes[0] == "fixpoint H: 4 iterations, converged"
    assert trace.group("H").flops == 4 * (2 * 6 * 5 * 4 + 6 * 4)  # every iteration counts


def test_segments_cover_every_compute_op_once():
    module = Program((EXAMPLES / "mlp.fuse").read_text(), str(EXAMPLES / "mlp.fuse")).lower().module
    seen = [op for _, ops in segments(module) for op in ops]
    assert len(seen) == len(set(seen))


def _check_shapes(program: Program, arrays: dict[str, np.ndarray]) -> None:
    lowered = program.lower({k: v.dtype for k, v in arrays.items()})
    interp = TracingInterpreter(lowered.module, arrays, lowered.sources)
    interp.run()
    inferred = infer_shapes(lowered.module, {k: v.shape for k, v in arrays.items()}, lowered.sources)
    for value, shape in interp.shapes().items():
        assert inferred[value] == shape, value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_inferred_shapes_match_the_interpreter(prog: GenProgram, seed: int):
    _check_shapes(Program(prog.source()), prog.arrays(seed))


@pytest.mark.parametrize("name", ["mlp", "attention", "conv1d", "embedding", "rnn", "gnn", "layernorm", "hmm"])
def test_inferred_shapes_match_on_examples(name):
    path = EXAMPLES / f"{name}.fuse"
    program = Program.from_file(path)
    if program.lower().inputs:
        pytest.skip("example takes inputs")
    _check_shapes(program, {})


def test_fuse_run_explain_prints_the_trace_to_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.fuse").write_text(SRC)
    for name, value in inputs().items():
        np.save(tmp_path / f"{name}.npy", value)
    rc = fuse.main(["run", "p.fuse", "-i", "A=A.npy", "-i", "B=B.npy", "--backend", "reference", "--json", "--explain"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert set(json.loads(out)) == {"H", "S"}
    assert "run on reference" in err and "FLOPs" in err


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(60, 10, 60, 2), (2, 60, 10, 60)])
def test_nway_contraction_flops_follow_the_pairwise_order(shape, backend):
    """A matrix chain costs its pairwise steps (2 FLOPs per point of each), in the cheapest order for the extents,
    not its whole i*j*k*l iteration space (which no backend walks)."""
    i, j, k, n = shape
    run = Program("M[i,l] = A[i,j] B[j,k] C[k,l]\nexport M\n").compile(backend)
    run(A=np.ones((i, j)), B=np.ones((j, k)), C=np.ones((k, n)))
    left = 2 * i * j * k + 2 * i * k * n  # (A B) C
    right = 2 * j * k * n + 2 * i * j * n  # A (B C)
    assert run.explain("json")["groups"][0]["flops"] == min(left, right) < 3 * i * j * k * n


def test_nway_contraction_flops_count_the_presum_of_private_indices():
    """An index on one factor only is summed within it first (one add per element), then the pairwise steps."""
    run = Program("M[i] = A[i,j,p] B[j,k] C[k]\nexport M\n").compile("reference")
    run(A=np.ones((4, 3, 5)), B=np.ones((3, 6)), C=np.ones(6))
    presum = 4 * 3 * 5
    steps = min(2 * 4 * 3 * 6 + 2 * 4 * 6, 2 * 3 * 6 + 2 * 4 * 3)  # (A B) C or A (B C)
    assert run.explain("json")["groups"][0]["flops"] == presum + steps
