"""Demand queries: ``runner.query(name, {axis: int | slice})`` equals full evaluation, computes less, and caches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuse_mlir.diagnostics import FuseRuntimeError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.ir import print_module
from fuse_mlir.modes.demand import build_query
from fuse_mlir.program import Program
from tests.heap import collecting_only_new_objects
from tests.strategies import GenProgram, programs

BACKENDS = ["reference", "llvm"]

MLP = """
H[i] = relu(W[i,j] X[j] + B[i])
Y[k] = V[k,i] H[i]
P[k.] = softmax(Y[k])
Z[i] = H[i] + X[i]
G[a,b] = W[a,j] W[b,j]
export Y, Z, P, G
"""


def mlp_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "W": rng.normal(size=(4, 4)),
        "X": rng.normal(size=4),
        "B": rng.normal(size=4),
        "V": rng.normal(size=(3, 4)),
    }


def expected(full: np.ndarray, names: list[str], select: dict) -> np.ndarray:
    index = []
    for k, n in enumerate(names):
        index.append(select.get(n, select.get(k, select.get(k - len(names), slice(None)))))
    return full[tuple(index)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("name", "names", "select"),
    [
        ("Y", ["k"], {}),
        ("Y", ["k"], {"k": 2}),
        ("Y", ["k"], {"k": -1}),
        ("Z", ["i"], {0: slice(1, None, 2)}),
        ("Z", ["i"], {"i": slice(None, None, -1)}),
        ("P", ["k"], {"k": 1}),
        ("G", ["a", "b"], {"a": 1, "b": slice(0, 3)}),
        ("G", ["a", "b"], {"b": 3, "a": 0}),
        ("G", ["a", "b"], {-1: 2}),
        ("H", ["i"], {"i": 0}),
        ("X", ["j"], {"j": 1}),
    ],
)
def test_query_equals_full_evaluation(backend, name, names, select):
    p = Program(MLP)
    run = p.compile(backend)
    ins = mlp_inputs()
    want = Program(MLP + f"\nexport {name}").compile("reference")(**ins)[name]
    got = run.query(name, select, **ins)
    np.testing.assert_allclose(got, expected(want, names, select), rtol=1e-12, atol=1e-12)


def test_selection_is_pushed_into_the_producers():
    """Z[i] at one i reads row i of W and position i of X and B: the selection goes through the maps and contraction."""
    p = Program(MLP)
    q = build_query(p.lower(), "Z", [(0, True)])
    text = print_module(q.lowered.module)
    # Every input is read through the 0-d position gather; no full-size contraction remains.
    accesses = [op for op in q.lowered.module.body.block.ops if isinstance(op, te.AccessOp)]
    assert {op.source.owner.tensor_name.data for op in accesses} == {"W", "X", "B"}
    contract = next(op for op in q.lowered.module.body.block.ops if isinstance(op, te.ContractOp))
    assert te.names_of(contract.indices) == ()
    assert "V" not in text  # pruned: Z does not depend on V
    # A softmax along the selected axis stops the push: P's selection gathers P's result.
    q = build_query(p.lower(), "P", [(0, True)])
    axis_fn = next(op for op in q.lowered.module.body.block.ops if isinstance(op, te.AxisOp))
    assert te.names_of(axis_fn.indices) == ("k",)


def test_query_needs_only_the_inputs_the_tensor_depends_on():
    run = Program(MLP).compile("reference")
    ins = mlp_inputs()
    got = run.query("H", {"i": 1}, W=ins["W"], X=ins["X"], B=ins["B"])
    assert got.shape == ()
    with pytest.raises(FuseRuntimeError, match="needs input B"):
        run.query("H", {}, W=ins["W"], X=ins["X"])
    with pytest.raises(FuseRuntimeError, match="unknown input Q"):
        run.query("H", {}, Q=1.0)


@pytest.mark.parametrize(
    ("select", "match"),
    [
        ({"q": 0}, "no axis 'q'"),
        ({3: 0}, "no axis 3"),
        ({"k": 3}, "out of range"),
        ({"k": -4}, "out of range"),
        ({"k": 1.5}, "int or a slice"),
        ({"k": slice(None, None, 0)}, "step cannot be zero"),
        ({"k": 0, 0: 1}, "selected twice"),
    ],
)
def test_bad_selections(select, match):
    run = Program(MLP).compile("reference")
    with pytest.raises(FuseRuntimeError, match=match):
        run.query("Y", select, **mlp_inputs())


@pytest.mark.parametrize("backend", ["reference", "llvm", "torch", "jax", "numba"])
def test_every_backend_answers_every_kind_of_selection(backend):
    """Slices with negative steps included: their positions were a negative-stride view, which torch refused."""
    if backend in ("torch", "jax", "numba"):
        pytest.importorskip(backend)
    run = Program(MLP).compile(backend)
    ins = mlp_inputs()
    full = run(**ins)
    for select in ({"k": slice(None, None, -1)}, {0: slice(-1, 0, -2)}, {"k": -1}, {"k": slice(5, None)}, {}):
        np.testing.assert_allclose(run.query("Y", select, **ins), expected(full["Y"], ["k"], select), rtol=1e-12)
    np.testing.assert_allclose(run.query("G", {"b": slice(None, None, -1), "a": 2}, **ins), full["G"][2, ::-1])


CLOSURE = """
R(i,j) = E(i,j)
R(i,j) = R(i,k) E(k,j)
Y[i] = X[i,j] R(i,j)
S[i] = B[i] + 0.25 W[i,j] tanh(S[j])
export R, Y, S
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("semi_naive", [True, False])
@pytest.mark.parametrize(
    ("name", "select"),
    [
        ("R", {}),
        ("R", {0: 1}),
        ("R", {"j": -1, "i": 2}),
        ("R", {"i": slice(None, None, -2)}),
        ("Y", {"i": slice(1, None)}),
        ("S", {"i": 3}),  # W is read only inside the loop's body: the pruned query keeps it
        ("S", {}),
    ],
)
def test_queries_in_fixpoint_mode(backend, semi_naive, name, select):
    """A fixpoint runner's queries lower in fixpoint mode (they named the cycle as an error before) and find a
    recursive tensor, carried by the loop rather than defined by a top-level group; the selection is gathered
    from the loop's result, never pushed into its body."""
    rng = np.random.default_rng(3)
    ins = {
        "E": (rng.random((6, 6)) > 0.75).astype(np.int8),
        "X": rng.normal(size=(6, 6)),
        "B": rng.normal(size=6),
        "W": rng.normal(size=(6, 6)),
    }
    run = Program(CLOSURE).compile(backend, mode="fixpoint", semi_naive=semi_naive)
    full = run(**ins)
    got = run.query(name, select, **ins)
    want = expected(full[name], ["i", "j"][: full[name].ndim], select)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_queries_use_the_runners_temperature_schedule(backend):
    """Queries lower with the runner's options, so a tensor's scheduled T applies to them as to full runs."""
    src = "X[i] = 0.5 X[i] + 0.5 sig(B[i])\nY[i] = sig(B[i])\nexport X, Y"
    run = Program(src).compile(backend, mode="fixpoint", temperature={"X": ("linear", 2.0, 0.0, 8), "Y": 0.5})
    b = np.array([-1.0, 0.5, 2.0])
    full = run(B=b)
    np.testing.assert_allclose(full["Y"], 1 / (1 + np.exp(-b / 0.5)))
    for name in ("X", "Y"):
        np.testing.assert_allclose(run.query(name, {"i": slice(None, None, -1)}, B=b), full[name][::-1], rtol=1e-12)
    # Single mode too: the query gave the hard step (T missing), silently, before.
    single = Program("Y[i] = sig(B[i])\nexport Y").compile(backend, temperature={"Y": 0.5})
    np.testing.assert_allclose(single.query("Y", {"i": 1}, B=b), 1 / (1 + np.exp(-b[1] / 0.5)), rtol=1e-12)


def test_unknown_tensor():
    with pytest.raises(FuseRuntimeError, match="no tensor of that name"):
        Program(MLP).compile("reference").query("Nope", {}, **mlp_inputs())


@pytest.mark.parametrize("backend", BACKENDS)
def test_cache_hits_until_an_input_changes(backend):
    run = Program(MLP).compile(backend)
    ins = mlp_inputs()
    first = run.query("Y", {"k": 1}, **ins)
    again = run.query("Y", {"k": 1}, **ins)
    cache = run._demand
    assert (cache.hits, cache.misses) == (1, 1)
    np.testing.assert_array_equal(first, again)
    again[...] = 99.0  # results are copies: the cache is not writable from outside
    np.testing.assert_array_equal(run.query("Y", {"k": 1}, **ins), first)
    assert cache.hits == 2
    # In-place mutation of an input the query reads is noticed.
    ins["V"][1, 0] += 1.0
    changed = run.query("Y", {"k": 1}, **ins)
    assert cache.misses == 2
    np.testing.assert_allclose(changed, first + run.query("H", {"i": 0}, **ins))
    # A new array object invalidates even with equal contents.
    ins["V"] = ins["V"].copy()
    run.query("Y", {"k": 1}, **ins)
    assert cache.misses == 4  # (the H query above was a miss too)
    # Inputs the query does not read do not matter.
    ins["B"] = ins["B"].copy()
    run.query("G", {"a": 0}, **ins)
    run.query("G", {"a": 0}, W=ins["W"])
    assert cache.hits == 3


def test_large_inputs_are_checked_by_sampling_and_the_cache_can_be_cleared():
    run = Program("Y[i] = X[i] + 1.0").compile("reference")
    x = np.zeros(10_000)
    np.testing.assert_array_equal(run.query("Y", {"i": 0}, X=x), 1.0)
    x[0] = 5.0  # a sampled element: noticed
    np.testing.assert_array_equal(run.query("Y", {"i": 0}, X=x), 6.0)
    x[1] = 7.0  # between samples of a large array: the documented blind spot
    np.testing.assert_array_equal(run.query("Y", {"i": 1}, X=x), 8.0)  # (a different selection: computed now)
    x[1] = 9.0
    np.testing.assert_array_equal(run.query("Y", {"i": 1}, X=x), 8.0)
    run.clear_query_cache()
    np.testing.assert_array_equal(run.query("Y", {"i": 1}, X=x), 10.0)


def test_llvm_compiles_once_per_selection_shape():
    run = Program(MLP).compile("llvm")
    ins = mlp_inputs()
    for k in range(3):
        run.query("Y", {"k": k}, **ins)
    for s in (slice(0, 2), slice(None, None, -1)):
        run.query("Y", {"k": s}, **ins)
    assert sum(len(p) for p in run._demand.programs.values()) == 2  # int and slice selections of Y's axis k
    assert len(run.executor.compiled) == 2


def _check_random_query(prog: GenProgram, seed: int, data: st.DataObject, backend: str) -> None:
    arrays = prog.arrays(seed)
    name = prog.equations[-1].lhs
    names = list(prog.equations[-1].lhs_indices)
    want = Program(prog.source()).compile("reference")(**arrays)[name]
    select: dict = {}
    for k, n in enumerate(names):
        extent = want.shape[k]
        choice = data.draw(st.sampled_from(["none", "int", "slice"]))
        if choice == "int" and extent:
            select[n] = data.draw(st.integers(-extent, extent - 1))
        elif choice == "slice":
            bound = st.none() | st.integers(-extent - 1, extent + 1)
            select[n] = slice(data.draw(bound), data.draw(bound), data.draw(st.sampled_from([None, 1, 2, -1])))
    got = Program(prog.source()).compile(backend).query(name, select, **arrays)
    np.testing.assert_allclose(got, expected(want, names, select), rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16), data=st.data())
def test_random_programs_reference(prog: GenProgram, seed: int, data: st.DataObject):
    _check_random_query(prog, seed, data, "reference")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16), data=st.data())
def test_random_programs_llvm(prog: GenProgram, seed: int, data: st.DataObject):
    _check_random_query(prog, seed, data, "llvm")


EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.fuse"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_every_export_by_query(path):
    """Each example's exports, queried whole and at selections of their first two axes, equal the full run."""
    program = Program.from_file(path)
    backend = "reference"  # (llvm compiles one program per query shape; the tests above cover it)
    run = program.compile(backend)
    full = run.run({}, write_sinks=False)
    for name, value in full.items():
        selections: list[dict] = [{}]
        if value.ndim >= 1 and value.shape[0] > 0:
            selections += [{0: value.shape[0] - 1}, {0: slice(None, None, -2)}]
        if value.ndim >= 2 and value.shape[1] > 1:
            selections.append({1: 1, 0: slice(1, None)})
        for select in selections:
            index = tuple(select.get(k, slice(None)) for k in range(value.ndim))
            np.testing.assert_allclose(run.query(name, select), value[index], rtol=1e-9, atol=1e-9)


def test_relowered_programs_never_reuse_a_freed_lowerings_query(tmp_path: Path) -> None:
    """Query programs and results are kept per lowering weakly, never by id(): after replace_sources each query's
    lowering is new, and a freed lowering's id (reused by CPython) must not find its query program (with the
    old sources bound) or its cached result."""
    import gc

    np.save(tmp_path / "w.npy", np.zeros(3))
    prog = Program('W[i] = "w.npy"\nY[i] = W[i] * X[i] + 1.0\nexport Y\n', str(tmp_path / "p.fuse"), tmp_path)
    run = prog.compile("reference")
    x = np.ones(3)
    with collecting_only_new_objects():
        for step in range(40):
            w = np.arange(3.0) + step
            prog.replace_sources({"W": w})
            np.testing.assert_array_equal(run.query("Y", {"i": 1}, X=x), w[1] + 1.0)
            np.testing.assert_array_equal(run.query("Y", X=x), w + 1.0)
            gc.collect()
            assert len(run._demand.programs) <= 2 and len(run._demand.results) <= 2  # freed lowerings take theirs


def test_a_query_of_a_long_sum():
    # A 2,000-term sum is a chain of 2,000 ops: the query's passes walk it recursively, as the lowering does, so
    # they run with the parser's recursion room (a RecursionError before, found by the text-mutant fuzzer).
    src = "Y[i] = " + " + ".join(["X[i]"] * 2000) + "\nexport Y\n"
    runner = Program(src).compile("reference")
    x = np.arange(3.0)
    np.testing.assert_allclose(runner.query("Y", {0: -1}, X=x), 2000 * x[-1])


def test_inputs_may_be_called_name_select_or_self():
    # query(name, select, /, **inputs) and __call__(self, /, **inputs): an input whose name is a parameter's
    # still reaches the program (a TypeError "multiple values for argument 'select'" before; a text mutant found it)
    runner = Program("Y[i] = name[i] + select[i] + self[i]\nexport Y\n").compile("reference")
    x = np.arange(3.0)
    np.testing.assert_array_equal(runner(name=x, select=x, self=x)["Y"], 3 * x)
    np.testing.assert_array_equal(runner.query("Y", {0: -1}, name=x, select=x, self=x), 6.0)
