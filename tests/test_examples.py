"""The example programs in ``examples/``: each one runs on its own data files and
gives the values that plain NumPy computes from the same files.

The expected values here are derived by hand from each program's header
comment, with NumPy only (never through fuse_mlir), so a test failure means the
compiler and the formula disagree.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuse_mlir.program import Program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DATA = EXAMPLES / "data"
ALL_EXAMPLES = sorted(EXAMPLES.glob("*.fuse"))

RTOL = 1e-10

# Known compiler bugs that make an example fail as written (the example stays
# as the language spec says it should work): file name -> one-line reason.
XFAIL_EXAMPLES: dict[str, str] = {}


# --- helpers ---------------------------------------------------------------------------


def npy(name: str) -> np.ndarray:
    return np.load(DATA / name, allow_pickle=False)


def js(name: str) -> np.ndarray:
    return np.asarray(json.loads((DATA / name).read_text()))


def facts(name: str) -> np.ndarray:
    """A coordinate-facts file (``# shape:`` comment, then one "i<TAB>j" row per fact) as a 0/1 matrix."""
    shape = None
    rows = []
    for line in (DATA / name).read_text().splitlines():
        m = re.match(r"#\s*shape:\s*(.*)", line)
        if m:
            shape = tuple(int(n) for n in m.group(1).split(","))
        elif line.strip():
            rows.append(tuple(int(v) for v in line.split("\t")))
    out = np.zeros(shape, dtype=np.int8)
    for r in rows:
        out[r] = 1
    return out


def run_example(name: str, tmp_path: Path) -> dict[str, np.ndarray]:
    return Program.from_file(EXAMPLES / name).compile("reference", out_root=tmp_path)()


def close(got: np.ndarray, want: np.ndarray, rtol: float = RTOL, atol: float = 0.0) -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def exact(got: np.ndarray, want: np.ndarray) -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    np.testing.assert_array_equal(got, want)


def declared_sinks(path: Path) -> list[str]:
    return re.findall(r'^\s*"([^"]+)"\s*=', path.read_text(), flags=re.MULTILINE)


def declared_exports(path: Path) -> list[str]:
    names: list[str] = []
    for line in path.read_text().splitlines():
        m = re.match(r"\s*export\s+(.*?)\s*(#.*)?$", line)
        if m:
            names += [n.strip() for n in m.group(1).split(",")]
    return names


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# --- the examples as a set ---------------------------------------------------------------


def test_there_are_enough_examples() -> None:
    names = {p.name for p in ALL_EXAMPLES}
    required = {
        "mlp.fuse",
        "attention.fuse",
        "logreg.fuse",
        "gnn.fuse",
        "hmm.fuse",
        "datalog.fuse",
        "layernorm.fuse",
        "rnn.fuse",
        "svm.fuse",
        "fn_reduce.fuse",
    }
    assert required <= names
    assert len(names) >= 10


@pytest.mark.parametrize("path", ALL_EXAMPLES, ids=lambda p: p.name)
def test_example_has_header_and_exports(path: Path) -> None:
    lines = path.read_text().splitlines()
    assert lines and lines[0].startswith("# "), f"{path.name} needs a header comment"
    header = "\n".join(line for line in lines if line.startswith("#"))
    assert "Exports" in header, f"{path.name}'s header should say what it exports"
    assert declared_exports(path), f"{path.name} has no export line"


def test_data_files_are_small() -> None:
    files = [p for p in DATA.iterdir() if p.is_file() and p.suffix != ".py"]
    assert files
    for p in files:
        assert p.stat().st_size < 10_000, f"{p.name} is {p.stat().st_size} bytes"


def test_make_data_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regenerating the data into a scratch folder reproduces the committed files byte for byte."""
    spec = importlib.util.spec_from_file_location("examples_make_data", DATA / "make_data.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "HERE", tmp_path)
    mod.main()
    made = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in DATA.iterdir() if p.is_file() and p.suffix != ".py")
    assert made == committed
    for name in made:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


# --- each example against NumPy -------------------------------------------------------------


def test_mlp(tmp_path: Path) -> None:
    x, w1, b1 = npy("mlp_x.npy"), npy("mlp_w1.npy"), js("mlp_b1.json")
    w2, b2 = npy("mlp_w2.npy"), js("mlp_b2.json")
    h = np.maximum(x @ w1.T + b1, 0.0)
    logits = h @ w2.T + b2
    logz = np.log(np.exp(logits).sum(axis=1))

    out = run_example("mlp.fuse", tmp_path)
    assert set(out) == {"Logits", "P", "LogZ", "LogP", "Pred"}
    close(out["Logits"], logits)
    close(out["P"], softmax(logits, axis=1))
    close(out["P"].sum(axis=1), np.ones(4))
    close(out["LogZ"], logz)
    close(out["LogP"], logits - logz[:, None])
    exact(out["Pred"], np.argmax(logits, axis=1).astype(np.float64))
    assert out["P"].dtype == np.float64
    # the sink
    close(np.load(tmp_path / "out" / "mlp_probs.npy"), softmax(logits, axis=1))


def _attention_reference() -> dict[str, np.ndarray]:
    x = npy("attn_x.npy")
    q, k, v = x @ npy("attn_wq.npy"), x @ npy("attn_wk.npy"), x @ npy("attn_wv.npy")
    s = 0.5 * (q @ k.T)
    mask = np.tril(np.ones((5, 5)))
    e = mask * np.exp(s - s.max(axis=1, keepdims=True))
    a = e / e.sum(axis=1, keepdims=True)
    return {"A": a, "Out": a @ v}


def _check_attention(out: dict[str, np.ndarray]) -> None:
    ref = _attention_reference()
    assert set(out) == {"A", "Out", "Out2", "Out3"}
    close(out["A"], ref["A"])
    exact(np.triu(out["A"], 1), np.zeros((5, 5)))
    close(out["A"].sum(axis=1), np.ones(5))
    close(out["Out"], ref["Out"])
    close(out["Out2"], ref["Out"])
    close(out["Out3"], ref["Out"])


def test_attention(tmp_path: Path) -> None:
    _check_attention(run_example("attention.fuse", tmp_path))


def test_logreg(tmp_path: Path) -> None:
    x = npy("logreg_x.npy")
    rows = (DATA / "logreg_w.csv").read_text().splitlines()[1:]
    w = np.array([float(r.split(",")[1]) for r in rows])
    b = float(json.loads((DATA / "logreg_b.json").read_text()))
    y = np.array([1, 0, 1, 1, 0, 0], dtype=np.float64)
    z = x @ w + b
    p = 1.0 / (1.0 + np.exp(-z))

    out = run_example("logreg.fuse", tmp_path)
    close(out["Z"], z)
    close(out["P"], p)
    exact(out["Label"], (p > 0.5).astype(np.int8))
    close(out["Loss"], np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))))
    assert out["Loss"].shape == ()


def test_gnn(tmp_path: Path) -> None:
    adj = facts("gnn_edges.tsv").astype(np.float64)
    assert (adj == adj.T).all()
    h, w = npy("gnn_h.npy"), npy("gnn_w.npy")
    deg = adj.sum(axis=1)
    agg = (adj @ h + h) / (1.0 + deg)[:, None]

    out = run_example("gnn.fuse", tmp_path)
    exact(out["Deg"], deg)
    close(out["Msg"], adj @ h + h)
    close(out["Agg"], agg)
    close(out["Out"], np.maximum(agg @ w, 0.0))


def test_hmm(tmp_path: Path) -> None:
    pi, a, b = js("hmm_pi.json"), npy("hmm_a.npy"), npy("hmm_b.npy")
    obs = js("hmm_obs.json")
    alpha0 = pi * b[:, obs[0]]
    alpha1 = (alpha0 @ a) * b[:, obs[1]]
    alpha2 = (alpha1 @ a) * b[:, obs[2]]
    lik = alpha2.sum()
    # brute force over all state paths, as an independent check of the recursion
    brute = sum(
        pi[s0] * b[s0, obs[0]] * a[s0, s1] * b[s1, obs[1]] * a[s1, s2] * b[s2, obs[2]]
        for s0 in range(3)
        for s1 in range(3)
        for s2 in range(3)
    )
    assert math.isclose(lik, brute, rel_tol=1e-12)

    out = run_example("hmm.fuse", tmp_path)
    close(out["Alpha0"], alpha0)
    close(out["Alpha1"], alpha1)
    close(out["Alpha2"], alpha2)
    close(out["Lik"], lik)
    assert out["Lik"].shape == ()
    close(out["Post"], alpha2 / lik)
    close(out["First"], pi * b[:, 2])


def test_datalog(tmp_path: Path) -> None:
    parent = facts("datalog_parent.tsv").astype(np.int64)
    sister = facts("datalog_sister.tsv").astype(np.int64)
    aunt = (sister @ parent > 0).astype(np.int8)
    grand = (parent @ parent > 0).astype(np.int8)
    elder = aunt | grand
    # the family in make_data.py: 3 and 4 are aunts of 5; 3 is an aunt of 6; 0 and 1 are grandparents of 5 and 6
    assert sorted(zip(*np.nonzero(aunt))) == [(3, 5), (3, 6), (4, 5)]

    out = run_example("datalog.fuse", tmp_path)
    for name, want in (("Aunt", aunt), ("Grandparent", grand), ("Elder", elder)):
        exact(out[name], want)
        assert out[name].dtype == np.int8, name
    exact(out["NAunts"], aunt.sum(axis=0))
    # the sink: the coordinates of Elder's facts
    lines = [ln for ln in (tmp_path / "out" / "elder.tsv").read_text().splitlines() if ln and not ln.startswith("#")]
    got = sorted(tuple(int(v) for v in ln.split("\t")) for ln in lines)
    assert got == sorted((int(i), int(j)) for i, j in zip(*np.nonzero(elder)))


def test_layernorm(tmp_path: Path) -> None:
    x, g, beta = npy("ln_x.npy"), js("ln_gamma.json"), js("ln_beta.json")
    mu = x.mean(axis=1)
    var = ((x - mu[:, None]) ** 2).mean(axis=1)
    y = (x - mu[:, None]) / np.sqrt(var[:, None] + 1e-5) * g + beta

    out = run_example("layernorm.fuse", tmp_path)
    close(out["Mu"], mu)
    close(out["Var"], var)
    close(out["Y"], y)
    close(out["Y2"], y)


def test_rnn(tmp_path: Path) -> None:
    x, w, u, b, v = npy("rnn_x.npy"), npy("rnn_w.npy"), npy("rnn_u.npy"), js("rnn_b.json"), npy("rnn_v.npy")
    hs = []
    h = np.zeros(4)
    for t in range(3):
        h = np.tanh(w @ h + u @ x[t] + b)
        hs.append(h)

    out = run_example("rnn.fuse", tmp_path)
    close(out["H1"], hs[0])
    close(out["H2"], hs[1])
    close(out["H3"], hs[2])
    close(out["Hs"], np.stack(hs))
    close(out["Y"], v @ hs[2])


def test_svm(tmp_path: Path) -> None:
    sv, coef, x = npy("svm_sv.npy"), js("svm_coef.json"), npy("svm_x.npy")
    b = float(json.loads((DATA / "svm_b.json").read_text()))
    d2 = np.array([[np.sum((x[m] - sv[n]) ** 2) for n in range(5)] for m in range(4)])
    k = np.exp(-0.5 * d2)
    score = k @ coef + b

    out = run_example("svm.fuse", tmp_path)
    close(out["D2"], d2)
    close(out["K"], k)
    close(out["Score"], score)
    exact(out["Label"], np.where(score > 0, 1.0, -1.0))
    assert len(set(np.sign(score))) == 2  # the data gives both classes


def test_fn_reduce(tmp_path: Path) -> None:
    a, v = npy("fr_a.npy"), npy("fr_v.npy")
    dots = a @ v
    norms = np.sqrt((a * a).sum(axis=1))

    out = run_example("fn_reduce.fuse", tmp_path)
    close(out["Dots"], dots)
    close(out["Norms"], norms)
    exact(out["RowMax"], a.max(axis=1))
    exact(out["RowMax2"], a.max(axis=1))
    exact(out["ColMin"], a.min(axis=0))
    close(out["Total"], a.sum())
    assert out["Total"].shape == ()
    close(out["Range"], a.max(axis=1) - a.min(axis=1))
    close(out["Cos"], dots / (norms * np.linalg.norm(v)))


def test_embedding(tmp_path: Path) -> None:
    table, tok = npy("emb_table.npy"), js("emb_tok.json")
    valid = (tok != 0).astype(np.int8)
    e = table[tok] * valid[:, None]
    shifted = np.vstack([np.zeros((1, 4)), e[:-1]])

    out = run_example("embedding.fuse", tmp_path)
    exact(out["Valid"], valid)
    exact(out["E"], e)
    exact(out["N"], valid.sum())
    close(out["Pool"], e.sum(axis=0) / valid.sum())
    exact(out["MaxPool"], e.max(axis=0))
    close(out["Bigram"], e + shifted)


def test_conv1d(tmp_path: Path) -> None:
    x = npy("conv_x.npy")
    k = np.array(json.loads((DATA / "conv_k.json").read_text())["data"])
    xp = np.concatenate([[0.0], x, [0.0]])
    y = np.array([k[0] * xp[t] + k[1] * xp[t + 1] + k[2] * xp[t + 2] for t in range(len(x))])
    assert np.allclose(y, np.correlate(xp, k, mode="valid"))

    out = run_example("conv1d.fuse", tmp_path)
    close(out["Y"], y)
    close(out["Down"], y[::2])
    close(out["EvenSum"], y[::2].sum())
    close(out["Energy"], (y**2).sum())


def test_activations(tmp_path: Path) -> None:
    x = npy("act_x.npy")
    c = math.sqrt(2.0 / math.pi)

    out = run_example("activations.fuse", tmp_path)
    exact(out["Relu"], np.maximum(x, 0.0))
    close(out["Softplus"], np.log1p(np.exp(x)))
    exact(out["HardTanh"], np.clip(x, -1.0, 1.0))
    close(out["Leaky"], np.where(x > 0, x, 0.1 * x))
    close(out["Piece"], np.select([x < -1, x < 1], [-1.0, x**3], 1.0))
    exact(out["Mid"], ((x >= -1) & (x <= 1)).astype(np.int8))
    close(out["Gelu"], 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3))))
    close(out["Sig"], 1.0 / (1.0 + np.exp(-x / 2.0)))


def test_retrieval(tmp_path: Path) -> None:
    q, doc = npy("ret_q.npy"), npy("ret_doc.npy")
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    dn = doc / np.linalg.norm(doc, axis=1, keepdims=True)
    sim = qn @ dn.T
    w = softmax(sim / 0.1, axis=1)

    out = run_example("retrieval.fuse", tmp_path)
    close(out["Sim"], sim)
    close(out["Best"], sim.max(axis=1))
    close(out["W"], w)
    close(out["Pair"], np.concatenate([qn, w @ doc], axis=1))
    top = json.loads((tmp_path / "out" / "retrieval_top2.json").read_text())
    order = np.argsort(-sim, axis=1, kind="stable")[:, :2]
    assert top["indices"] == order.tolist()
    close(np.array(top["values"]), np.take_along_axis(sim, order, axis=1))


# --- through the command line ------------------------------------------------------------


def _cli_params() -> list:
    out = []
    for p in ALL_EXAMPLES:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL_EXAMPLES[p.name])] if p.name in XFAIL_EXAMPLES else []
        out.append(pytest.param(p, marks=marks, id=p.name))
    return out


@pytest.mark.parametrize("path", _cli_params())
def test_example_runs_from_the_command_line(path: Path, tmp_path: Path) -> None:
    """``fuse run examples/<name>.fuse`` needs no --input: every tensor comes from a data file or a constant."""
    if importlib.util.find_spec("fuse_mlir.cli.fuse") is None:
        pytest.skip("the fuse command line (fuse_mlir/cli/fuse.py) does not exist yet")
    proc = subprocess.run(
        [sys.executable, "-m", "fuse_mlir.cli.fuse", "run", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for name in declared_exports(path):
        assert name in proc.stdout, f"export {name} missing from the output of fuse run:\n{proc.stdout}"
    for sink in declared_sinks(path):  # sinks write under the current folder by default
        assert (tmp_path / sink).is_file(), f"sink {sink} was not written"


@pytest.mark.parametrize("path", _cli_params())
def test_command_line_json_matches_the_library(path: Path, tmp_path: Path) -> None:
    """``fuse run --json`` prints the same exports as ``Program(...).compile(...)()``."""
    if importlib.util.find_spec("fuse_mlir.cli.fuse") is None:
        pytest.skip("the fuse command line (fuse_mlir/cli/fuse.py) does not exist yet")
    proc = subprocess.run(
        [sys.executable, "-m", "fuse_mlir.cli.fuse", "run", "--json", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    want = Program.from_file(path).compile(out_root=tmp_path / "lib")()  # the default backend, as the command
    assert list(printed) == list(want)
    for name, value in want.items():
        np.testing.assert_allclose(np.array(printed[name], dtype=np.float64), value.astype(np.float64), rtol=1e-15)
