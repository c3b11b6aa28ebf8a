"""Sources: reading the tensors that ``W[h,d] = "weights/w.npy"`` statements name.

Every format is read without pickle, and every problem with a file (missing,
unreadable, malformed, of the wrong rank) is a :class:`FuseError`, located at
the source statement when the caller passes its ``loc``; errors inside a
coordinate file (``.csv``/``.tsv``) are located at the offending row instead,
with the statement as a note.

Supported extensions: ``.npy``, ``.npz``, ``.json``, ``.csv``, ``.tsv``,
``.txt`` and ``.safetensors`` (the last only when the ``safetensors`` package
is installed).
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fuse_mlir.diagnostics import FuseError, Loc, register_source
from fuse_mlir.paths import checked_path, shown

SOURCE_EXTENSIONS: tuple[str, ...] = (".npy", ".npz", ".json", ".csv", ".tsv", ".txt", ".safetensors")
FACT_SUFFIXES: tuple[str, ...] = (".csv", ".tsv")
"""Coordinate (facts) files: a relation's tuples, whose dense tensor's extents are bounds, not constants."""

_NPY_MAGIC = b"\x93NUMPY"
# Dtype kinds a tensor may have: bool, signed/unsigned int, float, complex.
_NUMERIC_KINDS = "biufc"
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_SHAPE_RE = re.compile(r"#\s*shape\s*:\s*(.*)\Z", re.IGNORECASE)


def resolve_source_path(path: str, base_dir: Path) -> Path:
    """The absolute file a source path names: relative paths are taken against
    ``base_dir`` (the program file's folder), absolute paths as given."""
    return (Path(base_dir) / Path(path)).resolve()


def _notes(loc: Loc | None) -> list[tuple[str, Loc]]:
    """A note pointing at the source statement, for errors located inside a data file."""
    return [("in this source statement", loc)] if loc is not None and loc.line > 0 else []


def _open_check(path: str, base_dir: Path, loc: Loc | None) -> tuple[Path, str]:
    """Resolve ``path``, check that it is a readable file with a known extension,
    and return the resolved path and its lower-case extension."""
    if not path:
        raise FuseError("a source path must not be empty", loc)
    resolved = checked_path(path, base_dir, "source", loc)  # NUL or an over-long name: a FuseError
    ext = resolved.suffix.lower()
    if ext not in SOURCE_EXTENSIONS:
        kind = f"'{ext}'" if ext else "no extension"
        raise FuseError(
            f"cannot read source '{shown(path)}': unsupported file type ({kind}); supported: {', '.join(SOURCE_EXTENSIONS)}",
            loc,
        )
    try:
        exists, is_file = resolved.exists(), resolved.is_file()
    except (OSError, ValueError) as exc:
        raise FuseError(f"cannot read source '{shown(path)}': {getattr(exc, 'strerror', None) or exc}", loc) from None
    if not exists:
        raise FuseError(f"cannot read source '{shown(path)}': no such file (resolved to {shown(resolved)})", loc)
    if not is_file:
        raise FuseError(f"cannot read source '{shown(path)}': not a regular file (resolved to {shown(resolved)})", loc)
    return resolved, ext


def _finish(arr: np.ndarray, path: str, loc: Loc | None) -> np.ndarray:
    """Check that a loaded array is numeric, and normalise it: booleans become
    int8 0/1 (the language's boolean type) and byte order becomes native."""
    if arr.dtype.kind not in _NUMERIC_KINDS or arr.dtype.fields is not None:
        raise FuseError(f"source '{path}' has dtype {arr.dtype}, which is not a numeric tensor type", loc)
    if arr.dtype.kind == "b":
        return arr.astype(np.int8)
    if not arr.dtype.isnative:
        return arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _check_rank(arr: np.ndarray, path: str, rank: int | None, name: str | None, loc: Loc | None) -> None:
    """Raise when the array's rank differs from the number of indices it is used with."""
    if rank is not None and arr.ndim != rank:
        who = name if name else f"'{path}'"
        raise FuseError(f"source {who} has rank {arr.ndim} but is used with {rank} indices", loc)


def load_source(
    path: str,
    base_dir: Path,
    *,
    rank: int | None = None,
    loc: Loc | None = None,
    name: str | None = None,
) -> np.ndarray:
    """Read the tensor in file ``path`` (resolved against ``base_dir``), by extension.

    ``rank``, when given, is the number of indices the source is used with; a
    loaded array of another rank is an error (naming the tensor ``name`` when
    given), and for ``.csv``/``.tsv`` it decides whether a last extra column
    holds values. ``loc`` is the source statement's location, for errors.
    """
    resolved, ext = _open_check(path, base_dir, loc)
    try:
        arr = _READERS[ext](resolved, path, rank, loc)
    except FuseError:
        raise
    except UnicodeDecodeError as exc:
        raise FuseError(f"cannot read source '{path}': not UTF-8 text ({exc.reason} at byte {exc.start})", loc) from exc
    except OSError as exc:
        raise FuseError(f"cannot read source '{path}': {exc.strerror or exc} (resolved to {resolved})", loc) from exc
    arr = _finish(arr, path, loc)
    _check_rank(arr, path, rank, name, loc)
    return arr


def source_signature(path: str, base_dir: Path, *, loc: Loc | None = None) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """The (dtype, shape) that :func:`load_source` would give, read cheaply where
    the format allows (``.npy`` and ``.npz`` headers only); other formats are loaded."""
    resolved, ext = _open_check(path, base_dir, loc)
    try:
        if ext == ".npy":
            _check_npy_magic(resolved, path, loc)
            try:
                mm = np.load(resolved, mmap_mode="r", allow_pickle=False)
            except ValueError as exc:
                raise _npy_value_error(exc, path, loc) from exc
            dtype, shape = mm.dtype, tuple(mm.shape)
            del mm
            return _finish_dtype(dtype, path, loc), shape
        if ext == ".npz":
            sig = _npz_signature(resolved, path, loc)
            if sig is not None:
                return _finish_dtype(sig[0], path, loc), sig[1]
    except FuseError:
        raise
    except OSError as exc:
        raise FuseError(f"cannot read source '{path}': {exc.strerror or exc} (resolved to {resolved})", loc) from exc
    arr = load_source(path, base_dir, loc=loc)
    return arr.dtype, tuple(arr.shape)


def _finish_dtype(dtype: np.dtype[Any], path: str, loc: Loc | None) -> np.dtype[Any]:
    """The dtype :func:`_finish` would give an array of ``dtype``."""
    return _finish(np.empty(0, dtype=dtype), path, loc).dtype


# --- .npy / .npz -------------------------------------------------------------


def _check_npy_magic(resolved: Path, path: str, loc: Loc | None) -> None:
    """Refuse a ``.npy`` file that is not in NumPy's format (it could be a pickle)."""
    with open(resolved, "rb") as f:
        head = f.read(len(_NPY_MAGIC))
    if head != _NPY_MAGIC:
        raise FuseError(
            f"cannot read source '{path}': not a NumPy .npy file (if it is a pickle: pickles are refused)", loc
        )


def _npy_value_error(exc: ValueError, path: str, loc: Loc | None) -> FuseError:
    """Translate NumPy's refusal to load object arrays, or a malformed header."""
    if "pickle" in str(exc).lower() or "object" in str(exc).lower():
        return FuseError(
            f"cannot read source '{path}': it holds Python objects, which need pickle; pickles are refused", loc
        )
    return FuseError(f"cannot read source '{path}': malformed .npy file ({exc})", loc)


def _read_npy(resolved: Path, path: str, rank: int | None, loc: Loc | None) -> np.ndarray:
    """A ``.npy`` file, read strictly as NumPy format (no pickle, no zip sniffing)."""
    _check_npy_magic(resolved, path, loc)
    with open(resolved, "rb") as f:
        try:
            return np.lib.format.read_array(f, allow_pickle=False)
        except ValueError as exc:
            raise _npy_value_error(exc, path, loc) from exc


def _read_npz(resolved: Path, path: str, rank: int | None, loc: Loc | None) -> np.ndarray:
    """The single array of a ``.npz`` archive, or its ``arr_0`` when it has several."""
    if not zipfile.is_zipfile(resolved):
        raise FuseError(f"cannot read source '{path}': not a NumPy .npz archive", loc)
    try:
        with np.load(resolved, allow_pickle=False) as npz:
            key = _npz_key(list(npz.files), path, loc)
            return npz[key]
    except ValueError as exc:
        raise _npy_value_error(exc, path, loc) from exc
    except (zipfile.BadZipFile, EOFError) as exc:
        raise FuseError(f"cannot read source '{path}': malformed .npz archive ({exc})", loc) from exc


def _npz_key(keys: list[str], path: str, loc: Loc | None) -> str:
    """Which array of an archive is the source: the only one, else ``arr_0``."""
    if len(keys) == 1:
        return keys[0]
    if "arr_0" in keys:
        return "arr_0"
    if not keys:
        raise FuseError(f"cannot read source '{path}': the archive holds no arrays", loc)
    raise FuseError(
        f"cannot read source '{path}': the archive holds several arrays ({', '.join(sorted(keys))}) "
        "and none is named arr_0; save the one to use alone",
        loc,
    )


def _npz_signature(resolved: Path, path: str, loc: Loc | None) -> tuple[np.dtype[Any], tuple[int, ...]] | None:
    """Dtype and shape of an archive's source array from its member's header, or
    None when the header cannot be read that way (then the caller loads it)."""
    if not zipfile.is_zipfile(resolved):
        raise FuseError(f"cannot read source '{path}': not a NumPy .npz archive", loc)
    with zipfile.ZipFile(resolved) as zf:
        members = {n[: -len(".npy")] if n.endswith(".npy") else n: n for n in zf.namelist()}
        key = _npz_key(list(members), path, loc)
        with zf.open(members[key]) as f:
            try:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    return None
            except ValueError:
                return None
    if dtype.hasobject:
        raise FuseError(
            f"cannot read source '{path}': it holds Python objects, which need pickle; pickles are refused", loc
        )
    return dtype, tuple(shape)


# --- .json -------------------------------------------------------------------


def _json_shape(data: Any, where: str, path: str, loc: Loc | None) -> tuple[int, ...]:
    """The shape of a nested list of numbers; ragged lists and non-numbers are errors."""
    if isinstance(data, bool | int | float):
        return ()
    if not isinstance(data, list):
        what = "null" if data is None else type(data).__name__
        raise FuseError(f"cannot read source '{path}': {what} at {where or 'top level'} is not a number", loc)
    if not data:
        return (0,)
    shapes = [_json_shape(x, f"{where}[{i}]", path, loc) for i, x in enumerate(data)]
    for i, s in enumerate(shapes[1:], 1):
        if s != shapes[0]:
            raise FuseError(
                f"cannot read source '{path}': ragged nested list: {where}[{i}] has shape {s} "
                f"but {where}[0] has shape {shapes[0]}",
                loc,
            )
    return (len(data), *shapes[0])


def _json_leaves(data: Any) -> list[Any]:
    """The numbers of a nested list, in order."""
    if isinstance(data, list):
        out: list[Any] = []
        for x in data:
            out.extend(_json_leaves(x))
        return out
    return [data]


def _json_array(data: Any, path: str, loc: Loc | None) -> np.ndarray:
    """A nested list as an array: all booleans give int8, any float gives float64,
    else int64."""
    shape = _json_shape(data, "", path, loc)
    leaves = _json_leaves(data)
    if leaves and all(isinstance(x, bool) for x in leaves):
        dtype: type = np.int8
    elif any(isinstance(x, float) for x in leaves):
        dtype = np.float64
    elif leaves:
        dtype = np.int64
        big = [x for x in leaves if not -(2**63) <= x < 2**63]
        if big:
            raise FuseError(f"cannot read source '{path}': integer {big[0]} does not fit in int64", loc)
    else:
        dtype = np.float64
    return np.array(leaves, dtype=dtype).reshape(shape)


def _cast_checked(arr: np.ndarray, dtype_name: Any, path: str, loc: Loc | None) -> np.ndarray:
    """Cast to the dtype a JSON source asks for; integer targets must hold the
    values exactly (no silent truncation or wrap-around)."""
    try:
        dtype = np.dtype(dtype_name)
    except TypeError as exc:
        raise FuseError(f"cannot read source '{path}': unknown dtype {dtype_name!r}", loc) from exc
    if dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None:
        raise FuseError(f"cannot read source '{path}': dtype {dtype} is not a numeric tensor type", loc)
    if dtype.kind in "biu" and arr.size:
        if dtype.kind == "b":
            ok = bool(np.isin(arr, (0, 1)).all())
        else:
            info = np.iinfo(dtype)
            ok = bool(np.all(np.isfinite(arr) & (arr >= info.min) & (arr <= info.max) & (arr == np.trunc(arr))))
        if not ok:
            raise FuseError(f"cannot read source '{path}': its values do not fit dtype {dtype}", loc)
    return arr.astype(dtype)


def _read_json(resolved: Path, path: str, rank: int | None, loc: Loc | None) -> np.ndarray:
    """A number, a nested list, or ``{"data": [...], "dtype": "float32"}``."""
    text = resolved.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        register_source(str(resolved), text)
        raise FuseError(
            f"cannot read source '{path}': invalid JSON: {exc.msg}",
            Loc(str(resolved), exc.lineno, exc.colno),
            _notes(loc),
        ) from exc
    if isinstance(data, dict):
        allowed = {"data", "dtype", "shape"}
        if "data" not in data:
            keys = ", ".join(sorted(data)) or "none"
            raise FuseError(
                f"cannot read source '{path}': a JSON object source needs a \"data\" key (keys: {keys})", loc
            )
        extra = sorted(set(data) - allowed)
        if extra:
            raise FuseError(
                f"cannot read source '{path}': unknown keys {', '.join(extra)} (allowed: data, dtype, shape)", loc
            )
        arr = _json_array(data["data"], path, loc)
        if "shape" in data:
            shape = data["shape"]
            if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
                raise FuseError(f"cannot read source '{path}': \"shape\" must be a list of integers", loc)
            if math.prod(shape) != arr.size or any(n < 0 for n in shape):
                raise FuseError(f"cannot read source '{path}': \"shape\" {shape} does not fit {arr.size} values", loc)
            arr = arr.reshape(shape)
        if "dtype" in data:
            arr = _cast_checked(arr, data["dtype"], path, loc)
        return arr
    return _json_array(data, path, loc)


# --- .csv / .tsv -------------------------------------------------------------


def _fields(line: str, sep: str) -> list[tuple[str, int]]:
    """Split a row into (stripped field, 1-based column) pairs."""
    out = []
    start = 0
    for part in line.split(sep):
        lead = len(part) - len(part.lstrip())
        out.append((part.strip(), start + lead + 1))
        start += len(part) + len(sep)
    return out


def _is_number(text: str) -> bool:
    """Whether a field parses as a number."""
    try:
        float(text)
    except ValueError:
        return False
    return True


MAX_FACT_ELEMENTS = 1 << 30
"""Most elements of the dense tensor a ``.csv``/``.tsv`` coordinate source becomes (1 GiB as int8): the
extents come from the largest coordinates, so one stray large number must not allocate gigabytes."""
_FACT_LIMIT = f"more than the {MAX_FACT_ELEMENTS:,} a coordinate source may hold"


def _read_facts(resolved: Path, path: str, rank: int | None, loc: Loc | None) -> np.ndarray:
    """Integer coordinate facts, one per row: a boolean int8 tensor with 1 at each
    coordinate, or a float64 tensor when a last column holds values (when ``rank``
    is given and rows have rank+1 columns, or the header's last column is "value").

    The shape is one past the largest coordinate per column, unless a
    ``# shape: 3,4`` comment (as sinks write) gives it.
    """
    sep = "\t" if resolved.suffix.lower() == ".tsv" else ","
    text = resolved.read_text(encoding="utf-8")
    file = str(resolved)

    def fail(message: str, lineno: int, col: int = 1, length: int = 1) -> FuseError:
        register_source(file, text)
        return FuseError(f"in source '{path}': {message}", Loc(file, lineno, col, max(1, length)), _notes(loc))

    declared: tuple[int, ...] | None = None
    declared_line = 1
    header: list[str] | None = None
    rows: list[tuple[int, str, list[tuple[str, int]]]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        m = _SHAPE_RE.match(stripped)
        dims = [d for d in re.split(r"[\s,x]+", m.group(1)) if d] if m else []
        if m and all(_INT_RE.match(d) and int(d) >= 0 for d in dims):
            # "# shape: 3,4" fixes the extents; any other comment is just skipped.
            if declared is not None:
                raise fail("a second '# shape:' comment", lineno)
            declared = tuple(int(d) for d in dims)
            declared_line = lineno
            continue
        content = raw.split("#", 1)[0]
        if not content.strip():
            continue
        fields = _fields(content, sep)
        if header is None and not rows and not all(_is_number(f) for f, _ in fields):
            header = [f for f, _ in fields]
            continue
        rows.append((lineno, content, fields))

    ncols = len(header) if header is not None else (len(rows[0][2]) if rows else None)
    if ncols is None:
        if declared is not None:
            ncols = len(declared)
        elif rank is not None:
            ncols = rank
        else:
            raise fail("the file holds no facts, so its rank is unknown", 1)

    # Decide whether the last column holds values.
    if rank is not None:
        if ncols == rank:
            valued = False
        elif ncols == rank + 1:
            valued = True
        else:
            where = rows[0][0] if rows else 1
            raise fail(
                f"rows have {ncols} columns but the source is used with {rank} indices "
                f"(expected {rank} coordinate columns, optionally followed by a value column)",
                where,
            )
    elif declared is not None and ncols == len(declared) + 1:
        valued = True
    else:
        valued = header is not None and header[-1].lower() == "value"
    ncoord = ncols - 1 if valued else ncols
    if declared is not None and len(declared) != ncoord:
        raise fail(f"the '# shape:' comment has rank {len(declared)} but rows have {ncoord} coordinates", 1)

    coords = np.zeros((len(rows), ncoord), dtype=np.int64)
    values = np.ones(len(rows), dtype=np.float64)
    for r, (lineno, content, fields) in enumerate(rows):
        if len(fields) != ncols:
            raise fail(f"row has {len(fields)} columns, expected {ncols}", lineno, 1, len(content.rstrip()))
        for c, (field, col) in enumerate(fields[:ncoord]):
            if not field:
                raise fail("empty coordinate", lineno, col)
            if not _INT_RE.match(field):
                raise fail(f"coordinate {field!r} is not an integer", lineno, col, len(field))
            if len(field.lstrip("+0")) > 19 or int(field) > MAX_FACT_ELEMENTS:
                raise fail(
                    f"coordinate {field} is too large: a coordinate source becomes a dense tensor of at most "
                    f"{MAX_FACT_ELEMENTS:,} elements",
                    lineno,
                    col,
                    len(field),
                )
            v = int(field)
            if v < 0:
                raise fail(f"coordinate {field} is negative", lineno, col, len(field))
            if declared is not None and v >= declared[c]:
                raise fail(
                    f"coordinate {v} is out of range for the declared extent {declared[c]}", lineno, col, len(field)
                )
            coords[r, c] = v
        if valued:
            field, col = fields[ncoord]
            try:
                values[r] = float(field)
            except ValueError:
                raise fail(f"value {field!r} is not a number", lineno, col, len(field)) from None

    if declared is not None:
        shape = declared
    else:
        shape = tuple(int(n) for n in coords.max(axis=0) + 1) if rows else (0,) * ncoord
    if math.prod(shape) > MAX_FACT_ELEMENTS:
        if declared is not None:
            raise fail(f"the '# shape:' comment asks for {math.prod(shape):,} elements, {_FACT_LIMIT}", declared_line)
        column = max(range(ncoord), key=lambda c: shape[c])
        r = int(coords[:, column].argmax())
        field, col = rows[r][2][column]
        raise fail(
            f"coordinate {field} makes the tensor {' x '.join(map(str, shape))} = {math.prod(shape):,} elements, "
            f"{_FACT_LIMIT}",
            rows[r][0],
            col,
            len(field),
        )

    if not valued:
        out = np.zeros(shape, dtype=np.int8)
        if rows:
            out[tuple(coords.T)] = 1
        return out
    out = np.zeros(shape, dtype=np.float64)
    seen: dict[tuple[int, ...], int] = {}
    for r, (lineno, content, _) in enumerate(rows):
        key = tuple(coords[r].tolist())
        if (
            key in seen
            and values[seen[key]] != values[r]
            and not (math.isnan(values[r]) and math.isnan(values[seen[key]]))
        ):
            raise fail(
                f"coordinate {key} is given two values ({values[seen[key]]:g} on line {rows[seen[key]][0]} "
                f"and {values[r]:g})",
                lineno,
                1,
                len(content.rstrip()),
            )
        seen[key] = r
    if rows and ncoord == 0:
        out[()] = values[-1]
    elif rows:
        out[tuple(coords.T)] = values
    return out


# --- .txt / .safetensors -----------------------------------------------------


def _read_txt(resolved: Path, path: str, rank: int | None, loc: Loc | None) -> np.ndarray:
    """Bag of words: counts of whitespace-separated lower-case tokens, in sorted
    vocabulary order, as a 1-D float64 vector."""
    tokens = resolved.read_text(encoding="utf-8").lower().split()
    if not tokens:
        return np.zeros(0, dtype=np.float64)
    _, counts = np.unique(np.array(tokens), return_counts=True)
    return counts.astype(np.float64)


def _read_safetensors(resolved: Path, path: str, rank: int | None, loc: Loc | None) -> np.ndarray:
    """The single tensor of a ``.safetensors`` file (needs the ``safetensors`` package)."""
    try:
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise FuseError(
            f"cannot read source '{path}': reading .safetensors needs the safetensors package "
            "(pip install safetensors)",
            loc,
        ) from exc
    try:
        tensors = load_file(str(resolved))
    except Exception as exc:  # the package raises its own error types
        raise FuseError(f"cannot read source '{path}': malformed .safetensors file ({exc})", loc) from exc
    if len(tensors) != 1:
        names = ", ".join(sorted(tensors)) or "none"
        raise FuseError(
            f"cannot read source '{path}': it must hold exactly one tensor, but holds {len(tensors)} ({names})", loc
        )
    return next(iter(tensors.values()))


_READERS: dict[str, Callable[[Path, str, int | None, Loc | None], np.ndarray]] = {
    ".npy": _read_npy,
    ".npz": _read_npz,
    ".json": _read_json,
    ".csv": _read_facts,
    ".tsv": _read_facts,
    ".txt": _read_txt,
    ".safetensors": _read_safetensors,
}
