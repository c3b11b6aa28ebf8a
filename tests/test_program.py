"""The Program API end to end: files, sources, sinks, imports, runner forms, specialisation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fuse_mlir
from fuse_mlir import FuseError, Program


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_sources_resolve_against_the_program_folder(tmp_path, monkeypatch):
    np.save(tmp_path / "data" / "w.npy" if (tmp_path / "data").mkdir() is None else None, np.eye(2) * 3)
    write(tmp_path / "data" / "v.json", "[1.0, 2.0]")
    prog = write(tmp_path / "p.fuse", 'W[i,j] = "data/w.npy"\nV[j] = "data/v.json"\nY[i] = W[i,j] V[j]\nexport Y')
    monkeypatch.chdir("/")
    out = Program.from_file(prog).compile()()
    np.testing.assert_allclose(out["Y"], [3.0, 6.0])


def test_source_shape_gives_static_extents_and_conflicts_are_compile_errors(tmp_path):
    np.save(tmp_path / "w.npy", np.ones((2, 3)))
    np.save(tmp_path / "v.npy", np.ones(4))
    prog = write(tmp_path / "p.fuse", 'W[i,j] = "w.npy"\nV[j] = "v.npy"\nY[i] = W[i,j] V[j]')
    with pytest.raises(FuseError, match="j is") as e:
        Program.from_file(prog).lower()
    assert "p.fuse:2:" in str(e.value) and "note:" in str(e.value)


def test_source_facts_make_boolean_tensors(tmp_path):
    write(tmp_path / "parent.tsv", "0\t1\n1\t2\n")
    prog = write(tmp_path / "p.fuse", 'Parent(x,y) = "parent.tsv"\nGp(x,z) = Parent(x,y) Parent(y,z)\nexport Gp')
    out = Program.from_file(prog).compile()()
    assert out["Gp"].dtype == np.int8
    np.testing.assert_array_equal(out["Gp"], [[0, 0, 1], [0, 0, 0], [0, 0, 0]])


def test_pickled_npy_is_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    prog = write(tmp_path / "p.fuse", 'O[i] = "o.npy"\nY[i] = O[i]')
    with pytest.raises(FuseError, match="pickle"):
        Program.from_file(prog).compile()()


def test_missing_source_is_located(tmp_path):
    prog = write(tmp_path / "p.fuse", '\nW[i] = "nope.npy"\nY[i] = W[i]')
    with pytest.raises(FuseError) as e:
        Program.from_file(prog).lower()
    assert "nope.npy" in e.value.message and "p.fuse:2:" in str(e.value)


def test_sinks_write_under_the_output_root(tmp_path):
    prog = Program(
        '"out/y.npy" = Y[i]\n"out/t.json" = Y[i] Y[i]\n"all.npz" = concat(Y[i], Y[i], axis=i)\nY[i] = V[i] + 1'
    )
    prog.compile(out_root=tmp_path)(V=np.arange(3.0))
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), [1, 2, 3])
    assert json.loads((tmp_path / "out" / "t.json").read_text()) == [1.0, 4.0, 9.0]  # a sink keeps its free indices
    np.testing.assert_allclose(np.load(tmp_path / "all.npz")["value"], [1, 2, 3, 1, 2, 3])


def test_sink_escaping_the_root_is_refused(tmp_path):
    prog = Program('"../evil.npy" = V[i]')
    with pytest.raises(FuseError, match="escapes"):
        prog.compile(out_root=tmp_path / "root")(V=np.ones(2))
    assert not (tmp_path / "evil.npy").exists()


def test_import_brings_fns_with_a_prefix(tmp_path):
    write(
        tmp_path / "lib" / "linalg.fuse",
        "fn dot(a[x], b[x]) -> s { s = a[x] b[x] }\nfn sq(a[x]) -> t { t[x] = a[x] a[x] }",
    )
    prog = write(
        tmp_path / "p.fuse", 'import "lib/linalg.fuse" as la\nY[i] = la::dot(X[i,k], B[k])\nZ[k] = la::sq(B[k])'
    )
    x, b = np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    out = Program.from_file(prog).compile()(X=x, B=b)
    np.testing.assert_allclose(out["Y"], x @ b)
    np.testing.assert_allclose(out["Z"], b * b)


def test_nested_imports_and_cycles(tmp_path):
    write(tmp_path / "a.fuse", 'import "b.fuse" as b\nfn twice(v[i]) -> w { w[i] = 2 v[i] }')
    write(tmp_path / "b.fuse", "fn inc(v[i]) -> w { w[i] = v[i] + 1 }")
    prog = write(tmp_path / "p.fuse", 'import "a.fuse" as a\nY[i] = a::b::inc(a::twice(X[i]))')
    np.testing.assert_allclose(Program.from_file(prog).compile()(X=np.ones(2))["Y"], [3.0, 3.0])
    write(tmp_path / "c1.fuse", 'import "c2.fuse" as c')
    write(tmp_path / "c2.fuse", 'import "c1.fuse" as c')
    cyc = write(tmp_path / "q.fuse", 'import "c1.fuse" as c\nY[i] = X[i]')
    with pytest.raises(FuseError, match="import cycle"):
        Program.from_file(cyc)


def test_runner_forms_agree():
    run = Program("Y[i] = W[i,j] V[j]").compile()
    w, v = np.ones((2, 3)), np.arange(3.0)
    a, b = run(W=w, V=v), run.run({"W": w, "V": v})
    np.testing.assert_allclose(a["Y"], b["Y"])
    assert sorted(run.input_names()) == ["V", "W"]
    np.testing.assert_allclose(fuse_mlir.compile("Y[i] = W[i,j] V[j]")(W=w, V=v)["Y"], [3.0, 3.0])


def test_each_dtype_signature_is_lowered_once():
    prog = Program("Y[i] = V[i] V[i]")
    run = prog.compile()
    run(V=np.ones(2))
    run(V=np.ones(3))
    run(V=np.ones(2, np.float32))
    assert len(prog._lowered) == 2 + 1  # float64, float32, and the default-signature interface lowering


def test_unknown_backend():
    with pytest.raises(FuseError, match="unknown backend"):
        Program("Y[i] = V[i]").compile("tpu")


def test_program_from_missing_file():
    with pytest.raises(FuseError, match="cannot read program"):
        Program.from_file("/no/such/file.fuse")


@pytest.mark.parametrize("backend", ["llvm", "torch", "jax"])
def test_relowered_programs_never_reuse_a_stale_binding(tmp_path: Path, backend: str) -> None:
    """Backends keep per-lowering state weakly, never by id(): after replace_sources each call's lowering is new,
    and a freed lowering's id (reused by CPython) must not find its old kernel binding and its old sources."""
    if backend != "llvm":
        pytest.importorskip(backend)
    np.save(tmp_path / "w.npy", np.zeros(3))
    prog = Program('W[i] = "w.npy"\nL = W[i] W[i] + 2.0\nexport L\n', str(tmp_path / "p.fuse"), tmp_path)
    grad = prog.grad("L", ["W"])
    runner = grad.compile(backend)
    for step in range(40):
        w = np.arange(3.0) + step
        grad.replace_sources({"W": w})
        out = runner()
        assert float(out["L"]) == pytest.approx(float(w @ w) + 2.0)
        np.testing.assert_allclose(out["dL_dW"], 2 * w)


def test_deep_expressions_go_through_the_warm_start_index() -> None:
    """The warm-start key reads the resolved program recursively: a 1500-term sum (within the parser's operator
    limit) must key, lower and run like any program, not raise RecursionError (found by the mutation fuzzer)."""
    src = "Y[i] = " + " + ".join(["X[i]"] * 1500) + "\nexport Y\n"
    runner = Program(src).compile("llvm")
    np.testing.assert_allclose(runner(X=np.ones(3))["Y"], np.full(3, 1500.0))


def test_free_indices_of_a_long_sum_are_computed_once_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lowering asks for the free indices of every prefix of a long sum; each node's are computed once (a
    2000-term sum inside a fn took 9 s to lower before: the mutation fuzzer's hang), so the work grows linearly."""
    from fuse_mlir.frontend import resolve

    calls = 0
    inner = resolve._free_indices

    def counting(expr):  # noqa: ANN001, ANN202
        nonlocal calls
        calls += 1
        return inner(expr)

    monkeypatch.setattr(resolve, "_free_indices", counting)
    resolve._FREE.clear()
    n = 1000
    src = "fn total(a[x]) -> s { s = " + " + ".join(["a[x]"] * n) + " }\nY[i] = total(X[i])\nexport Y\n"
    # s has no index: the sum over x of n copies of a[x], so 3n for three ones
    np.testing.assert_allclose(Program(src).compile("reference")(X=np.ones(3))["Y"], np.full(3, 3.0 * n))
    assert calls < 20 * n
