"""Contractions planned on the real shapes and mapped to BLAS whatever the factor order and index naming.

Every permutation of every program of ``benchmarks/contractions.py`` against
the reference interpreter; the plans against opt_einsum's optimal paths; plans
made per new shape and reused for a repeated one; the GEMM mapping of
``W[h,i] X[b,i]`` in every index order; explain()'s orders and BLAS calls.
"""

from __future__ import annotations

import importlib.util
import itertools
from types import SimpleNamespace

import numpy as np
import opt_einsum
import pytest

from benchmarks.contractions import SUITE, Case
from fuse_mlir import FuseError, Program
from fuse_mlir.gemm import GemmLayout, gemm_layout
from fuse_mlir.passes.transforms.contract_plan import (
    ShapePlans,
    one_call_result,
    optimal_path,
    pair_cost,
    result_copy_cost,
    step_orders,
)

TINY = {c: 2 + k for k, c in enumerate("abcdhijklmpqrsz")}  # distinct small extents, so a swapped axis shows


def _inputs(case: Case, dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(tuple(TINY[c] for c in idx)).astype(dtype) for n, idx in case.factors}


def _namings(case: Case) -> list[dict[str, str]]:
    letters = sorted({c for _, idx in case.factors for c in idx})
    return [dict(zip(letters, letters)), dict(zip(letters, "zyxwvutsrqpon"[: len(letters)]))]


def _orders(n: int, most: int | None = None) -> list[tuple[int, ...]]:
    """Every order of ``n`` factors, or at most ``most`` of them: the given and reversed orders and a fixed
    random sample of the rest (for backends whose compile costs seconds per program)."""
    every = list(itertools.permutations(range(n)))
    if most is None or len(every) <= most:
        return every
    rest = every[1:-1]
    picked = np.random.default_rng(n).choice(len(rest), size=most - 2, replace=False)
    return [every[0], every[-1], *(rest[k] for k in sorted(picked))]


def _check_all_orders(
    case: Case, dtypes: list[str], namings: list[int], most: int | None = None, **compile_options
) -> None:
    for dtype in dtypes:
        ins = _inputs(case, dtype)
        for nk in namings:
            for order in _orders(len(case.factors), most):
                prog = Program(case.source(order, _namings(case)[nk]))
                want = prog.compile("reference")(**ins)["R"]
                got = prog.compile(**compile_options)(**ins)["R"]
                assert got.dtype == want.dtype and got.shape == want.shape, (case.name, order)
                tol = 1e-12 if dtype == "float64" else 1e-5
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{case.name} {order} naming {nk}")


@pytest.mark.parametrize("case", SUITE, ids=[c.name for c in SUITE])
def test_every_order_llvm_O2(case: Case):
    _check_all_orders(case, ["float64", "float32"], [0], backend="llvm", opt_level=2)


@pytest.mark.parametrize("case", SUITE, ids=[c.name for c in SUITE])
def test_every_order_other_naming_llvm_O0(case: Case):
    _check_all_orders(case, ["float64"], [1], backend="llvm", opt_level=0)


@pytest.mark.slow
@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize("case", SUITE, ids=[c.name for c in SUITE])
def test_every_order_every_naming_and_dtype(case: Case, opt_level: int):
    _check_all_orders(case, ["float64", "float32"], [0, 1], backend="llvm", opt_level=opt_level)


HANDOFF = [c for c in SUITE if c.name in ("chain3_skewed", "bmm_batch_middle", "bilinear", "tucker")]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numba", "torch", "jax"])
@pytest.mark.parametrize("case", HANDOFF, ids=[c.name for c in HANDOFF])
def test_every_order_handoff_backends(case: Case, backend: str):
    """The hand-offs take the planned contractions too. The plan itself is checked on every order above (llvm);
    here up to 6 orders each, since numba and torch.compile-class backends compile each program for seconds."""
    _check_all_orders(case, ["float64"], [0], most=6, backend=backend)


def _subsets(path, n: int) -> set[frozenset[int]]:
    """The factor sets each step of a position path contracts (order-free, comparable across path formats)."""
    live = [frozenset([k]) for k in range(n)]
    made = set()
    for step in path:
        merged = frozenset().union(*(live[k] for k in step))
        for k in sorted(step, reverse=True):
            live.pop(k)
        live.append(merged)
        made.add(merged)
    return made


def test_skewed_chain_plan_is_opt_einsums_optimal_path():
    prog = Program("R[i,l] = Z[k,l] Y[j,k] X[i,j]\nexport R\n")
    runner = prog.compile("llvm")
    rng = np.random.default_rng(0)
    for i, j, k, m in [(10, 300, 300, 300), (300, 300, 300, 10), (300, 10, 300, 300), (40, 40, 40, 40)]:
        ins = {"X": rng.random((i, j)), "Y": rng.random((j, k)), "Z": rng.random((k, m))}
        np.testing.assert_allclose(runner(**ins)["R"], ins["X"] @ ins["Y"] @ ins["Z"], rtol=1e-10)
        rows = runner.explain("json")["contractions"]
        (order,) = [r for r in rows if r["kind"] == "order"]
        want, _ = opt_einsum.contract_path("kl,jk,ij->il", ins["Z"], ins["Y"], ins["X"], optimize="optimal")
        if (i, j, k, m) != (40, 40, 40, 40):  # a tie there: any order is optimal
            assert _subsets(order["path"], 3) == _subsets(want, 3), (i, j, k, m)


@pytest.mark.parametrize("seed", range(12))
def test_plans_are_optimal_under_the_cost_model(seed: int):
    """The DP's cost is never above that of opt_einsum's optimal (FLOP-minimal) path, priced by the same model."""
    rng = np.random.default_rng(seed)
    names = [tuple("ab"), tuple("bc"), tuple("cd"), tuple("de"), tuple("ea")][: rng.integers(3, 6)]
    if rng.random() < 0.5:
        names = [tuple("abc"), tuple("cd"), tuple("bde"), tuple("ef")]
    letters = sorted({c for ns in names for c in ns})
    ext = {c: int(rng.choice([2, 5, 30, 200])) for c in letters}
    out = tuple(c for c in letters if sum(c in ns for ns in names) == 1)
    path, cost = optimal_path(names, out, ext)
    spec = ",".join("".join(ns) for ns in names) + "->" + "".join(out)
    theirs, _ = opt_einsum.contract_path(
        spec, *(tuple(ext[c] for c in ns) for ns in names), shapes=True, optimize="optimal"
    )
    assert cost <= _price(theirs, names, out, ext) * (1 + 1e-12)
    assert _price(path, names, out, ext) == pytest.approx(cost)


def _price(path, names, out, ext) -> float:
    live = [frozenset(ns) for ns in names]
    total = 0.0
    for i, j in (sorted(p) for p in path):
        a, b = live[i], live[j]
        rest = [s for k, s in enumerate(live) if k not in (i, j)]
        keep = (a | b) & frozenset().union(set(out), *rest) if rest else frozenset(out)
        total += pair_cost(a, b, keep, ext, 8) + (0.0 if rest else result_copy_cost(a, b, out, ext, 8))
        live = rest + [keep]
    return total


def test_new_shape_plans_and_same_shape_reuses():
    prog = Program("R[i,l] = X[i,j] Y[j,k] Z[k,l]\nexport R\n")
    runner = prog.compile("llvm")
    rng = np.random.default_rng(1)

    def call(i, j, k, m):
        ins = {"X": rng.random((i, j)), "Y": rng.random((j, k)), "Z": rng.random((k, m))}
        np.testing.assert_allclose(runner(**ins)["R"], ins["X"] @ ins["Y"] @ ins["Z"], rtol=1e-10)

    def plans() -> ShapePlans:
        (p,) = {id(x): x for x in runner._plans.values() if x is not None}.values()
        return p

    call(5, 60, 60, 60)
    assert plans().plans == 1
    call(5, 60, 60, 60)
    call(5, 60, 60, 60)
    assert plans().plans == 1  # same shape: the plan is reused (the direct path dispatches on the shapes)
    call(6, 60, 60, 60)
    assert plans().plans == 2 and len(plans().by_path) == 1  # a new shape is planned; same order, same kernel
    call(60, 60, 60, 5)
    assert plans().plans == 3 and len(plans().by_path) == 2  # the other order
    call(5, 60, 60, 60)
    assert plans().plans == 3
    runner.run({"X": rng.random((60, 60)), "Y": rng.random((60, 60)), "Z": rng.random((60, 5))})
    assert plans().plans == 3


@pytest.mark.parametrize("backend", ["reference", "llvm"])
@pytest.mark.parametrize("mode", ["single", "demand", "monte_carlo"])
def test_a_call_whose_shapes_disagree_gets_the_runs_located_error(backend: str, mode: str):
    # The per-shape plan infers every shape before the run: C's extent 3 against the declared 4 made an
    # intermediate's shapes disagree, and the inference's ValueError escaped as a crash (found by running text
    # mutants). Planning now evaluates the program's extent checks as the run does, so the call fails as the
    # run would, located; so do the other modes that size something from the shapes before the run.
    src = "axis j = 4\nT[j, i] = A[i, k] B[k, m] D[m]\nT[j, i] += C[j]\nexport T\n"
    ins = {"A": np.ones((3, 3)), "B": np.ones((3, 3)), "D": np.ones(3), "C": np.ones(3)}
    options = {"projection": "monte_carlo", "samples": 2} if mode == "monte_carlo" else {}
    runner = Program(src).compile(backend, **options)
    with pytest.raises(FuseError, match=r"j is 3 in C\[j\] but 4 in T\[j, i\]") as err:
        runner.query("T", {"i": 1}, **ins) if mode == "demand" else runner(**ins)
    assert "<string>:3:" in str(err.value)
    ins["C"] = np.ones(4)
    want = np.full((4, 3), 9.0) + 1.0
    got = runner.query("T", {}, **ins) if mode == "demand" else runner(**ins)["T"]
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize(
    "src",
    [
        "Y[b,h] = W[h,i] X[b,i]",
        "Y[b,h] = X[b,i] W[h,i]",
        "Y[b,h] = W[i,h] X[b,i]",
        "Y[b,h] = W[h,i] X[i,b]",
        "Y[b,h] = W[i,h] X[i,b]",
        "Y[h,b] = W[h,i] X[b,i]",
    ],
)
def test_weights_times_batch_is_one_gemm(src: str):
    runner = Program(src + "\nexport Y\n").compile("llvm")
    rng = np.random.default_rng(2)
    shapes = {"W": {"h": 7, "i": 9}, "X": {"b": 5, "i": 9}}
    ins = {}
    for name in ("W", "X"):
        idx = src.split(f"{name}[")[1].split("]")[0].split(",")
        ins[name] = rng.random(tuple({**shapes["W"], **shapes["X"]}[c] for c in idx))
    runner(**ins)
    (call,) = [r for r in runner.explain("json")["contractions"] if r["kind"] == "pair"]
    assert call["call"] == "dgemm" and call["batch"] == 1 and call["copies"] == []
    assert sorted((call["m"], call["n"])) == [5, 7] and call["k"] == 9


def test_batch_index_in_the_middle_is_a_strided_gemm_and_innermost_copies():
    """A batch index between rows and columns needs no copy (strided matrices); an innermost one is copied to
    the front of a batched GEMM."""
    assert gemm_layout(("i", "b", "j"), ("j", "b", "k"), ("i", "b", "k")) == GemmLayout(
        ("i", "b", "j"), ("j", "b", "k"), ("i", "b", "k")
    )
    layout = gemm_layout(("i", "j", "b"), ("j", "k", "b"), ("i", "k", "b"))
    assert layout is not None and layout.a[0] == layout.b[0] == layout.c[0] == "b"
    assert gemm_layout(("b", "i", "j"), ("b", "j", "k"), ("b", "i", "k")) == gemm_layout(
        ("b", "i", "j"), ("b", "j", "k"), ("b", "i", "k"), {"b": 1}
    )  # already a batched GEMM: nothing moves


@pytest.mark.parametrize(
    ("src", "spec"),
    [("R[i,b,k] = A[i,b,j] B[j,b,k]", "ibj,jbk->ibk"), ("R[b,k,i] = B[j,b,k] A[i,b,j]", "jbk,ibj->bki")],
)
def test_a_batch_index_in_the_middle_runs_blas_in_place(src: str, spec: str) -> None:
    """bmm with the batch index between rows and columns: one batched GEMM on strided matrices, nothing copied
    (it used to copy both operands and the result), on every backend that runs loop.gemm."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((6, 3, 5)), rng.standard_normal((5, 3, 4))
    want = np.einsum(spec, *((b, a) if spec.startswith("jbk") else (a, b)))
    runner = Program(src + "\nexport R\n").compile("llvm")
    np.testing.assert_allclose(runner(A=a, B=b)["R"], want, rtol=1e-12)
    (call,) = [r for r in runner.explain("json")["contractions"] if r["kind"] == "pair"]
    assert call["call"] == "dgemm" and call["batch"] == 3 and call["copies"] == []
    if importlib.util.find_spec("numba") is not None:
        np.testing.assert_allclose(Program(src + "\nexport R\n").compile("numba")(A=a, B=b)["R"], want, rtol=1e-12)


def test_explain_shows_order_and_blas_calls():
    runner = Program("R[i,l] = Z[k,l] Y[j,k] X[i,j]\nexport R\n").compile("llvm")
    rng = np.random.default_rng(3)
    ins = {"X": rng.random((4, 50)), "Y": rng.random((50, 60)), "Z": rng.random((60, 70))}
    runner(**ins)
    runner(**ins)  # the direct path: explain() still describes this call
    text = runner.explain()
    assert "contraction: order [k,l] [j,k] [i,j] -> [i,l]: ([k,l] ([j,k] [i,j]))" in text
    assert "dgemm batch=1 m=" in text
    pairs = [r for r in runner.explain("json")["contractions"] if r["kind"] == "pair"]
    assert [(r["m"] * r["n"] * r["k"]) for r in pairs] == [4 * 50 * 60, 4 * 60 * 70]


def test_small_static_products_stay_loops():
    src = "A[i,j] = const([[1.0,2.0],[3.0,4.0]])\nB[j,k] = const([[1.0,0.0],[0.0,1.0]])\nR[i,k] = A[i,j] B[j,k]\nexport R\n"
    runner = Program(src).compile("llvm")
    np.testing.assert_allclose(runner()["R"], [[1.0, 2.0], [3.0, 4.0]])
    (call,) = [r for r in runner.explain("json")["contractions"] if r["kind"] == "pair"]
    assert call["call"] == "loop"


def test_integer_chain_keeps_its_values():
    prog = Program("R[i,l] = X[i,j] Y[j,k] Z[k,l]\nexport R\n")
    rng = np.random.default_rng(4)
    ins = {"X": rng.integers(0, 3, (3, 40)), "Y": rng.integers(0, 3, (40, 50)), "Z": rng.integers(0, 3, (50, 2))}
    got = prog.compile("llvm")(**ins)["R"]
    want = prog.compile("reference")(**ins)["R"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_a_skinny_intermediate_is_written_with_its_long_side_contiguous():
    """The 10-row (or 10-column) intermediate of a skewed chain is written [10, 300], never [300, 10]:
    OpenBLAS runs the skinny product about 1.2-1.7x faster with the long side contiguous in its result."""
    runner = Program("R[i,l] = Z[k,l] Y[j,k] X[i,j]\nexport R\n").compile("llvm")
    rng = np.random.default_rng(4)
    for i, other, want in ((10, 300, ("i", "k")), (300, 10, ("l", "j"))):
        ins = {"X": rng.random((i, 300)), "Y": rng.random((300, 300)), "Z": rng.random((300, other))}
        np.testing.assert_allclose(runner(**ins)["R"], ins["X"] @ ins["Y"] @ ins["Z"], rtol=1e-10)
        first = [r for r in runner.explain("json")["contractions"] if r["kind"] == "pair"][0]
        assert tuple(first["result"]) == want and first["m"] == 10 and first["n"] == 300, first


def test_planned_orders_that_do_not_fit_the_path_are_ignored():
    from fuse_mlir.passes.transforms.contract_plan import orders_attr, orders_of

    names, out, path = [("k", "l"), ("j", "k"), ("i", "j")], ("i", "l"), ((1, 2), (0, 1))
    op = SimpleNamespace(attributes={})  # only the attribute dictionary is read
    assert orders_of(op, names, out, path) is None
    op.attributes["orders"] = orders_attr([("i", "k"), ("i", "l")])
    assert orders_of(op, names, out, path) == [("i", "k"), ("i", "l")]
    for bad in ([("i", "j"), ("i", "l")], [("i", "k"), ("l", "i")], [("i", "k")]):
        op.attributes["orders"] = orders_attr(bad)
        assert orders_of(op, names, out, path) is None, bad


@pytest.mark.parametrize("swap", [False, True], ids=["A_B", "B_A"])
def test_batch_in_the_middle_copies_nothing(swap: bool):
    """With the batch index in the middle of every tensor nothing is copied, whichever factor comes first: the
    GEMM reads and writes strided matrices in place (it used to copy all three)."""
    a, b = ("i", "b", "j"), ("j", "b", "k")
    if swap:
        a, b = b, a
    layout = gemm_layout(a, b, ("i", "b", "k"), {"b": 32, "i": 128, "j": 128, "k": 128})
    assert layout == GemmLayout(a, b, ("i", "b", "k"))


@pytest.mark.parametrize("swap", [False, True], ids=["A_B", "B_A"])
def test_batch_last_copies_rotate_rather_than_reverse(swap: bool):
    """With the batch index last it must move out of every operand: each copy brings the operand's
    second-innermost axis innermost (reads strided by one row) rather than its outermost (strided by a plane)."""
    a, b = ("i", "j", "b"), ("j", "k", "b")
    if swap:
        a, b = b, a
    layout = gemm_layout(a, b, ("i", "k", "b"), {"b": 32, "i": 128, "j": 128, "k": 128})
    assert layout is not None
    for src, dst in ((a, layout.a), (b, layout.b)):
        assert dst == ("b", *src[:-1]), (src, dst)


def test_one_call_result():
    """After the batch indices, each operand's indices must form one run of the result."""
    a, b = frozenset("ij"), frozenset("jk")
    assert one_call_result(a, b, ("i", "k")) and one_call_result(a, b, ("k", "i"))
    assert one_call_result(frozenset("bij"), frozenset("bjk"), ("b", "i", "k"))
    assert not one_call_result(frozenset("bij"), frozenset("bjk"), ("i", "b", "k"))  # batch in the middle
    assert not one_call_result(frozenset("ib"), frozenset("jkb"), ("j", "i", "k"))  # j and k split by i
    assert one_call_result(frozenset("ia"), frozenset("ajk"), ("i", "j", "k"))


TUCKER = [("a", "b", "c"), ("i", "a"), ("j", "b"), ("k", "c")]


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))), ids=lambda o: "".join(map(str, o)))
def test_every_tucker_order_is_one_gemm_call_per_step(order):
    """A Tucker product's trees all cost the same FLOPs; whichever order the factors are written in, the plan
    ends with a step that writes R[i,j,k] in one call, and every intermediate is written in an order its
    producer's GEMM writes in one call and its consumer reads without a copy (measured: 0.79-0.93 ms over all
    48 orders and namings against 1.0-1.8 ms before, np.einsum 1.05)."""
    names = [TUCKER[k] for k in order]
    ext = {"a": 24, "b": 24, "c": 24, "i": 96, "j": 96, "k": 96}
    out = ("i", "j", "k")
    path, _ = optimal_path(names, out, ext)
    orders = step_orders(names, out, path, ext)
    live: list[tuple[tuple[str, ...], bool]] = [(ns, False) for ns in names]  # (order, an intermediate)
    for (x, y), result in zip(path, orders):
        (a, a_made), (b, b_made) = live[x], live[y]
        assert one_call_result(frozenset(a), frozenset(b), result), (a, b, result)
        layout = gemm_layout(a, b, result, ext)
        assert layout is not None and layout.c == result, (a, b, result, layout)
        assert (layout.a == a or not a_made) and (layout.b == b or not b_made), (a, b, layout)
        live = [t for k, t in enumerate(live) if k not in (x, y)] + [(result, True)]
    assert live == [(out, True)]


SKINNY = {"i": 4096, "j": 4096, "b": 256}


@pytest.mark.parametrize(
    "dtype, extents, want",
    [
        ("float64", SKINNY, ("b", "i")),  # long side (i) contiguous: BLAS's faster way round for float64
        ("float64", {"i": 256, "j": 4096, "b": 4096}, ("i", "b")),  # already long side contiguous
        ("float64", {"i": 1024, "j": 1024, "b": 512}, ("i", "b")),  # nearly square: either way round
        ("float64", {"i": 3000, "j": 300, "b": 64}, ("i", "b")),  # short k: the copy would cost more than it saves
        ("float64", {"i": 4096, "b": 256}, ("i", "b")),  # an extent unknown: the per-shape plan decides
        ("float32", SKINNY, ("i", "b")),  # no side preferred for float32
    ],
)
def test_gemm_result_orientation_follows_dtype_and_extents(dtype: str, extents: dict[str, int], want: tuple):
    layout = gemm_layout(("i", "j"), ("j", "b"), ("i", "b"), extents, dtype=np.dtype(dtype))
    assert layout is not None and layout.c == want
    assert (layout.a, layout.b) == (("i", "j"), ("j", "b"))  # the operands are read as they are


def test_gemm_result_order_forced_by_a_plan_or_ignored_when_it_cannot_be():
    forced = gemm_layout(("i", "j"), ("j", "b"), ("i", "b"), {}, dtype=np.dtype("float32"), result=("b", "i"))
    assert forced == GemmLayout(("i", "j"), ("j", "b"), ("b", "i"))
    for bad in (("b", "q"), ("i",), ("i", "b", "b")):
        layout = gemm_layout(("i", "j"), ("j", "b"), ("i", "b"), {}, dtype=np.dtype("float64"), result=bad)
        assert layout == GemmLayout(("i", "j"), ("j", "b"), ("i", "b")), bad


def test_orientation_cost_counts_only_the_wrong_side_of_a_skinny_product():
    from fuse_mlir.gemm import MACS_PER_COPY_UNIT, ORIENTATION_FIXED, ORIENTATION_LOSS, orientation_cost

    groups = {"batch": [], "m": ["i"], "n": ["b"], "k": ["j"]}
    f64 = np.dtype("float64")
    assert orientation_cost(("b", "i"), groups, SKINNY, f64) == 0
    loss = int(ORIENTATION_LOSS * 4096 * 4096 * 256 / MACS_PER_COPY_UNIT)
    assert orientation_cost(("i", "b"), groups, SKINNY, f64) == loss - ORIENTATION_FIXED
    small = {"i": 512, "j": 512, "b": 16}  # skinny but small: turning it round costs more than it saves
    assert orientation_cost(("i", "b"), groups, small, f64) == 0
    assert orientation_cost(("i", "b"), groups, SKINNY, np.dtype("float32")) == 0
    assert orientation_cost(("i", "b"), groups, {"i": 4096, "b": 256}, f64) == 0  # k unknown
    batched = {"batch": ["z"], "m": ["i"], "n": ["b"], "k": ["j"]}
    ext = {**SKINNY, "z": 3}
    assert orientation_cost(("z", "i", "b"), batched, ext, f64) == pytest.approx(3 * loss - ORIENTATION_FIXED, abs=3)
    assert orientation_cost(("i", "b", "z"), batched, ext, f64) == 0  # a batch index innermost: not a plain GEMM


def _pair_rows(runner) -> list[dict]:
    return [r for r in runner.explain("json")["contractions"] if r["kind"] == "pair"]


@pytest.mark.parametrize("backend", ["llvm", "numba"])
def test_skinny_float64_product_writes_its_result_transposed_per_shape(backend: str):
    """A float64 GEMM whose result is tall and narrow (4096 x 64, k = 1024) runs BLAS the faster way round,
    writing the result transposed and copying it into the bias + relu epilogue; other shapes of the same program,
    and float32, keep the result's own order. Every call agrees with NumPy, whichever shape came before."""
    if backend == "numba" and importlib.util.find_spec("numba") is None:
        pytest.skip("numba not installed")
    prog = Program("Y[i, b] = relu(W[i, j] X[j, b] + B[i])\nexport Y\n")
    runner = prog.compile(backend)
    rng = np.random.default_rng(7)

    def inputs(i: int, j: int, b: int, dtype: str) -> dict[str, np.ndarray]:
        return {
            "W": rng.standard_normal((i, j)).astype(dtype),
            "X": rng.standard_normal((j, b)).astype(dtype),
            "B": rng.standard_normal(i).astype(dtype),
        }

    tall, square, wide = (
        inputs(4096, 1024, 64, "float64"),
        inputs(300, 300, 300, "float64"),
        inputs(64, 1024, 4096, "float64"),
    )
    for ins, transposed in ((tall, True), (square, False), (wide, False), (tall, True), (square, False)):
        for _ in range(2):  # the general path plans, the direct (native) path repeats the shape
            got = runner(**ins)["Y"]
            np.testing.assert_allclose(
                got, np.maximum(ins["W"] @ ins["X"] + ins["B"][:, None], 0), rtol=1e-9, atol=1e-9
            )
            assert got.flags.c_contiguous
        (row,) = _pair_rows(runner)
        assert ("result" in row["copies"]) == transposed, row
    single = inputs(4096, 1024, 64, "float32")
    got = runner(**single)["Y"]
    np.testing.assert_allclose(
        got, np.maximum(single["W"] @ single["X"] + single["B"][:, None], 0), rtol=1e-4, atol=1e-4
    )
    (row,) = _pair_rows(runner)
    assert "result" not in row["copies"]


def test_planned_gemm_orientation_is_in_the_module_and_explained():
    prog = Program("Y[i, b] = W[i, j] X[j, b]\nexport Y\n")
    runner = prog.compile("llvm")
    rng = np.random.default_rng(8)
    ins = {"W": rng.random((2048, 2048)), "X": rng.random((2048, 32))}
    np.testing.assert_allclose(runner(**ins)["Y"], ins["W"] @ ins["X"], rtol=1e-10)
    (plans,) = {id(x): x for x in runner._plans.values() if x is not None}.values()
    text = prog_text = str(plans.lowered_for(ins).module)
    assert 'gemm_result = ["b", "i"]' in prog_text, text
    assert "copies result after" in runner.explain()
    # the same shapes plan the same module text in another planner (determinism of the planned IR)
    again = Program("Y[i, b] = W[i, j] X[j, b]\nexport Y\n").compile("llvm")
    again(**ins)
    (other,) = {id(x): x for x in again._plans.values() if x is not None}.values()
    assert str(other.lowered_for(ins).module) == prog_text


def test_a_planned_module_keeps_the_native_call_path():
    """A program planned per shape runs repeated calls of a shape natively: the call's shapes pick the planned
    variant, whose own native entry runs it, so no call runs a module planned for other shapes. A new shape that
    plans as an earlier one runs that one's entry without the general path; one that plans otherwise declines the
    native dispatch and plans on the general path, after which it too runs natively."""
    from fuse_mlir.lowered import ShapeDispatch

    runner = Program("Y[i, b] = W[i, j] X[j, b]\nexport Y\n").compile("llvm")
    rng = np.random.default_rng(9)
    w = rng.random((4096, 2048))
    tall = {"W": w, "X": rng.random((2048, 32))}  # turns round (a copy pays)
    runner(**tall)
    runner(**tall)
    assert runner._native is not None
    call, dispatch = runner._native[0], runner._native[2]
    assert isinstance(dispatch, ShapeDispatch)
    assert call(tall) is not None  # this shape: its variant's entry runs it
    turned = dispatch.ran[1]
    assert turned is not runner.program.lower({"W": np.dtype("float64"), "X": np.dtype("float64")})
    taller = {"W": w, "X": rng.random((2048, 40))}  # a new shape that plans the same way
    assert call(taller) is not None and dispatch.ran[1] is turned  # no general path: the same variant's entry
    small = {"W": rng.random((16, 64)), "X": rng.random((64, 16))}  # plans the other way (as written)
    assert call(small) is None  # its variant has no entry yet: declined before anything runs
    general = runner.run
    runs: list[int] = []
    runner.run = lambda *a, **k: runs.append(1) or general(*a, **k)  # type: ignore[method-assign]
    for ins in (small, tall, small, taller, tall):
        np.testing.assert_allclose(runner(**ins)["Y"], ins["W"] @ ins["X"], rtol=1e-10)
        assert ("copies result after" in runner.explain()) == (ins is not small)  # explain names the variant run
    assert len(runs) == 1  # only the first call of the as-written variant planned on the general path
    other = {"W": rng.random((20, 64)), "X": rng.random((64, 20))}
    np.testing.assert_allclose(runner(**other)["Y"], other["W"] @ other["X"], rtol=1e-10)
    assert len(runs) == 1  # a new shape of that variant runs natively too
    bad = {"W": rng.random((16, 64)), "X": rng.random((63, 16))}
    with pytest.raises(FuseError, match="j is 63 in X"):
        runner(**bad)  # declined natively; the general path reports the mismatch


def test_planned_calls_dispatch_by_shape_on_the_python_path(monkeypatch: pytest.MonkeyPatch):
    """The Python direct path (taken where the process cannot build native entries, as here) dispatches planned
    variants by shape the same way: a new shape that plans as an earlier one runs its bound call without the
    general path."""
    rng = np.random.default_rng(10)
    w = rng.random((4096, 2048))
    runner = Program("Y[i, b] = W[i, j] X[j, b]\nexport Y\n").compile("llvm")
    monkeypatch.setattr(runner.executor, "bind_native", lambda lowered: None)
    general = runner.run
    runs: list[int] = []
    runner.run = lambda *a, **k: runs.append(1) or general(*a, **k)  # type: ignore[method-assign]
    for b in (32, 40, 32, 48):
        x = rng.random((2048, b))
        np.testing.assert_allclose(runner(W=w, X=x)["Y"], w @ x, rtol=1e-10)
        assert runner._native is None and "copies result after" in runner.explain()
    assert len(runs) == 1  # the first call planned the turned-round variant; later shapes reuse its call


def test_gemm_orientation_benchmark_runs_and_checks_its_values(capsys: pytest.CaptureFixture[str]):
    """``python -m benchmarks.gemm_orientation`` (docs/optimisation.md's figures) checks both fuse runners against
    NumPy before timing; a small quick run, and a bad ``--shapes`` is a usage error."""
    from benchmarks import gemm_orientation

    assert gemm_orientation.main(["--shapes", "300,200,20;20,200,300", "--quick"]) == 0
    out = capsys.readouterr().out
    assert out.count("| W@X |") == 2 and out.count("| relu(W@X+B) |") == 2
    assert "| first call of a new shape |" in out and "| cycling through seen shapes |" in out
    with pytest.raises(SystemExit):
        gemm_orientation.main(["--shapes", "1,2"])


def test_gemm_sites_name_the_input_axis_of_every_index():
    """A warm start plans GEMM sides from these records: each index of each float64 GEMM traced back to an input
    axis, through computed operands (a second layer) and axes the program checks equal; an n-way product, or
    float32 only, gives None or nothing."""
    from fuse_mlir.passes.transforms.contract_plan import gemm_sites

    def sites(src: str, dtype: str = "float64"):
        prog = Program(src)
        names = [s.name for s in prog.lower(None, None).inputs]
        return gemm_sites(prog.lower({n: np.dtype(dtype) for n in names}, None))

    two = sites("H[h, b] = relu(W[h, i] X[i, b] + B[h])\nY[o, b] = V[o, h] H[h, b]\nexport Y")
    assert [dict((n, (x, a)) for n, x, a in s.extents) for s in two] == [
        {"h": ("W", 0), "i": ("W", 1), "b": ("X", 1)},
        {"o": ("V", 0), "h": ("W", 0), "b": ("X", 1)},  # h is checked equal to W's rows: the first such axis
    ]
    assert [s.result for s in two] == [("h", "b"), ("o", "b")] and all(s.dtype == "float64" for s in two)
    assert sites("R[i, l] = W[i, j] V[j, k] Z[k, l]\nexport R") is None
    assert sites("Y[i, b] = W[i, j] X[j, b]\nexport Y", "float32") == []


def test_gemm_site_decides_as_gemm_layout_does():
    """The warm start's record answers as the layout search on the same extents, small products included (which
    it answers without searching)."""
    from fuse_mlir.gemm import GemmSite

    site = GemmSite(0, (("i", "j"), ("j", "b")), ("i", "b"), "float64", (("i", "W", 0), ("j", "W", 1), ("b", "X", 1)))
    assert GemmSite.from_json(site.to_json()) == site
    for i, j, b in ((4096, 4096, 256), (512, 512, 16), (64, 64, 8), (256, 4096, 4096), (2048, 2048, 32)):
        layout = gemm_layout(("i", "j"), ("j", "b"), ("i", "b"), {"i": i, "j": j, "b": b}, dtype=np.dtype("float64"))
        assert layout is not None
        want = None if layout.c == ("i", "b") else layout.c
        assert site.result_order({"W": (i, j), "X": (j, b)}) == want, (i, j, b)
    assert site.result_order({"W": (4096, 4096)}) is None  # an input the call lacks: its own order


@pytest.mark.parametrize(
    "src, shapes",
    [
        ('W[i, j] = "w.npy"\nY[i, b] = W[i, j] X[j, b]\nexport Y\n', [(600, 16), (600, 600), (600, 8)]),
        ('W[i, j] = "w.npy"\nY[i, l] = W[i, j] X[j, k] Z[k, l]\nexport Y\n', [(600, 5), (5, 600)]),
    ],
    ids=["gemm", "nway"],
)
def test_planned_programs_read_replaced_sources(tmp_path, src: str, shapes: list[tuple[int, int]]):
    """A program whose products are planned per shape reads the arrays replace_sources gave it, in every shape
    planned before or after the replacement (a plan's variants carry the sources of the lowering it was made
    for: the planner is kept per lowering, not per module)."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((4000, 600))
    np.save(tmp_path / "w.npy", w)
    prog = Program(src, str(tmp_path / "p.fuse"), tmp_path)
    runner = prog.compile("llvm")

    def check(weights: np.ndarray) -> None:
        for a, b in shapes:
            ins = {"X": rng.standard_normal((600, a))}
            want = weights @ ins["X"]
            if "Z[" in src:
                ins["Z"] = rng.standard_normal((a, b))
                want = want @ ins["Z"]
            for _ in range(2):  # the general path, then the direct one
                np.testing.assert_allclose(runner(**ins)["Y"], want, rtol=1e-9, atol=1e-9)

    check(w)
    for _ in range(2):
        w = rng.standard_normal((4000, 600))
        prog.replace_sources({"W": w})
        check(w)


def test_a_plan_marks_products_whose_projected_extents_are_all_positive():
    """A per-shape plan tells contract-order which products need no empty-sum guard: a variant planned for shapes
    whose projected extents are all positive carries ``nonempty`` (its steps run unguarded), one with an empty
    projected index does not, and reads 0 there whatever the other factors hold."""
    from fuse_mlir.dialects import tensor_eq as te
    from fuse_mlir.passes.transforms.contract_order import ContractOrder
    from fuse_mlir.passes.transforms.contract_plan import NONEMPTY_ATTR, ShapePlans

    runner = Program("R[i, l] = A[i, j] B[j, k] C[k, l]\nexport R\n").compile("llvm")
    rng = np.random.default_rng(12)
    full = {"A": rng.random((3, 4)), "B": rng.random((4, 5)), "C": rng.random((5, 2))}
    empty_k = {"A": rng.random((3, 4)), "B": np.ones((4, 0)), "C": np.full((0, 2), np.nan)}
    empty_j = {"A": np.full((3, 0), np.inf), "B": np.ones((0, 5)), "C": np.full((5, 2), np.nan)}
    np.testing.assert_allclose(runner(**full)["R"], full["A"] @ full["B"] @ full["C"], rtol=1e-12)
    for ins in (empty_k, empty_j):
        np.testing.assert_array_equal(runner(**ins)["R"], np.zeros((3, 2)))
    (plans,) = {id(p): p for p in runner._plans.values() if isinstance(p, ShapePlans)}.values()
    for ins, marked in ((full, True), (empty_k, False), (empty_j, False)):
        module = plans.lowered_for(ins).module.clone()
        (op,) = [o for o in module.walk() if isinstance(o, te.ContractOp)]
        assert (NONEMPTY_ATTR in op.attributes) == marked
        ContractOrder().apply(None, module)  # type: ignore[arg-type]
        guards = [o for o in module.walk() if isinstance(o, te.GenerateOp) and o.fn.data == "nonempty"]
        assert len(guards) == (0 if marked else 1)
