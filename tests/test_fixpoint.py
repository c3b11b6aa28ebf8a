"""Fixpoint mode: recursive groups iterate to convergence on the reference and llvm backends."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from fuse_mlir import FuseError, Program
from fuse_mlir.diagnostics import diagnostic_handler
from fuse_mlir.interp.ew_interp import run_ew_module
from fuse_mlir.interp.loop_interp import run_loop_module
from fuse_mlir.ir import make_context
from fuse_mlir.lowered import LowerOptions
from fuse_mlir.passes.conversions.lower_te_to_ew import LowerTeToEw
from fuse_mlir.passes.lowering import lower_to_loop

BACKENDS = ["reference", "llvm"]


def write_facts(path, edges, n):
    lines = [f"# shape: {n},{n}"] + [f"{a}\t{b}" for a, b in edges]
    path.write_text("\n".join(lines) + "\n")


def random_edges(rng, n, p):
    return [(a, b) for a in range(n) for b in range(n) if a != b and rng.random() < p]


def bfs_closure(n, edges):
    """closure[x, z] = 1 when z is reachable from x by one edge or more (by breadth-first search)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
    out = np.zeros((n, n), dtype=np.int8)
    for x in range(n):
        queue = deque(succ[x])
        while queue:
            z = queue.popleft()
            if out[x, z]:
                continue
            out[x, z] = 1
            queue.extend(succ[z])
    return out


ANCESTOR = """
Parent(x,y) = "parent.tsv"
Sister(x,y) = "sister.tsv"
Anc(x,z) = Parent(x,z) + Anc(x,y) Parent(y,z)
Aunt(x,z) = Sister(x,y) Anc(y,z)
export Anc, Aunt
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ancestor_and_aunt_closure_from_tsv_facts_match_bfs(tmp_path, backend, seed):
    rng = np.random.default_rng(seed)
    n = 12
    parents = random_edges(rng, n, 0.12)
    sisters = random_edges(rng, n, 0.1)
    write_facts(tmp_path / "parent.tsv", parents, n)
    write_facts(tmp_path / "sister.tsv", sisters, n)
    (tmp_path / "p.fuse").write_text(ANCESTOR)
    prog = Program.from_file(tmp_path / "p.fuse")
    anc = bfs_closure(n, parents)
    sister = np.zeros((n, n), dtype=np.int8)
    for a, b in sisters:
        sister[a, b] = 1
    aunt = ((sister.astype(np.int64) @ anc) > 0).astype(np.int8)
    for semi in (False, True):
        runner = prog.compile(backend, mode="fixpoint", semi_naive=semi)
        out = runner()
        assert out["Anc"].dtype == np.int8
        np.testing.assert_array_equal(out["Anc"], anc)
        np.testing.assert_array_equal(out["Aunt"], aunt)
        assert runner.last_run.converged
        assert set(out) == {"Anc", "Aunt"}  # status values are not exports


@pytest.mark.parametrize("backend", BACKENDS)
def test_chain_closure_iterations_and_report(backend):
    n = 7
    par = np.eye(n, k=1, dtype=np.int8)
    runner = Program("Anc(x,z) = Par(x,z) + Anc(x,y) Par(y,z)").compile(backend, mode="fixpoint")
    out = runner(Par=par)
    np.testing.assert_array_equal(out["Anc"], np.triu(np.ones((n, n), np.int8), 1))
    # Paths of length 1..n-1 need n-1 runs; one more run sees no change.
    (group,) = runner.last_run.groups
    assert (group.label, group.iterations, group.converged) == ("Anc", n, True)
    text = runner.explain()
    assert f"note: fixpoint Anc: {n} iterations, converged" in text  # fixpoint's report, in the run trace
    (group,) = [g for g in runner.explain("json")["groups"] if g["iterations"] == n]
    assert group["extra"]["converged"] is True


@pytest.mark.parametrize("backend", BACKENDS)
def test_reachability_from_start_nodes(backend):
    rng = np.random.default_rng(5)
    n = 15
    edges = random_edges(rng, n, 0.08)
    edge = np.zeros((n, n), dtype=np.int8)
    for a, b in edges:
        edge[a, b] = 1
    start = np.zeros(n, dtype=np.int8)
    start[[0, 3]] = 1
    src = "Reach(x) = Start(x) + Reach(y) Edge(y,x)\nexport Reach"
    out = Program(src).compile(backend, mode="fixpoint")(Start=start, Edge=edge)
    closure = bfs_closure(n, edges)
    want = ((start + start @ closure.astype(np.int64)) > 0).astype(np.int8)
    np.testing.assert_array_equal(out["Reach"], want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutual_recursion_odd_and_even_paths(backend):
    n = 6
    par = np.eye(n, k=1, dtype=np.int8)
    src = """
    Edge(x,y) = P(x,y)
    OddPath(x,z) = Edge(x,z) + EvenPath(x,y) Edge(y,z)
    EvenPath(x,z) = OddPath(x,y) Edge(y,z)
    export OddPath, EvenPath
    """
    runner = Program(src).compile(backend, mode="fixpoint")
    out = runner(P=par)
    d = np.subtract.outer(np.arange(n), np.arange(n)) * -1  # z - x
    np.testing.assert_array_equal(out["OddPath"], ((d > 0) & (d % 2 == 1)).astype(np.int8))
    np.testing.assert_array_equal(out["EvenPath"], ((d > 0) & (d % 2 == 0)).astype(np.int8))
    assert runner.last_run.groups[0].names == ("OddPath", "EvenPath")


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_fixpoint_converges_within_tolerance(backend):
    b = np.array([1.0, -2.0, 0.5])
    runner = Program("X[i] = 0.5 X[i] + B[i]").compile(backend, mode="fixpoint", max_iters=100, atol=1e-9, rtol=0)
    out = runner(B=b)
    np.testing.assert_allclose(out["X"], 2 * b, atol=1e-8)
    iters = runner.last_run.groups[0].iterations
    # The reference and the native loop stop at the same run.
    ref = Program("X[i] = 0.5 X[i] + B[i]").compile("reference", mode="fixpoint", max_iters=100, atol=1e-9, rtol=0)
    ref(B=b)
    assert ref.last_run.groups[0].iterations == iters and 20 < iters < 100


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_recursion_keeps_float32(backend):
    out = Program("X[i] = 0.25 X[i] + B[i]").compile(backend, mode="fixpoint")(B=np.ones(3, np.float32))
    assert out["X"].dtype == np.float32
    np.testing.assert_allclose(out["X"], np.full(3, 4 / 3), rtol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_fixpoint_is_exact(backend):
    cap = np.array([0, 3, 5], dtype=np.int64)
    runner = Program("C[i] = min(C[i] + 1, Cap[i])").compile(backend, mode="fixpoint")
    out = runner(Cap=cap)
    np.testing.assert_array_equal(out["C"], cap)
    assert runner.last_run.groups[0].iterations == 6  # 5 steps up, one run without change


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "src",
    ["Anc(x,z) = Par(x,z) + Anc(x,y) Par(y,z)", "Edge(x,y) = Par(x,y)\nAnc(x,z) = Edge(x,z) + Anc(x,y) Edge(y,z)"],
    ids=["naive", "semi-naive"],
)
def test_max_iters_reached_warns_and_flags(backend, src):
    seen = []
    runner = Program(src + "\nexport Anc").compile(backend, mode="fixpoint", max_iters=3)
    with diagnostic_handler(seen.append):
        out = runner(Par=np.eye(8, k=1, dtype=np.int8))
    assert not runner.last_run.converged
    assert runner.last_run.groups[0].iterations == 3
    assert [d.severity for d in seen] == ["warning"]
    assert "did not converge in max_iters=3" in seen[0].message
    # The result is the third iterate: paths of length up to 3.
    np.testing.assert_array_equal(out["Anc"], np.triu(np.ones((8, 8), np.int8), 1) - np.triu(np.ones((8, 8)), 4))
    assert "NOT converged" in runner.explain()


def test_single_mode_still_rejects_cycles_and_options_are_checked():
    prog = Program("A[i] = A[i] + B[i]")
    with pytest.raises(FuseError, match="mode='fixpoint'"):
        prog.compile("reference")(B=np.ones(2))
    with pytest.raises(FuseError, match="unknown mode"):
        prog.compile("reference", mode="loop")
    with pytest.raises(FuseError, match="max_iters"):
        prog.compile("reference", mode="fixpoint", max_iters=0)
    with pytest.raises(FuseError, match="atol"):
        prog.compile("reference", mode="fixpoint", atol=-1.0)


def test_non_recursive_programs_run_unchanged_in_fixpoint_mode():
    prog = Program("Y[i] = W[i,j] X[j]")
    w, x = np.arange(6.0).reshape(2, 3), np.ones(3)
    out = prog.compile("reference", mode="fixpoint")(W=w, X=x)
    np.testing.assert_allclose(out["Y"], w @ x)


def test_every_level_interpreter_runs_fixpoints():
    """The ew and loop interpreters agree with the reference (the llvm path's intermediate levels)."""
    prog = Program("X[i] = 0.5 X[i] + B[i]\nAnc(x,z) = Par(x,z) + Anc(x,y) Par(y,z)")
    inputs = {"B": np.array([1.0, 3.0]), "Par": np.eye(5, k=1, dtype=np.int8)}
    for semi in (False, True):
        low = prog.lower({"Par": np.int8}, LowerOptions(mode="fixpoint", semi_naive=semi))
        if semi:
            from fuse_mlir.passes.transforms.semi_naive import semi_naive

            semi_naive(low.module)
        ref = prog.compile("reference", mode="fixpoint", semi_naive=semi)(**inputs)
        ew_module = low.module.clone()
        LowerTeToEw().apply(make_context(), ew_module)
        ew = run_ew_module(ew_module, inputs, {})
        loop = run_loop_module(lower_to_loop(low.module), inputs)
        for got in (ew, loop):
            np.testing.assert_allclose(got.exports["X"], ref["X"])
            np.testing.assert_array_equal(got.exports["Anc"], ref["Anc"])
            assert int(got.exports["X#iterations"]) > 1 and int(got.exports["Anc#converged"]) == 1


def test_same_module_text_in_every_lowering():
    src = "Anc(x,z) = Par(x,z) + Anc(x,y) Par(y,z)\nX[i] = 0.5 X[i] + B[i]"
    opts = LowerOptions(mode="fixpoint")
    t1 = str(Program(src).lower(None, opts).module)
    t2 = str(Program(src).lower(None, opts).module)
    assert t1 == t2 and "te.fixpoint" in t1


# Builtins the runtime runs on NumPy (loop.host_call) inside a recursive group: the call runs in every iteration of
# the loop.while, and its result's extents are known only after it. The lowering read them with a loop.dim
# hoisted out of the loop (before the call), which LLVM's lowering rejected ("used before it was lowered").
HOST_CALL_GROUPS = {
    "tucker_dense read": "H[i, j] = 0.5 tucker_dense(H[i, j], rank=1) + X[i, j]\nexport H",
    "tucker_dense dead": "H[i, j] = 0.5 H[i, j] + X[i, j]\nD[i, j] = tucker_dense(H[i, j], rank=1)\nexport H",
    "concat after": "H[i, j] = 0.5 H[i, j] + X[i, j]\nC[i, j] = concat(H[i, j], X[i, j], axis=j)\nexport C",
    "concat read": "C[i, j] = concat(H[i, j], X[i, j], axis=j)\nH[i, k] = 0.25 C[i, ::2] + X[i, k]\nexport H",
    "concat read at a position": "C[i, j] = concat(H[i, j], X[i, j], axis=j)\nH[i, j] = 0.25 C[i, 0] + X[i, j]\nexport H",
}


@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize("name", list(HOST_CALL_GROUPS))
def test_host_calls_in_recursive_groups(name, opt_level, monkeypatch):
    monkeypatch.setenv("FUSE_VERIFY", "each")  # every pass's output verifies (dominance included)
    src = HOST_CALL_GROUPS[name]
    x = np.random.default_rng(0).standard_normal((3, 2))
    ref = Program(src).compile("reference", mode="fixpoint")
    want = ref(X=x)
    got = Program(src).compile("llvm", mode="fixpoint", opt_level=opt_level, cache=False)
    out = got(X=x)
    assert list(out) == list(want)
    for k in want:
        np.testing.assert_allclose(out[k], want[k], rtol=1e-12, atol=1e-12)
    assert got.last_run.groups[0].iterations == ref.last_run.groups[0].iterations > 1


def _wrapped_corpus() -> list[tuple[str, str, dict[str, np.ndarray]]]:
    """Every builtin and one-line semantics case as the start of a recursive group: ``Y = expr`` becomes
    ``Y = expr; Y += 0.5 Y``, so the whole expression is lowered inside the group's loop (converging to twice its
    value). The class of the fixpoint lowering bugs above: ops lowered in a loop.while body and the carried
    values' types (a numeric-position write made a tensor<2x?xf64> state that lower-te-to-ew left half retyped)."""
    import re

    from tests.test_builtins_lang import AXIS, ELEMENTWISE, M, P, X, softmax
    from tests.test_semantics import CASES

    inputs = dict(X=X, P=P, M=M, S=softmax(X, 1), G=X)
    corpus = [(name, src, inputs) for name, src, _ in AXIS]
    corpus += [(name, f"Y[i,j] = {expr}", dict(X=x)) for name, expr, x, _ in ELEMENTWISE]
    corpus += [(n, s, i) for n, s, i, _ in CASES if "\n" not in s and re.match(r"^\w+(\[[^\]]*\])? = ", s)]
    out = []
    for name, src, ins in corpus:
        lhs = src.split(" = ")[0].replace(".", "")
        used = {k: v for k, v in ins.items() if re.search(rf"\b{k}[\[(]", src)}
        out.append((name, f"{src}\n{lhs} += 0.5 {lhs}", used))
    return out


WRAPPED = _wrapped_corpus()


@pytest.mark.parametrize("name,src,inputs", WRAPPED, ids=[w[0] for w in WRAPPED])
def test_every_construct_inside_a_recursive_group(name, src, inputs, monkeypatch):
    """At O2 (fusion, in-place and row passes run on the group's body too); the lowerings are the same at O0,
    which the host-call groups above also run."""
    monkeypatch.setenv("FUSE_VERIFY", "each")
    settings = dict(mode="fixpoint", max_iters=200, atol=0.0, rtol=1e-13)
    ref = Program(src).compile("reference", **settings)
    try:
        want = ref(**inputs)
    except FuseError:
        pytest.skip("the reference rejects this group (e.g. an integer result cannot take 0.5 of itself)")
    run = Program(src).compile("llvm", cache=False, **settings)
    got = run(**inputs)
    assert list(got) == list(want)
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_allclose(got[k], want[k], rtol=1e-9, atol=1e-12, err_msg=k)
    assert run.last_run.groups[0].iterations == ref.last_run.groups[0].iterations
