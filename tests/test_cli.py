"""Tests of the command-line tools ``fuse`` and ``fuse-opt`` (fuse_mlir.cli).

Most tests call ``main([...])`` in-process and read stdout/stderr with
capsys; one test per tool runs the installed console script in a subprocess
to prove the entry point works. Every user error must exit 1 with a short
message and never a Python traceback.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuse_mlir.cli import fuse, fuse_opt
from fuse_mlir.program import Program, Runner

MATVEC = """\
# matrix-vector product
Y[i] = W[i,j] X[j]
export Y
"""

TWO = """\
Y[i] = W[i,j] X[j]
Z[i] = relu(Y[i]) + 1
"out/z.npy" = Z[i]
export Y, Z
"""

W = np.arange(6.0).reshape(2, 3)
X = np.array([1.0, 2.0, 3.0])
Y = W @ X
Z = np.maximum(Y, 0) + 1


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary current folder holding the programs and input files."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FUSE_DEBUG", raising=False)
    (tmp_path / "matvec.fuse").write_text(MATVEC)
    (tmp_path / "two.fuse").write_text(TWO)
    np.save(tmp_path / "w.npy", W)
    np.save(tmp_path / "x.npy", X)
    return tmp_path


def run_fuse(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``fuse argv...`` in-process: (exit status, stdout, stderr)."""
    rc = fuse.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_opt(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``fuse-opt argv...`` in-process: (exit status, stdout, stderr)."""
    rc = fuse_opt.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(rc: int, out: str, err: str) -> None:
    """Exit 1, nothing on stdout, a short message on stderr, no traceback."""
    assert rc == 1, err
    assert out == ""
    assert err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) <= 20, err


# ---------------------------------------------------------------------------
# fuse run
# ---------------------------------------------------------------------------


def test_run_prints_exports(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "--input", "W=w.npy", "--input", "X=x.npy")
    assert rc == 0, err
    assert out.startswith("Y float64[2] =")
    assert "[ 8. 26.]" in out


def test_run_json(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "two.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--json")
    assert rc == 0, err
    assert json.loads(out) == {"Y": Y.tolist(), "Z": Z.tolist()}


def test_run_queries(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--query evaluates only what a tensor needs (Z[i] = 2 W[i,j]-style queries need no X), selected."""
    (work / "q.fuse").write_text("Y[i] = W[i,j] X[j]\nZ[j, i] = 2 W[i,j]\nexport Y\n")
    argv = ["run", "q.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--json"]
    queries = ["Y[i=1]", " Y[::-1] ", "Z", "Z[j=0:3:2, -1]", "Z[1, :]", "Z[i=-1, j=1:]"]
    rc, out, err = run_fuse(capsys, *argv, *(a for q in queries for a in ("-q", q)))
    assert rc == 0, err
    z = 2 * W.T
    want = {"Y[i=1]": Y[1], "Y[::-1]": Y[::-1], "Z": z, "Z[j=0:3:2, -1]": z[0:3:2, -1], "Z[1, :]": z[1]}
    want["Z[i=-1, j=1:]"] = z[1:, -1]
    assert json.loads(out) == {k: np.asarray(v).tolist() for k, v in want.items()}
    rc, out, err = run_fuse(capsys, "run", "q.fuse", "-i", "W=w.npy", "--query", "Z[0]")  # X not needed
    assert rc == 0, err
    assert out.startswith("Z[0] float64[2] =") and "[0. 6.]" in out
    rc, out, err = run_fuse(capsys, "run", "q.fuse", "-i", "W=w.npy", "-q", "Z[i=0]", "-o", "z.npy")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(work / "z.npy"), z[:, 0])


def test_run_queries_as_documented(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The --query line of docs/modes.md, on the shipped MLP example, against its full run."""
    root = Path(__file__).resolve().parent.parent
    line = next(x for x in (root / "docs" / "modes.md").read_text().splitlines() if x.startswith("fuse run examples"))
    argv = shlex.split(line.split("#")[0])[1:]
    argv[1] = str(root / argv[1])
    rc, out, err = run_fuse(capsys, *argv, "--json", "--out-root", str(tmp_path))
    assert rc == 0, err
    got = json.loads(out)
    full = Program.from_file(root / "examples" / "mlp.fuse").compile("reference")
    exports = full.run({}, write_sinks=False)
    hidden = full.query("H")
    want = {"P[b=1]": exports["P"][1], "LogZ[::-1]": exports["LogZ"][::-1], "H[0, h=2:4]": hidden[0, 2:4]}
    assert list(got) == list(want)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-12)


def test_run_queries_in_fixpoint_mode(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "reach.fuse").write_text("R(i,j) = E(i,j)\nR(i,j) = R(i,k) E(k,j)\nexport R\n")
    np.save(work / "e.npy", np.eye(4, k=1, dtype=np.int8))
    argv = ["run", "reach.fuse", "-i", "E=e.npy", "--mode", "fixpoint", "--json", "-q", "R[i=1]"]
    rc, out, err = run_fuse(capsys, *argv)
    assert rc == 0, err
    assert json.loads(out) == {"R[i=1]": [0, 0, 1, 1]}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("Y[", "bad --query 'Y[': expected NAME or NAME[SEL, ...]"),
        ("3Y", "bad --query '3Y'"),
        ("Y[x]", "'x' is not an int or a slice"),
        ("Y[1:2:3:4]", "'1:2:3:4' is not an int or a slice"),
        ("Y[::0]", "slice step cannot be zero"),
        ("Y[i+1=0]", "'i+1' is not an axis"),
        ("Y[0, i=1]", "axis i of Y is selected twice"),
        ("Y[i=0, i=1]", "axis i is selected twice"),
        ("Y[q=1]", "Y has no axis 'q' (its axes: i)"),
        ("Y[1, 2]", "Y has no axis 1 (rank 1)"),
        ("Y[7]", "position 7 is out of range for axis i of Y (extent 2)"),
        ("Nope", "cannot query 'Nope': the program has no tensor of that name"),
    ],
)
def test_bad_queries(work: Path, capsys: pytest.CaptureFixture[str], query: str, message: str) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "-q", query)
    assert_user_error(rc, out, err)
    assert message in err, err


def test_queries_need_their_inputs_and_no_streaming(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-q", "Y[0]")
    assert_user_error(rc, out, err)
    assert "Y needs input X" in err and "matvec.fuse:2:" in err
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "--mode", "streaming", "-q", "Y")
    assert_user_error(rc, out, err)
    assert "--query is not available in streaming mode" in err


@pytest.mark.parametrize("ext", [".npz", ".json", ".csv"])
def test_run_inputs_in_other_formats(work: Path, capsys: pytest.CaptureFixture[str], ext: str) -> None:
    """Inputs go through load_source, so every source format works (csv: coordinate facts)."""
    if ext == ".npz":
        np.savez(work / "x.npz", X)
        x = X
    elif ext == ".json":
        (work / "x.json").write_text(json.dumps(X.tolist()))
        x = X
    else:
        (work / "x.csv").write_text("0\n2\n")  # X = [1, 0, 1] as an int8 boolean tensor
        x = np.array([1, 0, 1])
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", f"X=x{ext}", "--json")
    assert rc == 0, err
    np.testing.assert_allclose(json.loads(out)["Y"], W @ x)


def test_run_out_npy(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--out", "res/y.npy")
    assert (rc, out) == (0, ""), err
    np.testing.assert_array_equal(np.load(work / "res" / "y.npy"), Y)


def test_run_out_npz(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "two.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--out", "r.npz")
    assert (rc, out) == (0, ""), err
    with np.load(work / "r.npz", allow_pickle=False) as data:
        assert sorted(data.files) == ["Y", "Z"]
        np.testing.assert_array_equal(data["Y"], Y)
        np.testing.assert_array_equal(data["Z"], Z)


def test_run_out_npz_single_export(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "-o", "r.npz")
    assert rc == 0, err
    with np.load(work / "r.npz", allow_pickle=False) as data:
        np.testing.assert_array_equal(data["Y"], Y)


def test_run_out_json(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_fuse(capsys, "run", "two.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--out", "r.json")
    assert rc == 0, err
    assert json.loads((work / "r.json").read_text()) == {"Y": Y.tolist(), "Z": Z.tolist()}


def test_run_out_npy_with_several_exports_is_an_error(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "two.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--out", "r.npy")
    assert_user_error(rc, out, err)
    assert ".npy holds one array" in err and "Y, Z" in err
    assert not (work / "r.npy").exists()


def test_run_out_unknown_extension(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--out", "r.txt")
    assert_user_error(rc, out, err)
    assert "unsupported file type" in err


def test_run_sink_under_out_root(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_fuse(capsys, "run", "two.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--out-root", "results")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(work / "results" / "out" / "z.npy"), Z)
    assert not (work / "out").exists()


def test_run_sink_defaults_to_current_folder(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_fuse(capsys, "run", "two.fuse", "-i", "W=w.npy", "-i", "X=x.npy")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(work / "out" / "z.npy"), Z)


def test_run_program_from_stdin(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(MATVEC))
    rc, out, err = run_fuse(capsys, "run", "-", "-i", "W=w.npy", "-i", "X=x.npy", "--json")
    assert rc == 0, err
    assert json.loads(out) == {"Y": Y.tolist()}


def test_program_without_inputs(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "c.fuse").write_text('S = 2.5\n"s.json" = S\nexport S\n')
    rc, out, err = run_fuse(capsys, "run", "c.fuse")
    assert (rc, out, err) == (0, "S float64[] =\n2.5\n", "")
    assert json.loads((work / "s.json").read_text()) == 2.5


# ---------------------------------------------------------------------------
# fuse explain / --version
# ---------------------------------------------------------------------------


def test_explain_text(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "explain", "matvec.fuse")
    assert rc == 0, err
    header, row = out.splitlines()
    assert header.split()[:3] == ["equation", "lhs", "proj"]
    assert row.split() == ["matvec.fuse:2:1", "Y", "sum", "j", "j", "-", "-"]


def test_explain_describes_calls(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What a call works along and projects inside, and what a one-argument concat flattens."""
    (work / "calls.fuse").write_text("Y[b, o.] = softmax(W[o, h] H[b, h])\nZ[t, x] = concat(O[h, t, d])\n")
    rc, out, err = run_fuse(capsys, "explain", "calls.fuse")
    assert rc == 0, err
    _, softmax, concat = out.splitlines()
    assert softmax.endswith("softmax along o, h projected inside"), softmax
    assert concat.endswith("concat flattens h,d into x"), concat
    assert softmax.split()[3:6] == ["-", "-", "-"]  # nothing joined, projected or broadcast by the term itself


def test_explain_json(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "explain", "matvec.fuse", "--json")
    assert rc == 0, err
    (row,) = json.loads(out)
    assert row["lhs"] == "Y" and row["joined"] == ["j"] and row["projected"] == ["j"] and row["broadcast"] == []


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_fuse(capsys, "--version")
    assert rc == 0
    assert out.startswith("fuse ") and "xdsl" in out


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_fuse(capsys, "run", "--help")
    assert rc == 0
    assert "--input" in out and "--out-root" in out


# ---------------------------------------------------------------------------
# fuse: user errors exit 1 with a located, one-screen message
# ---------------------------------------------------------------------------


def test_missing_program_file(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "nope.fuse")
    assert_user_error(rc, out, err)
    assert err.strip() == "error: cannot read 'nope.fuse': no such file"


def test_program_is_a_folder(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "explain", ".")
    assert_user_error(rc, out, err)


def test_program_not_utf8(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "bin.fuse").write_bytes(b"Y = \xff\xfe\n")
    rc, out, err = run_fuse(capsys, "run", "bin.fuse")
    assert_user_error(rc, out, err)
    assert "not UTF-8" in err


def test_syntax_error_shows_line_col_and_caret(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "bad.fuse").write_text("S = 1\nY[i] = W[i,j] * * X[j]\nexport Y\n")
    rc, out, err = run_fuse(capsys, "run", "bad.fuse")
    assert_user_error(rc, out, err)
    first, shown, caret = err.splitlines()[:3]
    assert first.startswith("bad.fuse:2:17: error:")
    assert shown.strip() == "Y[i] = W[i,j] * * X[j]"
    assert caret.index("^") == shown.index("* X")


def test_unknown_function_error(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "f.fuse").write_text("Y[i] = frob(X[i])\nexport Y\n")
    rc, out, err = run_fuse(capsys, "explain", "f.fuse")
    assert_user_error(rc, out, err)
    assert err.startswith("f.fuse:1:8: error: unknown function 'frob'")


def test_missing_input(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "--input", "W=w.npy")
    assert_user_error(rc, out, err)
    lines = err.splitlines()
    assert lines[0] == "matvec.fuse:2:15: error: missing input X"
    assert lines[2].index("^") == lines[1].index("X[j]")


@pytest.mark.parametrize("spec", ["X", "X=", "=x.npy", "1X=x.npy", "X Y=x.npy", ""])
def test_bad_input_syntax(work: Path, capsys: pytest.CaptureFixture[str], spec: str) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "--input", spec)
    assert_user_error(rc, out, err)
    assert "expected NAME=PATH" in err


def test_input_given_twice(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "-i", "X=w.npy")
    assert_user_error(rc, out, err)
    assert "given twice" in err


def test_wrong_rank(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=w.npy")
    assert_user_error(rc, out, err)
    assert err.startswith("matvec.fuse:2:15: error: input X must have rank 1 but has shape (2, 3)")
    assert "^" in err


def test_extent_mismatch(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(work / "x4.npy", np.ones(4))
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x4.npy")
    assert_user_error(rc, out, err)
    assert "matvec.fuse:2:" in err and "j is" in err


def test_unknown_input_name(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "-i", "Q=x.npy")
    assert_user_error(rc, out, err)
    assert "unknown input Q" in err


def test_missing_input_file(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=nope.npy")
    assert_user_error(rc, out, err)
    assert err.startswith("error: --input X: cannot read source 'nope.npy': no such file")


def test_corrupt_input_file(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "junk.npy").write_bytes(b"not an npy file")
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=junk.npy")
    assert_user_error(rc, out, err)
    assert "--input X" in err


def test_unknown_backend(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "--backend", "nope")
    assert_user_error(rc, out, err)
    assert "unknown backend 'nope'" in err


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["run"], ["run", "matvec.fuse", "--bogus"], ["run", "matvec.fuse", "--json", "-o", "r.npz"]],
)
def test_usage_errors(work: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    rc, out, err = run_fuse(capsys, *argv)
    assert_user_error(rc, out, err)
    assert "usage: fuse" in err


def test_sink_escaping_out_root(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "esc.fuse").write_text('S = 1.0\n"../s.npy" = S\n')
    rc, out, err = run_fuse(capsys, "run", "esc.fuse", "--out-root", "sub")
    assert_user_error(rc, out, err)
    assert "escapes the output root" in err
    assert err.startswith("esc.fuse:2:")


# ---------------------------------------------------------------------------
# internal errors: exit 2, traceback only with FUSE_DEBUG=1
# ---------------------------------------------------------------------------


def _boom(self: Runner, *args: object, **kwargs: object) -> None:
    raise RuntimeError("boom")


def test_internal_error(work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Runner, "run", _boom)
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy")
    assert rc == 2
    assert err.startswith("internal error: RuntimeError: boom")
    assert "Traceback" not in err and "FUSE_DEBUG=1" in err


def test_internal_error_debug_traceback(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Runner, "run", _boom)
    monkeypatch.setenv("FUSE_DEBUG", "1")
    rc, _, err = run_fuse(capsys, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy")
    assert rc == 2
    assert "internal error: RuntimeError: boom" in err and "Traceback" in err


# ---------------------------------------------------------------------------
# the installed console scripts
# ---------------------------------------------------------------------------


def _script(name: str) -> str:
    """The console script installed next to this interpreter (skip when absent)."""
    path = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if path is None:
        pytest.skip(f"the {name} script is not installed")
    return path


def test_fuse_script_entry_point(work: Path) -> None:
    exe = _script("fuse")
    ok = subprocess.run(
        [exe, "run", "matvec.fuse", "-i", "W=w.npy", "-i", "X=x.npy", "--json"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"Y": Y.tolist()}
    bad = subprocess.run([exe, "run", "matvec.fuse", "-i", "W=w.npy"], capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.startswith("matvec.fuse:2:15: error: missing input X") and "Traceback" not in bad.stderr


def test_fuse_opt_script_entry_point(work: Path) -> None:
    exe = _script("fuse-opt")
    res = subprocess.run([exe, "matvec.fuse"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "te.contract" in res.stdout
    back = subprocess.run([exe, "-", "--print-op-generic"], input=res.stdout, capture_output=True, text=True)
    assert back.returncode == 0, back.stderr
    assert back.stdout.startswith('"builtin.module"() ({')


# ---------------------------------------------------------------------------
# fuse-opt
# ---------------------------------------------------------------------------

ROUND_TRIP_PROGRAMS = {
    "matvec": MATVEC,
    "two": TWO,
    "softmax": "Y[p, q.] = softmax(S[p,q])\nexport Y",
    "gather": "E[t,d] = Table[Tok[t], d]\nexport E",
    "offset_slice": "Y[i] = X[i+1, 0] - X[i, 0:1]\nexport Y",
    "boolean": "Aunt(x,z) = Sister(x,y) Parent(y,z)\nexport Aunt",
    "const": "W[i,j] = const([[1,2],[3,4]])\nY[i] = W[i,j] X[j]\nexport Y",
    "projections": "M[i] max= A[i,j]\nN[i] avg= A[i,j]\nD[i] = A[i,i]\nexport M, N, D",
    "structured": "Y[i] = X[i] > 0 ? X[i] : 0.5 * X[i]\nZ[i] = reduce(max, j) A[i,j]\nexport Y, Z",
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_PROGRAMS))
def test_fuse_opt_round_trip(
    work: Path, capsys: pytest.CaptureFixture[str], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """.fuse -> MLIR text; fuse-opt on that text prints it back identically, in both forms."""
    (work / "p.fuse").write_text(ROUND_TRIP_PROGRAMS[name])
    rc, custom, err = run_opt(capsys, "p.fuse")
    assert rc == 0, err
    assert custom == Program.from_file("p.fuse").to_mlir()
    rc, generic, err = run_opt(capsys, "p.fuse", "--print-op-generic")
    assert rc == 0, err
    (work / "c.mlir").write_text(custom)
    (work / "g.mlir").write_text(generic)
    assert run_opt(capsys, "c.mlir") == (0, custom, "")
    assert run_opt(capsys, "c.mlir", "--print-op-generic") == (0, generic, "")
    assert run_opt(capsys, "g.mlir", "--print-op-generic") == (0, generic, "")
    assert run_opt(capsys, "g.mlir") == (0, custom, "")  # generic -> custom
    monkeypatch.setattr(sys, "stdin", io.StringIO(generic))  # stdin: sniffed as MLIR
    assert run_opt(capsys) == (0, custom, "")


def test_fuse_opt_stdin_fuse(work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(MATVEC))
    rc, out, err = run_opt(capsys, "-")
    assert rc == 0, err
    assert "te.contract" in out and "loc(" not in out  # locations print only with --mlir-print-debuginfo
    monkeypatch.setattr(sys, "stdin", io.StringIO(MATVEC))
    rc, out, err = run_opt(capsys, "-", "--mlir-print-debuginfo")
    assert rc == 0, err
    assert 'loc("<stdin>":' in out


def test_fuse_opt_output_file(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_opt(capsys, "matvec.fuse", "-o", "m.mlir")
    assert (rc, out, err) == (0, "", "")
    assert (work / "m.mlir").read_text() == Program.from_file("matvec.fuse").to_mlir()


def test_fuse_opt_input_format_override(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "m.txt").write_text(Program.from_file("matvec.fuse").to_mlir())
    (work / "p.txt").write_text(MATVEC)
    assert run_opt(capsys, "m.txt")[0] == 0  # sniffed
    assert run_opt(capsys, "p.txt")[0] == 0  # sniffed
    assert run_opt(capsys, "p.txt", "--input-format=fuse")[0] == 0
    rc, out, err = run_opt(capsys, "p.txt", "--input-format=mlir")
    assert_user_error(rc, out, err)
    assert err.startswith("p.txt:1:1: error:")


def test_fuse_opt_input_dtype(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_opt(capsys, "matvec.fuse", "--input-dtype", "X=float32", "--input-dtype", "W=float32")
    assert rc == 0, err
    assert "tensor<?x?xf32>" in out and "f64" not in out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("X", "expected NAME=DTYPE"),
        ("X=floot32", "not a supported dtype"),
        ("X=complex128", "not a supported dtype"),
        ("X=object", "not a supported dtype"),
        ("Q=float32", "unknown input Q"),
    ],
)
def test_fuse_opt_bad_input_dtype(work: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str) -> None:
    rc, out, err = run_opt(capsys, "matvec.fuse", "--input-dtype", spec)
    assert_user_error(rc, out, err)
    assert message in err


def test_fuse_opt_input_dtype_with_mlir(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "m.mlir").write_text(Program.from_file("matvec.fuse").to_mlir())
    rc, out, err = run_opt(capsys, "m.mlir", "--input-dtype", "X=float32")
    assert_user_error(rc, out, err)


@pytest.mark.parametrize(
    ("pass_name", "level", "want"),
    [
        ("lower-te-to-ew", "elemwise", "tensor_eq"),
        ("lower-te-to-ew", "loop", "tensor_eq"),
        ("lower-ew-to-loop", "loop", "elemwise"),
        ("lower-ew-to-loop", "llvm-dialect", "elemwise"),
        ("lower-loop-to-llvm", "llvm-dialect", "loop"),
    ],
)
def test_lowering_a_module_below_its_level_names_the_expected_level(
    work: Path, capsys: pytest.CaptureFixture[str], pass_name: str, level: str, want: str
) -> None:
    rc, out, err = run_opt(capsys, "matvec.fuse", f"--emit={level}")
    assert rc == 0, err
    (work / "low.mlir").write_text(out)
    rc, out, err = run_opt(capsys, "low.mlir", "-p", pass_name)
    assert_user_error(rc, out, err)
    assert f"{pass_name}: expected a module at the {want} level, got one at the {level} level" in err
    assert "internal error" not in err


def test_lower_te_to_ew_names_an_op_it_cannot_lower(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "odd.mlir").write_text(MLIR_OK.replace("te.export", '"my.op"(%1) : (tensor<f64>) -> ()\n  te.export'))
    rc, out, err = run_opt(capsys, "odd.mlir", "--allow-unregistered-dialect", "-p", "lower-te-to-ew")
    assert_user_error(rc, out, err)
    assert "lower-te-to-ew: cannot lower 'my.op' (expected the tensor_eq level)" in err


MLIR_OK = """\
builtin.module {
  %0 = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %1 = te.contract %0, %0 {operand_indices = [["i"], ["i"]], indices = [], projection = #te.projection<sum>} : (tensor<?xf64>, tensor<?xf64>) -> tensor<f64>
  te.export %1 {names = ["S"]} : tensor<f64>
}
"""


@pytest.mark.parametrize(
    ("old", "new", "where", "message"),
    [
        ("%0, %0 {", "%0 %0 {", "3:23", "Expected ':'"),
        ("te.contract", "te.contrakt", "3:8", "unknown operation 'te.contrakt'"),
        ("te.contract %0, %0", "te.contract %0, %9", "3:24", "use of undefined value %9"),
        ("projection = #te.projection<sum>", "projection = 3", "3:3", "should be of base attribute te.projection"),
        (
            "projection = #te.projection<sum>",
            "projection = #te.projection<total>",
            "3:104",
            "Expected `sum`, `max`, `min`, `mean`, or `prod`",
        ),
        ('indices = ["i"]}', 'indices = ["i", "j"]}', "2:3", "te.input: result has rank 1 but 2 index names"),
        ("\n}\n", "\n", "5:1", "unexpected end of file in block definition"),
    ],
)
def test_fuse_opt_mlir_errors_are_located(
    work: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, where: str, message: str
) -> None:
    text = MLIR_OK.replace(old, new, 1)
    assert text != MLIR_OK
    (work / "bad.mlir").write_text(text)
    rc, out, err = run_opt(capsys, "bad.mlir")
    assert_user_error(rc, out, err)
    first = err.splitlines()[0]
    assert first.startswith(f"bad.mlir:{where}: error: "), err
    assert message in first
    line = int(where.split(":")[0])
    if line <= len(text.splitlines()):
        shown, caret = err.splitlines()[1:3]
        assert shown.strip() == text.splitlines()[line - 1].strip()
        assert caret.strip().startswith("^")


def test_fuse_opt_fuse_error(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "bad.fuse").write_text("Y[i] = W[i,j] X[j\n")
    rc, out, err = run_opt(capsys, "bad.fuse")
    assert_user_error(rc, out, err)
    assert err.startswith("bad.fuse:")


def test_fuse_opt_missing_file(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_opt(capsys, "nope.mlir")
    assert_user_error(rc, out, err)
    assert err.strip() == "error: cannot read 'nope.mlir': no such file"


def test_fuse_opt_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_opt(capsys, "--emit=llvm")
    assert_user_error(rc, out, err)
    assert "usage: fuse-opt" in err


def test_fuse_opt_version(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_opt(capsys, "--version")
    assert rc == 0 and out.startswith("fuse-opt ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("builtin.module {\n}", True),
        ('"builtin.module"() ({\n}) : () -> ()', True),
        ("// comment\n\nmodule {\n}", True),
        ("module attributes {x} {\n}", True),
        ('%0 = "te.input"() : () -> f32', True),
        ("Y[i] = W[i,j] X[j]", False),
        ("module[i] = X[i]", False),
        ("# comment\nmodule_x = 1", False),
        ('"out/y.npy" = Y[i]', False),
        ("", False),
    ],
)
def test_looks_like_mlir(text: str, expected: bool) -> None:
    assert fuse_opt.looks_like_mlir(text) is expected


# --- issue 18: honest tooling output -------------------------------------------------------------------------


def test_run_explain_reports_compile_and_run_time_apart(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_fuse(capsys, "run", "matvec.fuse", "--input", "W=w.npy", "--input", "X=x.npy", "--explain")
    assert rc == 0
    head = err.splitlines()[0]
    assert head.startswith("run on llvm (single mode): ") and " run, " in head and " compile, " in head


def test_runner_explain_describes_the_latest_call_on_every_backend() -> None:
    for backend in ("llvm", "reference"):
        run = Program("Y[i] = X[i] * 2\nexport Y").compile(backend)
        run(X=np.ones(3))
        first = run.explain("json")
        assert first["compile_seconds"] > 0 or backend == "reference"
        for n in (5, 7):  # later calls take the backend's direct path where it has one
            run(X=np.ones(n))
            trace = run.explain("json")
            assert trace["flops"] == first["flops"] * n // 3, (backend, trace)  # this call's shapes
            assert trace["compile_seconds"] == 0.0 if backend == "llvm" else trace["compile_seconds"] < 1
            assert trace["seconds"] < first["seconds"] + first["compile_seconds"] + 1


@pytest.mark.parametrize("backend", ["llvm", "reference", "auto"])
def test_every_backend_rejects_unknown_options_listing_the_valid_ones(backend: str) -> None:
    from fuse_mlir import FuseError

    with pytest.raises(FuseError, match=r"has no option bogus \(its options: .*opt_level"):
        Program("Y[i] = X[i]").compile(backend, bogus=1)


def test_cycle_hint_uses_the_cli_spelling(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "rec.fuse").write_text("A[i] = A[i] + X[i]\n")
    np.save(work / "v.npy", X)
    rc, out, err = run_fuse(capsys, "run", "rec.fuse", "--input", "X=v.npy")
    assert_user_error(rc, out, err)
    assert "--mode fixpoint" in err and "mode='fixpoint'" not in err
    from fuse_mlir import FuseError

    with pytest.raises(FuseError, match=r"compile\(mode='fixpoint'\)"):  # the Python spelling from Python
        Program("A[i] = A[i] + X[i]").compile("reference")(X=X)


def test_run_streaming_mode(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "acc.fuse").write_text("H[i,*t+1] = H[i,*t] + X[i]\nexport H\n")
    np.save(work / "v.npy", X)
    rc, out, err = run_fuse(capsys, "run", "acc.fuse", "--mode", "streaming", "--steps", "3", "--input", "X=v.npy")
    assert rc == 0, err
    assert "[3. 6. 9.]" in out
    rc, out, err = run_fuse(capsys, "run", "acc.fuse", "--input", "X=v.npy")
    assert_user_error(rc, out, err)
    assert "--mode streaming" in err
    rc, out, err = run_fuse(capsys, "run", "matvec.fuse", "--steps", "2", "--input", "W=w.npy", "--input", "X=x.npy")
    assert_user_error(rc, out, err)
    assert "--steps applies to --mode streaming" in err


def test_run_input_replaces_a_file_source(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "src.fuse").write_text('W[i,j] = "w.npy"\nY[i] = W[i,j] X[j]\nexport Y\n')
    np.save(work / "w2.npy", 2 * W)
    rc, out, err = run_fuse(capsys, "run", "src.fuse", "--input", "X=x.npy", "--input", "W=w2.npy", "--json")
    assert rc == 0, err
    assert json.loads(out)["Y"] == (2 * Y).tolist()
    (work / "gone.fuse").write_text('W[i,j] = "missing.npy"\nY[i] = W[i,j] X[j]\nexport Y\n')
    rc, out, err = run_fuse(capsys, "run", "gone.fuse", "--input", "X=x.npy", "--input", "W=w2.npy", "--json")
    assert rc == 0, err  # the replaced file is never read
    np.save(work / "bad.npy", X)
    rc, out, err = run_fuse(capsys, "run", "src.fuse", "--input", "X=x.npy", "--input", "W=bad.npy")
    assert_user_error(rc, out, err)
    assert "src.fuse:1:1: error: the replacement for W must have rank 2" in err


def test_fuse_opt_o2_is_the_native_pipeline(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-p O2` is what `fuse run -O2` runs: the module reaches the loop level; te-O2 stays at tensor_eq."""
    rc, out, _ = run_opt(capsys, "matvec.fuse", "-p", "O2")
    assert rc == 0 and "func.func @fuse_main" in out
    rc, out, _ = run_opt(capsys, "matvec.fuse", "-p", "te-O2")
    assert rc == 0 and "te.contract" in out and "func.func" not in out


def test_fuse_opt_kernel_graph_is_small(capsys: pytest.CaptureFixture[str]) -> None:
    mlp = str(Path(__file__).parent.parent / "examples" / "mlp.fuse")
    rc, kernels, _ = run_opt(capsys, mlp, "-p", "O2", "--emit=dot")
    assert rc == 0
    rc, ops, _ = run_opt(capsys, mlp, "-p", "O2", "--emit=dot", "--dot-detail=ops")
    assert rc == 0
    # One node per kernel instead of per op: an order of magnitude smaller (the row kernels' cache fallbacks and the
    # gathers' checked blocks add nodes of their own).
    assert 10 * len(kernels.splitlines()) < len(ops.splitlines())
    assert kernels.count("kernel ") >= 5 and "math.fma" not in kernels


def test_fuse_opt_unknown_pass_in_print_ir_flags(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--print-ir-after=csee", "--print-ir-before=csee"):
        rc, out, err = run_opt(capsys, "matvec.fuse", "-p", "cse", flag)
        assert_user_error(rc, out, err)
        assert "unknown pass 'csee'; did you mean 'cse'?" in err


def test_fuse_opt_load_pass_plugin_and_pipeline_plugins(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fuse_mlir.passes import Pipeline
    from fuse_mlir.passes.registry import unregister_pass

    (work / "my_pass.py").write_text(
        "from fuse_mlir.passes import FusePass, register_pass\n\n"
        "@register_pass\nclass Tag(FusePass):\n"
        '    """Tag the module."""\n'
        '    name = "test-tag-module"\n\n'
        "    def run(self, ctx, module, analyses):\n"
        "        from xdsl.dialects.builtin import UnitAttr\n"
        '        module.attributes["test.tagged"] = UnitAttr()\n'
        "        return True\n"
    )
    try:
        rc, out, err = run_opt(capsys, "matvec.fuse", "--load-pass-plugin=my_pass.py", "-p", "test-tag-module")
        assert rc == 0, err
        assert "test.tagged" in out
        assert Pipeline.parse("test-tag-module,cse", plugins=["my_pass.py"]).spec() == "test-tag-module,cse"
    finally:
        unregister_pass("test-tag-module")
    (work / "broken.py").write_text("raise RuntimeError('nope')\n")
    rc, out, err = run_opt(capsys, "matvec.fuse", "--load-pass-plugin=broken.py")
    assert_user_error(rc, out, err)
    assert "cannot load pass plug-in 'broken.py': RuntimeError: nope" in err


def test_fuse_opt_detects_mlir_on_stdin(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rc, generic, _ = run_opt(capsys, "matvec.fuse", "--print-op-generic")
    assert rc == 0
    for text in (generic, generic.split("\n", 1)[1].rsplit("})", 1)[0]):  # the module, and its bare ops
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))
        rc, out, err = run_opt(capsys)
        assert rc == 0, err
        assert "te.contract" in out


# ---------------------------------------------------------------------------
# fuse: odd paths, empty and huge programs are user errors (or work), never internal errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "/proc/self/mem"], "Input/output error"),
        (["run", "/dev/zero"], "not a regular file"),
        (["run", "a" * 5000 + ".fuse"], "File name too long"),
        (["run", "matvec.fuse", "-i", "W=/proc/self/mem.npy", "-i", "X=x.npy"], "no such file"),
        (["run", "matvec.fuse", "-i", "W=" + "w" * 5000 + ".npy", "-i", "X=x.npy"], "File name too long"),
        (["run", "matvec.fuse", "-i", "W=big.tsv", "-i", "X=x.npy"], "coordinate 4000000000 is too large"),
        (["run", "sink.fuse", "-i", "X=x.npy"], "File name too long"),
        (["explain", "deep.fuse"], "expression too long"),
    ],
)
def test_odd_paths_and_inputs_are_user_errors(
    work: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    (work / "big.tsv").write_text("0\t1\n4000000000\t2\n")
    (work / "sink.fuse").write_text(f'Y[i] = X[i] * 2\n"{"s" * 5000}.npy" = Y\n')
    (work / "deep.fuse").write_text("Y[i] = " + " + ".join(["X[i]"] * 6000) + "\n")
    rc, out, err = run_fuse(capsys, *argv)
    assert_user_error(rc, out, err)
    assert fragment in err
    assert "internal error" not in err


def test_empty_program_runs_and_prints_nothing(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "empty.fuse").write_text("# nothing to compute\naxis i = 4\n")
    for backend in ("reference", "llvm"):
        rc, out, err = run_fuse(capsys, "run", "empty.fuse", "--backend", backend, "--json")
        assert rc == 0, err
        assert json.loads(out) == {}


def test_long_sum_runs_from_the_command_line(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "sum.fuse").write_text("Y[i] = " + " + ".join(["X[i]"] * 2000) + "\n")
    rc, out, err = run_fuse(capsys, "run", "sum.fuse", "-i", "X=x.npy", "--backend", "reference", "--json")
    assert rc == 0, err
    np.testing.assert_allclose(json.loads(out)["Y"], 2000 * X)
    rc, out, err = run_fuse(capsys, "explain", "sum.fuse")
    assert rc == 0, err
    assert len(out.splitlines()) >= 2000


def test_fuse_opt_prints_the_code_the_jit_runs(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fuse-opt -p O2 --emit=asm`` and ``--emit=llvm-ir-opt`` optimise exactly the units that
    ``Program.compile("llvm")`` compiles on this host, at the same LLVM levels: the implicit lowering to the llvm
    dialect takes the JIT's host settings (threads, ldexp, streaming stores), and each kernel is optimised on its
    own (a nest deeper than DEEP_NEST_LOOPS at O1, the entry at O1), not the whole module at O3."""
    from fuse_mlir.backends.llvm import jit, runtime

    deep = jit.DEEP_NEST_LOOPS + 2
    axes = ", ".join(f"i{k}" for k in range(1, deep))
    src = f"S[i0] = A[i0, {axes}]\nY[r, c.] = softmax(X[r, c])\nZ[i] = exp(U[i]) V[i] + Q[i]\nexport S, Y, Z\n"
    (work / "p.fuse").write_text(src)
    printed: list[list[tuple[str, int]]] = []
    real_listing = runtime.unit_listing
    monkeypatch.setattr(
        runtime, "unit_listing", lambda units, **kw: printed.append(list(units)) or real_listing(units, **kw)
    )
    rc, asm, err = run_opt(capsys, "p.fuse", "-p", "O2", "--emit=asm")
    assert rc == 0, err
    rc, ir, err = run_opt(capsys, "p.fuse", "-p", "O2", "--emit=llvm-ir-opt")
    assert rc == 0, err
    compiled: list[list[tuple[str, int]]] = []
    real_jit = runtime.jit_units
    monkeypatch.setattr(runtime, "jit_units", lambda units, **kw: compiled.append(list(units)) or real_jit(units, **kw))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2,) * 4 + (1,) * (deep - 4))
    x, u = rng.standard_normal((3, 5)), rng.standard_normal(4)
    # the default build (the checked pass's FUSE_CHECK_BOUNDS adds check-bounds, which -p O2 does not name)
    got = Program(src).compile("llvm", cache=False, check_bounds=False)(A=a, X=x, U=u, V=u, Q=u)
    np.testing.assert_allclose(got["Y"], np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-13)
    assert len(printed) == 2 and printed[0] == printed[1], "asm and llvm-ir-opt optimise different units"
    assert compiled == [printed[0]], "fuse-opt optimises other units, or at other levels, than the JIT compiles"
    levels = [level for _, level in printed[0]]
    assert levels[-1] == 1 and levels.count(1) == 2 and levels.count(3) == len(levels) - 2, levels
    headers = [line for line in asm.splitlines() if line.startswith("# unit ")]
    assert len(headers) == len(levels) and headers[-1].endswith("@fuse_main (the entry), LLVM O1"), headers
    assert any(f"loop depth {deep}), LLVM O1" in line for line in headers), headers
    assert [line for line in ir.splitlines() if line.startswith("; unit ")] == [h.replace("#", ";", 1) for h in headers]
    if jit.native_ldexp():
        assert "vscalefpd" in asm  # exp's ldexp as the JIT builds it on AVX-512
    if jit.streaming_min_bytes() > 0:
        assert "vmovntpd" in asm  # Z's streaming stores
