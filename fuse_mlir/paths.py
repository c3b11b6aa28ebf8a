"""Checked file access for the front door: program files, imports and source data named by users.

A path from a user (a command-line argument, ``Program.from_file``, an
``import`` or a source statement) may be anything: it can hold a NUL
character or be thousands of characters long (Python raises ``ValueError`` or
``OSError`` for those), or name something that is not a text file at all
(``/proc/self/mem``, a FIFO that blocks forever, ``/dev/zero`` that never
ends). Everything here turns such a path into a :class:`FuseError` that names
it and says what is wrong, and reads files with a size bound.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fuse_mlir.diagnostics import FuseError, Loc

__all__ = ["MAX_TEXT_BYTES", "checked_path", "path_problem", "read_text_file", "shown"]

MAX_TEXT_BYTES = 64 << 20
"""The largest program or text data file read (64 MiB): a larger one is refused, never read into memory."""


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` as quoted in a message: its repr with anything unprintable escaped, long ones cut short."""
    text = os.fspath(path)
    text = text if len(text) <= 80 else f"{text[:60]}...{text[-12:]} ({len(text)} characters)"
    return repr(text)[1:-1] if not text.isprintable() else text


def path_problem(exc: BaseException) -> str:
    """What an ``OSError`` or ``ValueError`` from a path operation says is wrong, for a message."""
    if isinstance(exc, ValueError):
        return "the path contains a NUL character" if "null" in str(exc).lower() else f"bad path ({exc})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def checked_path(path: str | os.PathLike[str], base_dir: Path | None, what: str, loc: Loc | None = None) -> Path:
    """The absolute path ``path`` names (relative paths taken against ``base_dir``), with symlinks resolved;
    a NUL character, an over-long name or any other error resolving it is a :class:`FuseError`."""
    try:
        raw = os.fspath(path)
        if "\0" in raw:
            raise ValueError("embedded null byte")
        p = Path(raw)
        return ((base_dir / p) if base_dir is not None else p).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a symlink loop on older Pythons
        head = f"cannot read {what} '{shown(path)}'" if what else f"cannot read '{shown(path)}'"
        raise FuseError(f"{head}: {path_problem(exc)}", loc) from None


def read_text_file(path: str | os.PathLike[str], what: str, loc: Loc | None = None) -> str:
    """The UTF-8 text of the regular file ``path``, at most :data:`MAX_TEXT_BYTES`; anything else is a
    :class:`FuseError` naming the path (opened without blocking, so a FIFO is refused rather than waited on)."""
    head = f"cannot read {what} '{shown(path)}'" if what else f"cannot read '{shown(path)}'"
    try:
        raw = os.fspath(path)
        if "\0" in raw:
            raise ValueError("embedded null byte")
        fd = os.open(raw, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise FuseError(f"{head}: it is a folder", loc)
            if not stat.S_ISREG(st.st_mode):
                raise FuseError(f"{head}: not a regular file", loc)
            if st.st_size > MAX_TEXT_BYTES:
                raise FuseError(f"{head}: larger than {MAX_TEXT_BYTES >> 20} MiB", loc)
            data = f.read(MAX_TEXT_BYTES + 1)
    except (OSError, ValueError) as exc:
        if isinstance(exc, IsADirectoryError):
            raise FuseError(f"{head}: it is a folder", loc) from None
        if isinstance(exc, FileNotFoundError):
            raise FuseError(f"{head}: no such file", loc) from None
        raise FuseError(f"{head}: {path_problem(exc)}", loc) from None
    if len(data) > MAX_TEXT_BYTES:  # a file in /proc reports size 0 and may be endless
        raise FuseError(f"{head}: larger than {MAX_TEXT_BYTES >> 20} MiB", loc)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FuseError(f"{head}: not UTF-8 text ({exc.reason} at byte {exc.start})", loc) from None
