"""Sinks: writing the values that ``"out/y.npz" = Y[i,j]`` statements name.

Sink paths are relative to a configurable output root, and a path that
escapes it (``..``, an absolute path elsewhere, a symlink pointing out) is
refused, so a program cannot overwrite arbitrary files. Writes are atomic: a
reader sees the old file or the complete new one, never a partial write.

Supported extensions: ``.npy``, ``.npz``, ``.json``, ``.jsonl``, ``.csv``, ``.tsv``.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.paths import path_problem, shown

SINK_EXTENSIONS: tuple[str, ...] = (".npy", ".npz", ".json", ".jsonl", ".csv", ".tsv")

Value = np.ndarray | Mapping[str, Any] | float | int | bool


def resolve_sink_path(path: str, out_root: Path, *, loc: Loc | None = None) -> Path:
    """The absolute file a sink path names under ``out_root``, with its missing
    folders created; a path that escapes the root is an error, and so is one the
    system refuses (a NUL character, an over-long name)."""
    if not path:
        raise FuseError("a sink path must not be empty", loc)
    try:
        if "\0" in path or "\0" in os.fspath(out_root):
            raise ValueError("embedded null byte")
        return _resolve_sink_path(path, out_root, loc)
    except (OSError, ValueError, RuntimeError) as exc:
        raise FuseError(f"cannot write sink '{shown(path)}': {path_problem(exc)}", loc) from None


def _resolve_sink_path(path: str, out_root: Path, loc: Loc | None) -> Path:
    root = Path(out_root).resolve()
    target = (root / Path(path)).resolve()
    if not target.is_relative_to(root):
        raise FuseError(f"sink path '{path}' escapes the output root {root}", loc)
    if target == root:
        raise FuseError(f"sink path '{path}' names the output root {root} itself, not a file in it", loc)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FuseError(f"cannot create the folder for sink '{path}': {exc.strerror or exc}", loc) from exc
    # Check again: a component may have been a dangling symlink that mkdir followed.
    if not target.parent.resolve().is_relative_to(root):
        raise FuseError(f"sink path '{path}' escapes the output root {root}", loc)
    if target.is_dir():
        raise FuseError(f"cannot write sink '{path}': {target} is a folder", loc)
    return target


def write_sink(path: str, value: Value, out_root: Path, *, name: str = "value", loc: Loc | None = None) -> Path:
    """Write ``value`` (an array, a scalar, or a dict of named arrays such as
    topk's indices and values) to ``path`` under ``out_root``, by extension.
    ``name`` is the key a single array gets in an ``.npz``. Returns the file written."""
    ext = Path(path).suffix.lower()
    if ext not in SINK_EXTENSIONS:
        kind = f"'{ext}'" if ext else "no extension"
        raise FuseError(
            f"cannot write sink '{path}': unsupported file type ({kind}); supported: {', '.join(SINK_EXTENSIONS)}",
            loc,
        )
    target = resolve_sink_path(path, out_root, loc=loc)
    data = _normalise(value, path, loc)
    writer = _WRITERS[ext]
    _atomic_write(target, lambda f: writer(f, data, path, name, loc), path, loc)
    return target


def _normalise(value: Value, path: str, loc: Loc | None) -> np.ndarray | dict[str, np.ndarray]:
    """Arrays of numbers, refusing Python objects (which only pickle could store)."""
    if isinstance(value, Mapping):
        if not value:
            raise FuseError(f"cannot write sink '{path}': no values to write", loc)
        return {str(k): _as_array(v, path, loc) for k, v in value.items()}
    return _as_array(value, path, loc)


def _as_array(value: Any, path: str, loc: Loc | None) -> np.ndarray:
    """One value as a numeric array."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biufc" or arr.dtype.fields is not None:
        raise FuseError(f"cannot write sink '{path}': dtype {arr.dtype} is not a numeric tensor type", loc)
    return arr


def _single(data: np.ndarray | dict[str, np.ndarray], path: str, loc: Loc | None) -> np.ndarray:
    """The one array a single-array format holds."""
    if isinstance(data, dict):
        if len(data) == 1:
            return next(iter(data.values()))
        raise FuseError(
            f"cannot write sink '{path}': it holds one array but the value has several "
            f"({', '.join(data)}); use .npz, .json or .jsonl",
            loc,
        )
    return data


# --- writers: each writes the file's bytes to an open binary file --------------


def _write_npy(f: IO[bytes], data: np.ndarray | dict[str, np.ndarray], path: str, name: str, loc: Loc | None) -> None:
    """NumPy format, without pickle."""
    np.lib.format.write_array(f, _single(data, path, loc), allow_pickle=False)


def _write_npz(f: IO[bytes], data: np.ndarray | dict[str, np.ndarray], path: str, name: str, loc: Loc | None) -> None:
    """An archive: a single array under ``name``, or each array of a dict under its
    key (written member by member, as ``np.savez`` does, without pickle)."""
    arrays = data if isinstance(data, dict) else {name: data}
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            with zf.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


def _to_json(arr: np.ndarray, path: str, loc: Loc | None) -> Any:
    """Nested lists of Python numbers (a bool array gives true/false, which loads back as int8)."""
    if arr.dtype.kind == "c":
        raise FuseError(f"cannot write sink '{path}': complex values need .npy or .npz", loc)
    return arr.tolist()


def _write_text(f: IO[bytes], lines: Iterable[str]) -> None:
    """Lines of UTF-8 text, each ended by a newline."""
    for line in lines:
        f.write(line.encode())
        f.write(b"\n")


def _write_json(f: IO[bytes], data: np.ndarray | dict[str, np.ndarray], path: str, name: str, loc: Loc | None) -> None:
    """Nested lists; a dict becomes a JSON object of nested lists."""
    if isinstance(data, dict):
        obj: Any = {k: _to_json(v, path, loc) for k, v in data.items()}
    else:
        obj = _to_json(data, path, loc)
    _write_text(f, [json.dumps(obj)])


def _write_jsonl(f: IO[bytes], data: np.ndarray | dict[str, np.ndarray], path: str, name: str, loc: Loc | None) -> None:
    """One JSON line per leading-axis row; for a dict, each line is an object
    holding that row of every entry (the entries must have equally many rows)."""
    if isinstance(data, dict):
        lengths = {}
        for k, v in data.items():
            if v.ndim == 0:
                raise FuseError(f"cannot write sink '{path}': entry '{k}' is a scalar and has no rows", loc)
            lengths[k] = v.shape[0]
        if len(set(lengths.values())) > 1:
            counts = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise FuseError(f"cannot write sink '{path}': entries have different numbers of rows ({counts})", loc)
        cols = {k: _to_json(v, path, loc) for k, v in data.items()}
        n = next(iter(lengths.values()))
        _write_text(f, (json.dumps({k: rows[i] for k, rows in cols.items()}) for i in range(n)))
    else:
        rows = _to_json(data, path, loc)
        _write_text(f, (json.dumps(r) for r in rows) if data.ndim else [json.dumps(rows)])


def _format_value(x: Any) -> str:
    """A number as text that reads back exactly."""
    return repr(float(x)) if isinstance(x, float) else str(x)


def _write_facts(f: IO[bytes], data: np.ndarray | dict[str, np.ndarray], path: str, name: str, loc: Loc | None) -> None:
    """Coordinates of the non-zeros, one per line, after a ``# shape:`` comment.

    A 0/1-valued array is written as bare facts (no header), which load back as
    a boolean tensor; any other array (and any scalar) gets a header
    ``i0,...,value`` and the value as a last column, which loads back as float64.
    """
    arr = _single(data, path, loc)
    if arr.dtype.kind == "c":
        raise FuseError(f"cannot write sink '{path}': complex values need .npy or .npz", loc)
    sep = "\t" if path.lower().endswith(".tsv") else ","
    boolean = arr.ndim > 0 and bool(np.isin(arr, (0, 1)).all())
    head = [f"# shape: {','.join(str(n) for n in arr.shape)}"]
    if not boolean:
        head.append(sep.join([*(f"i{k}" for k in range(arr.ndim)), "value"]))
    _write_text(f, head)
    if arr.ndim == 0:
        if arr != 0:
            _write_text(f, [_format_value(arr.item())])
        return
    nz = np.argwhere(arr != 0)
    if boolean:
        _write_text(f, (sep.join(map(str, coord)) for coord in nz.tolist()))
    else:
        values = arr[tuple(nz.T)].tolist()
        _write_text(f, (sep.join([*map(str, c), _format_value(v)]) for c, v in zip(nz.tolist(), values)))


_WRITERS: dict[str, Callable[[IO[bytes], np.ndarray | dict[str, np.ndarray], str, str, Loc | None], None]] = {
    ".npy": _write_npy,
    ".npz": _write_npz,
    ".json": _write_json,
    ".jsonl": _write_jsonl,
    ".csv": _write_facts,
    ".tsv": _write_facts,
}


# --- atomic replacement --------------------------------------------------------


def _file_mode(target: Path) -> int:
    """The permission bits the new file gets: the old file's, else the umask's default."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _atomic_write(target: Path, write: Callable[[IO[bytes]], None], path: str, loc: Loc | None) -> None:
    """Write to a temporary file in the target's folder, then rename it over the
    target, so that the target is never seen half-written."""
    mode = _file_mode(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise FuseError(f"cannot write sink '{path}': {exc.strerror or exc}", loc) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise FuseError(f"cannot write sink '{path}': {exc.strerror or exc}", loc) from exc
        raise
