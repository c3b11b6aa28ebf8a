"""Sources and sinks: every format round-trips, and every bad file or path is a
located FuseError rather than a crash, a pickle load, or a write outside the root."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from fuse_mlir.diagnostics import FuseError, Loc, register_source
from fuse_mlir.io.sinks import resolve_sink_path, write_sink
from fuse_mlir.io.sources import load_source, resolve_source_path, source_signature
from fuse_mlir.program import Program

FLOATS = np.array([[0.5, -2.0, 0.0], [1e-300, 3.25, np.pi]])
INTS = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
BOOLS = np.array([[0, 1, 0], [1, 1, 0], [0, 0, 0]], dtype=np.int8)


# --- paths ---------------------------------------------------------------------


def test_resolve_source_path_relative_and_absolute(tmp_path: Path) -> None:
    assert resolve_source_path("w/a.npy", tmp_path) == tmp_path.resolve() / "w" / "a.npy"
    absolute = tmp_path / "elsewhere" / "b.npy"
    assert resolve_source_path(str(absolute), tmp_path / "prog") == absolute.resolve()


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_a_source_no_equation_reads(tmp_path: Path, backend: str) -> None:
    # A scalar source (and a matrix one) that nothing reads is loaded and lowered like any other (a KeyError
    # in the lowering for the scalar before, found by running text mutants of examples/svm.fuse).
    (tmp_path / "b.json").write_text("0.3")
    np.save(tmp_path / "m.npy", FLOATS)
    src = 'b = "b.json"\nM[i, j] = "m.npy"\nY[i] = X[i] 2\nexport Y\n'
    got = Program(src, base_dir=tmp_path).compile(backend)(X=np.array([1.0, 2.0]))
    np.testing.assert_array_equal(got["Y"], [2.0, 4.0])


# --- round trips ---------------------------------------------------------------


@pytest.mark.parametrize("ext", ["npy", "npz"])
@pytest.mark.parametrize("value", [FLOATS, INTS, BOOLS, np.float32(1.5), np.zeros((0, 3))])
def test_binary_round_trip_keeps_dtype_and_shape(tmp_path: Path, ext: str, value: np.ndarray) -> None:
    value = np.asarray(value)
    written = write_sink(f"out/x.{ext}", value, tmp_path)
    assert written == tmp_path.resolve() / "out" / f"x.{ext}"
    back = load_source(f"out/x.{ext}", tmp_path)
    assert back.dtype == value.dtype and back.shape == value.shape
    np.testing.assert_array_equal(back, value)
    assert source_signature(f"out/x.{ext}", tmp_path) == (value.dtype, value.shape)


def test_npz_sink_uses_name(tmp_path: Path) -> None:
    write_sink("y.npz", FLOATS, tmp_path, name="Y")
    with np.load(tmp_path / "y.npz") as npz:
        assert npz.files == ["Y"]


@pytest.mark.parametrize("value", [FLOATS, INTS, np.array(2.5), np.array(7), np.zeros((2, 0))])
def test_json_round_trip(tmp_path: Path, value: np.ndarray) -> None:
    write_sink("x.json", value, tmp_path)
    back = load_source("x.json", tmp_path)
    assert back.shape == value.shape
    assert back.dtype == (np.float64 if value.dtype.kind == "f" or value.size == 0 else np.int64)
    np.testing.assert_array_equal(back, value)


def test_json_bool_array_round_trips_as_int8(tmp_path: Path) -> None:
    write_sink("b.json", BOOLS.astype(bool), tmp_path)
    assert json.loads((tmp_path / "b.json").read_text())[0] == [False, True, False]
    back = load_source("b.json", tmp_path)
    assert back.dtype == np.int8
    np.testing.assert_array_equal(back, BOOLS)


def test_json_dict_sink_is_an_object_of_lists(tmp_path: Path) -> None:
    write_sink("t.json", {"indices": np.array([[2, 0]]), "values": np.array([[0.75, 0.25]])}, tmp_path)
    assert json.loads((tmp_path / "t.json").read_text()) == {"indices": [[2, 0]], "values": [[0.75, 0.25]]}


@pytest.mark.parametrize("ext", ["csv", "tsv"])
def test_facts_round_trip_boolean(tmp_path: Path, ext: str) -> None:
    write_sink(f"f.{ext}", BOOLS, tmp_path)
    text = (tmp_path / f"f.{ext}").read_text()
    sep = "\t" if ext == "tsv" else ","
    rows = [line for line in text.splitlines() if not line.startswith("#")]
    assert rows == [f"0{sep}1", f"1{sep}0", f"1{sep}1"]  # no header: plain facts
    back = load_source(f"f.{ext}", tmp_path, rank=2)
    assert back.dtype == np.int8
    # The all-zero last row survives through the "# shape:" comment.
    np.testing.assert_array_equal(back, BOOLS)


@pytest.mark.parametrize("ext", ["csv", "tsv"])
def test_facts_round_trip_values(tmp_path: Path, ext: str) -> None:
    write_sink(f"v.{ext}", FLOATS, tmp_path)
    for rank in (2, None):
        back = load_source(f"v.{ext}", tmp_path, rank=rank)
        assert back.dtype == np.float64
        np.testing.assert_array_equal(back, FLOATS)


def test_facts_round_trip_scalar_and_empty(tmp_path: Path) -> None:
    write_sink("s.csv", np.array(4.5), tmp_path)
    assert load_source("s.csv", tmp_path, rank=0) == 4.5
    write_sink("z.csv", np.zeros((2, 3), dtype=np.int8), tmp_path)
    back = load_source("z.csv", tmp_path)
    assert back.shape == (2, 3) and not back.any()


def test_jsonl_rows(tmp_path: Path) -> None:
    write_sink("r.jsonl", FLOATS, tmp_path)
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    np.testing.assert_array_equal(np.array([json.loads(line) for line in lines]), FLOATS)


def test_jsonl_dict_zips_rows(tmp_path: Path) -> None:
    value = {"indices": np.array([[1, 0], [2, 1]]), "values": np.array([[0.9, 0.1], [0.6, 0.3]])}
    write_sink("topk.jsonl", value, tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "topk.jsonl").read_text().splitlines()]
    assert lines == [{"indices": [1, 0], "values": [0.9, 0.1]}, {"indices": [2, 1], "values": [0.6, 0.3]}]
    with pytest.raises(FuseError, match="different numbers of rows"):
        write_sink("bad.jsonl", {"a": np.zeros(2), "b": np.zeros(3)}, tmp_path)


def test_npz_dict_sink_each_key(tmp_path: Path) -> None:
    value = {"indices": np.array([[1, 0]]), "values": np.array([[0.9, 0.1]])}
    write_sink("topk.npz", value, tmp_path)
    with np.load(tmp_path / "topk.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == ["indices", "values"]
        np.testing.assert_array_equal(npz["values"], value["values"])


def test_dict_into_single_array_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FuseError, match="several"):
        write_sink("t.npy", {"a": np.zeros(2), "b": np.ones(2)}, tmp_path)


def test_safetensors_round_trip(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({"w": FLOATS.astype(np.float32)}, str(tmp_path / "w.safetensors"))
    back = load_source("w.safetensors", tmp_path, rank=2)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, FLOATS.astype(np.float32))
    st.save_file({"a": np.zeros(2), "b": np.ones(2)}, str(tmp_path / "two.safetensors"))
    with pytest.raises(FuseError, match=r"a, b"):
        load_source("two.safetensors", tmp_path)


def test_safetensors_missing_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "w.safetensors").write_bytes(b"\x00" * 16)
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(FuseError, match="pip install safetensors"):
        load_source("w.safetensors", tmp_path)


# --- .npy / .npz ---------------------------------------------------------------


def test_pickled_npy_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(FuseError, match="pickles are refused"):
        load_source("obj.npy", tmp_path)
    with pytest.raises(FuseError, match="pickles are refused"):
        source_signature("obj.npy", tmp_path)


def test_plain_pickle_named_npy_is_refused(tmp_path: Path) -> None:
    import pickle

    (tmp_path / "p.npy").write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(FuseError, match="pickles are refused"):
        load_source("p.npy", tmp_path)


def test_pickled_npz_member_is_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "obj.npz", np.array([{"a": 1}], dtype=object))
    with pytest.raises(FuseError, match="pickles are refused"):
        load_source("obj.npz", tmp_path)


def test_npz_several_arrays(tmp_path: Path) -> None:
    np.savez(tmp_path / "pos.npz", FLOATS, INTS)  # arr_0, arr_1
    np.testing.assert_array_equal(load_source("pos.npz", tmp_path), FLOATS)
    assert source_signature("pos.npz", tmp_path) == (FLOATS.dtype, FLOATS.shape)
    np.savez(tmp_path / "named.npz", w=FLOATS, b=INTS)
    with pytest.raises(FuseError, match=r"several arrays \(b, w\)"):
        load_source("named.npz", tmp_path)
    np.savez(tmp_path / "one.npz", weights=INTS)
    np.testing.assert_array_equal(load_source("one.npz", tmp_path), INTS)


def test_bool_and_big_endian_npy_are_normalised(tmp_path: Path) -> None:
    np.save(tmp_path / "b.npy", np.array([True, False]))
    back = load_source("b.npy", tmp_path)
    assert back.dtype == np.int8 and back.tolist() == [1, 0]
    np.save(tmp_path / "be.npy", np.arange(3, dtype=">f4"))
    back = load_source("be.npy", tmp_path)
    assert back.dtype == np.float32 and back.dtype.isnative


def test_non_numeric_npy_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "s.npy", np.array(["a", "b"]))
    with pytest.raises(FuseError, match="not a numeric"):
        load_source("s.npy", tmp_path)


# --- .json ---------------------------------------------------------------------


def test_json_dtypes(tmp_path: Path) -> None:
    cases = {"[1, 2]": np.int64, "[1, 2.5]": np.float64, "[true, false]": np.int8, "3": np.int64, "[]": np.float64}
    for text, dtype in cases.items():
        (tmp_path / "x.json").write_text(text)
        assert load_source("x.json", tmp_path).dtype == dtype, text


def test_json_object_with_dtype(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"data": [[1, 2], [3, 4]], "dtype": "float32"}')
    back = load_source("x.json", tmp_path, rank=2)
    assert back.dtype == np.float32 and back.tolist() == [[1, 2], [3, 4]]
    (tmp_path / "y.json").write_text('{"data": [1.5], "dtype": "int32"}')
    with pytest.raises(FuseError, match="do not fit dtype int32"):
        load_source("y.json", tmp_path)
    (tmp_path / "z.json").write_text('{"weights": [1]}')
    with pytest.raises(FuseError, match='"data" key'):
        load_source("z.json", tmp_path)


@pytest.mark.parametrize("text", ["[[1, 2], [3]]", "[[1, 2], 3]", '[1, "a"]', "[1, null]"])
def test_json_ragged_or_non_numeric(tmp_path: Path, text: str) -> None:
    (tmp_path / "x.json").write_text(text)
    with pytest.raises(FuseError, match="ragged|not a number"):
        load_source("x.json", tmp_path)


def test_json_syntax_error_is_located_in_the_file(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("[[1, 2],\n [3,]]")
    with pytest.raises(FuseError) as info:
        load_source("x.json", tmp_path)
    assert info.value.loc is not None and info.value.loc.line == 2


# --- .csv / .tsv facts ---------------------------------------------------------


def test_facts_with_header_comments_and_blank_lines(tmp_path: Path) -> None:
    (tmp_path / "parent.csv").write_text("# parent, child\nparent,child\n0,1\n\n1,2  # inline\n 1 , 3 \n0,1\n")
    back = load_source("parent.csv", tmp_path, rank=2)
    assert back.dtype == np.int8 and back.shape == (2, 4)
    assert sorted(map(tuple, np.argwhere(back).tolist())) == [(0, 1), (1, 2), (1, 3)]


def test_tsv_facts(tmp_path: Path) -> None:
    (tmp_path / "e.tsv").write_text("0\t2\n3\t0\n")
    back = load_source("e.tsv", tmp_path)
    assert back.shape == (4, 3) and back[0, 2] == 1 and back[3, 0] == 1 and back.sum() == 2


def test_facts_value_column_when_rank_given(tmp_path: Path) -> None:
    (tmp_path / "w.csv").write_text("0,0,0.5\n1,2,-3\n")
    back = load_source("w.csv", tmp_path, rank=2)
    assert back.dtype == np.float64 and back.shape == (2, 3)
    assert back[0, 0] == 0.5 and back[1, 2] == -3.0
    # Without a rank, the same file is three coordinate columns... which are not all integers.
    with pytest.raises(FuseError, match="not an integer"):
        load_source("w.csv", tmp_path)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("0,1\n1,2\n2,-1\n", 3, "negative"),
        ("0,1\n# c\n1,2.5\n", 3, "not an integer"),
        ("a,b\n0,1\n1,x\n", 3, "not an integer"),
        ("0,1\n1,2,3\n", 2, "columns"),
        ("0,1\n,2\n", 2, "empty"),
    ],
)
def test_bad_fact_row_names_the_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    (tmp_path / "f.csv").write_text(text)
    register_source("prog.fuse", 'A(x, y) = "f.csv"\n')
    stmt = Loc("prog.fuse", 1, 11, 7)
    with pytest.raises(FuseError, match=message) as info:
        load_source("f.csv", tmp_path, loc=stmt)
    err = info.value
    assert err.loc is not None and err.loc.line == line
    rendered = str(err)
    assert f"f.csv:{line}:" in rendered
    assert "prog.fuse:1:11: note" in rendered  # the source statement is named too


def test_facts_rank_mismatch(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("0,1,2,3\n")
    with pytest.raises(FuseError, match="used with 2 indices"):
        load_source("f.csv", tmp_path, rank=2)


def test_facts_conflicting_values(tmp_path: Path) -> None:
    (tmp_path / "w.csv").write_text("0,1.0\n0,2.0\n")
    with pytest.raises(FuseError, match="two values"):
        load_source("w.csv", tmp_path, rank=1)


def test_empty_facts_need_a_rank(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text("# nothing yet\n")
    assert load_source("e.csv", tmp_path, rank=2).shape == (0, 0)
    with pytest.raises(FuseError, match="rank is unknown"):
        load_source("e.csv", tmp_path)


# --- .txt ----------------------------------------------------------------------


def test_txt_bag_of_words(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_text("The cat saw the DOG.\n\tthe cat")
    back = load_source("doc.txt", tmp_path, rank=1)
    # Vocabulary, sorted: cat, dog., saw, the
    assert back.dtype == np.float64 and back.tolist() == [2.0, 1.0, 1.0, 3.0]
    (tmp_path / "empty.txt").write_text("  \n")
    assert load_source("empty.txt", tmp_path).shape == (0,)


# --- generic source errors -----------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FuseError) as info:
        load_source("x.npy", tmp_path)
    expected = f"cannot read source 'x.npy': no such file (resolved to {tmp_path.resolve() / 'x.npy'})"
    assert info.value.message == expected


def test_unknown_source_extension(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(b"")
    with pytest.raises(FuseError, match=r"unsupported.*\.npy, \.npz, \.json"):
        load_source("w.bin", tmp_path)


def test_rank_mismatch(tmp_path: Path) -> None:
    np.save(tmp_path / "w.npy", np.zeros((2, 3, 4)))
    loc = Loc("prog.fuse", 3, 1, 1)
    with pytest.raises(FuseError, match="source W has rank 3 but is used with 2 indices") as info:
        load_source("w.npy", tmp_path, rank=2, loc=loc, name="W")
    assert info.value.loc == loc
    assert load_source("w.npy", tmp_path, rank=3).shape == (2, 3, 4)


# --- sink paths ------------------------------------------------------------------


def test_sink_missing_folders_are_created(tmp_path: Path) -> None:
    root = tmp_path / "out"
    written = write_sink("a/b/c/y.npy", np.ones(2), root)
    assert written == root.resolve() / "a" / "b" / "c" / "y.npy"
    assert written.is_file()


@pytest.mark.parametrize("path", ["../x.npy", "a/../../x.npy"])
def test_sink_dotdot_escape_refused(tmp_path: Path, path: str) -> None:
    root = tmp_path / "out"
    with pytest.raises(FuseError, match=f"sink path '{path}' escapes the output root {root.resolve()}"):
        write_sink(path, np.ones(2), root)
    assert not (tmp_path / "x.npy").exists()


def test_sink_absolute_outside_refused_inside_allowed(tmp_path: Path) -> None:
    root = tmp_path / "out"
    outside = tmp_path / "elsewhere.npy"
    with pytest.raises(FuseError, match="escapes the output root"):
        write_sink(str(outside), np.ones(2), root)
    inside = root / "ok.npy"
    assert write_sink(str(inside), np.ones(2), root) == inside.resolve()


def test_sink_symlink_out_refused(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    target = tmp_path / "victim"
    target.mkdir()
    os.symlink(target, root / "link")
    with pytest.raises(FuseError, match="escapes the output root"):
        write_sink("link/x.npy", np.ones(2), root)
    os.symlink(target / "file.npy", root / "file.npy")  # a dangling link to a file outside
    with pytest.raises(FuseError, match="escapes the output root"):
        write_sink("file.npy", np.ones(2), root)
    assert list(target.iterdir()) == []


def test_sink_root_itself_refused(tmp_path: Path) -> None:
    with pytest.raises(FuseError, match="output root"):
        resolve_sink_path(".", tmp_path)


def test_unknown_sink_extension(tmp_path: Path) -> None:
    with pytest.raises(FuseError, match=r"unsupported.*\.npy, \.npz, \.json, \.jsonl"):
        write_sink("y.parquet", np.ones(2), tmp_path)


def test_sink_write_is_atomic_and_replaces(tmp_path: Path) -> None:
    write_sink("y.npy", np.zeros(3), tmp_path)
    write_sink("y.npy", np.ones(3), tmp_path)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.ones(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.npy"]  # no temp files left behind


def test_failed_sink_write_leaves_old_file_and_no_temp(tmp_path: Path) -> None:
    write_sink("y.json", np.zeros(2), tmp_path)
    with pytest.raises(FuseError, match="complex"):
        write_sink("y.json", np.ones(2, dtype=complex), tmp_path)
    assert json.loads((tmp_path / "y.json").read_text()) == [0.0, 0.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.json"]


def test_object_sink_refused(tmp_path: Path) -> None:
    with pytest.raises(FuseError, match="not a numeric"):
        write_sink("y.npy", np.array([{"a": 1}], dtype=object), tmp_path)


# --- coordinate sources are bounded; odd paths are located errors --------------------------------------------

LOC = Loc("prog.fuse", 1, 1, 1)


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("0\t1\n4000000000\t2\n", 2, "coordinate 4000000000 is too large"),
        ("1\t2\n99999999999999999999999999\t1\n", 2, "is too large"),
        ("# shape: 100000,100000\n1\t2\n", 1, "the '# shape:' comment asks for 10,000,000,000 elements"),
        ("3\t5\n70000\t1\n3\t60000\n", 2, "coordinate 70000 makes the tensor 70001 x 60001"),
    ],
)
def test_coordinate_source_is_bounded(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    """One large coordinate would make a dense tensor of gigabytes: a located error naming the file and line,
    never a MemoryError."""
    (tmp_path / "facts.tsv").write_text(text)
    with pytest.raises(FuseError) as e:
        load_source("facts.tsv", tmp_path, rank=2, loc=LOC)
    assert fragment in e.value.message
    assert "facts.tsv" in e.value.message
    assert e.value.loc is not None and e.value.loc.file.endswith("facts.tsv") and e.value.loc.line == line


@pytest.mark.parametrize(
    "path, fragment",
    [
        ("a\0b.npy", "NUL character"),
        ("x" * 5000 + ".npy", "File name too long"),
        ("/proc/self/mem.npy", "no such file"),
        ("/dev/null.json", "no such file"),
    ],
)
def test_odd_source_paths_are_located_errors(tmp_path: Path, path: str, fragment: str) -> None:
    with pytest.raises(FuseError) as e:
        load_source(path, tmp_path, loc=LOC)
    assert fragment in e.value.message and e.value.loc == LOC


@pytest.mark.parametrize("path, fragment", [("a\0b.npy", "NUL character"), ("y" * 5000 + ".npy", "File name too")])
def test_odd_sink_paths_are_located_errors(tmp_path: Path, path: str, fragment: str) -> None:
    with pytest.raises(FuseError) as e:
        write_sink(path, np.ones(2), tmp_path, loc=LOC)
    assert fragment in e.value.message and e.value.loc == LOC
