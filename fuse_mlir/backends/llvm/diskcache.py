"""The persistent compile cache: machine code and call tables of compiled programs, one file per key.

A key is the sha256 of everything the machine code depends on: the
tensor_eq module text, the backend options, the target (triple, CPU name and
features), the LLVM and llvmlite versions, and a digest of fuse_mlir's own
source files (so an edited or upgraded compiler never reuses old code).
An entry holds the relocatable object MCJIT produced and a JSON header with
what the runtime needs to call it (argument and result tables, errors, host
calls, constants), so a warm start skips every pass and all of LLVM.

File layout: ``FUSEKC01`` (8 bytes), the sha256 of the payload (32), the
payload length (8, little-endian), then the payload: a 4-byte header length,
the JSON header (which repeats the key) and the object code. A file that is
short, fails its checksum, carries another key, is not a regular file (a link, a FIFO, a
device) or is larger than ``MAX_ENTRY_BYTES`` is ignored (and rewritten
by the caller). Writes go to a temporary file in the same folder, renamed into
place: readers in other processes see a whole entry or none.

The folder is ``$FUSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/fuse_mlir``, else
``~/.cache/fuse_mlir``; an unwritable folder only means nothing is cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "code_version", "entry_path", "read_entry", "write_entry"]

MAGIC = b"FUSEKC01"
MAX_ENTRY_BYTES = 256 << 20
"""The largest entry read back (a kernel's object code is kilobytes): anything larger is treated as corrupt."""
_HEAD = struct.Struct("<8s32sQ")
_code_version: str | None = None


def cache_dir() -> Path:
    """The cache folder (read from the environment on every call, so tests and users can redirect it)."""
    env = os.environ.get("FUSE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "fuse_mlir"


def code_version() -> str:
    """A digest of fuse_mlir's Python sources (path, size, mtime), computed once per process.

    Any edit to the compiler changes it, so an entry never outlives the code
    that produced it; stat data keeps this to a millisecond or two.
    """
    global _code_version
    if _code_version is None:
        root = str(Path(__file__).resolve().parents[2])
        h = hashlib.sha256()
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
        for path in sorted(files):
            st = os.stat(path)
            h.update(f"{os.path.relpath(path, root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        _code_version = h.hexdigest()[:24]
    return _code_version


def entry_path(key: str, kind: str = "kernels") -> Path:
    """Where the entry for ``key`` lives (``kind``: ``kernels`` for programs, ``runtime`` for the runtime's own code)."""
    return cache_dir() / kind / f"{key}.bin"


def _read_bounded(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not a link, FIFO or device) of at most
    :data:`MAX_ENTRY_BYTES`; None otherwise. Checked before opening (``lstat``) and on the open file
    (``fstat``, opened without following links or blocking), and the read itself is bounded."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
                return None
            data = f.read(MAX_ENTRY_BYTES + 1)
    except (OSError, ValueError):
        return None
    return data if len(data) <= MAX_ENTRY_BYTES else None


def read_entry(key: str, kind: str = "kernels") -> tuple[dict[str, Any], bytes] | None:
    """The (header, object code) stored for ``key``, or None when absent, truncated, corrupt or for another key."""
    data = _read_bounded(entry_path(key, kind))
    if data is None or len(data) < _HEAD.size:
        return None
    magic, digest, length = _HEAD.unpack_from(data)
    payload = data[_HEAD.size :]
    if magic != MAGIC or length != len(payload) or hashlib.sha256(payload).digest() != digest or length < 4:
        return None
    (n_header,) = struct.unpack_from("<I", payload)
    try:
        header = json.loads(payload[4 : 4 + n_header].decode())
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("key") != key:
        return None
    return header, payload[4 + n_header :]


def write_entry(key: str, header: dict[str, Any], obj: bytes, kind: str = "kernels") -> bool:
    """Store an entry atomically (temporary file + rename); False when the folder cannot be written."""
    blob = json.dumps({**header, "key": key}, sort_keys=True).encode()
    payload = struct.pack("<I", len(blob)) + blob + obj
    data = _HEAD.pack(MAGIC, hashlib.sha256(payload).digest(), len(payload)) + payload
    path = entry_path(key, kind)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True
