"""Located diagnostics: every user-facing error names file:line:col and shows a caret.

All program errors (syntax, names, extents, types, cycles) are raised as
:class:`FuseError`, which carries a :class:`Loc` and renders the offending
source line with a caret under the token, the way compilers do.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

MAX_SOURCES = 256
"""Files whose text is remembered for quoting (the most recently registered): a service compiling many
programs under distinct names must not keep every text; an error in an older one loses only its quoted line."""

_SOURCES: OrderedDict[str, str] = OrderedDict()
_SOURCES_LOCK = threading.Lock()


def register_source(filename: str, text: str) -> None:
    """Remember a file's text so that later diagnostics can quote its lines (the last MAX_SOURCES files)."""
    with _SOURCES_LOCK:
        _SOURCES[filename] = text
        _SOURCES.move_to_end(filename)
        while len(_SOURCES) > MAX_SOURCES:
            _SOURCES.popitem(last=False)


def source_line(filename: str, line: int) -> str | None:
    """The text of 1-based line ``line`` of a registered file, or None."""
    text = _SOURCES.get(filename)
    if text is None:
        return None
    lines = text.splitlines()
    if 1 <= line <= len(lines):
        return lines[line - 1]
    return None


#: The most columns of a source line a diagnostic shows: a longer line (a generated 5,000-term sum) is shown
#: as a window around the caret.
SHOWN_WIDTH = 160


@dataclass(frozen=True, slots=True)
class Loc:
    """A source position: file name, 1-based line and column, and token length."""

    file: str
    line: int
    col: int
    length: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def render(self) -> str:
        """The source line and a caret line under the token (empty if unknown)."""
        text = source_line(self.file, self.line)
        if text is None:
            return ""
        text = text.replace("\t", " ")
        col, cut_end = self.col - 1, False
        if len(text) > SHOWN_WIDTH:  # a window around the caret, marked "..." where the line is cut
            start = min(max(0, col - SHOWN_WIDTH // 2), len(text) - SHOWN_WIDTH)
            cut_end = start + SHOWN_WIDTH < len(text)
            text = ("..." if start else "") + text[start : start + SHOWN_WIDTH] + ("..." if cut_end else "")
            col += (3 if start else 0) - start
        width = min(self.length, len(text) - (3 if cut_end else 0) - col)
        caret = " " * col + "^" + "~" * max(0, width - 1)
        return f"    {text}\n    {caret}"

    def encode(self) -> str:
        """Compact text form used in IR attributes: ``file:line:col:length``."""
        return f"{self.file}:{self.line}:{self.col}:{self.length}"

    @staticmethod
    def decode(text: str) -> Loc:
        """Inverse of :meth:`encode`; file names may contain colons."""
        file, line, col, length = text.rsplit(":", 3)
        return Loc(file, int(line), int(col), int(length))


UNKNOWN = Loc("<unknown>", 0, 0, 0)


class FuseError(Exception):
    """A program error with a location; ``str()`` gives the full rendered diagnostic."""

    def __init__(self, message: str, loc: Loc | None = None, notes: list[tuple[str, Loc]] | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = notes or []

    def __str__(self) -> str:
        parts = []
        if self.loc is not None and self.loc.line > 0:
            parts.append(f"{self.loc}: error: {self.message}")
            shown = self.loc.render()
            if shown:
                parts.append(shown)
        else:
            parts.append(f"error: {self.message}")
        for note, loc in self.notes:
            parts.append(f"{loc}: note: {note}")
            shown = loc.render()
            if shown:
                parts.append(shown)
        return "\n".join(parts)


class FuseRuntimeError(FuseError):
    """An error found while running a compiled program (bad inputs, gather out of range)."""


# --------------------------------------------------------------------------
# Non-fatal diagnostics: warnings and remarks from passes and tools
# --------------------------------------------------------------------------

SEVERITIES = ("error", "warning", "note", "remark")


class _Detail(int):
    """An error detail value; the format spec ``u`` prints it as an unsigned 64-bit integer."""

    def __format__(self, spec: str) -> str:
        if spec == "u":
            return str(int(self) & 0xFFFF_FFFF_FFFF_FFFF)
        return int.__format__(int(self), spec)


def format_details(template: str, *values: int) -> str:
    """A run-time error template filled with its detail values (``{0}``, ``{1}``; ``{0:u}`` reads as unsigned).

    Native code reports details as signed 64-bit integers; a template written
    for an unsigned index (a uint64 gather) says ``{0:u}`` so that a huge value
    does not print as a negative one. A template that does not format is
    returned as it is.
    """
    try:
        return template.format(*(_Detail(int(v)) for v in values))
    except (IndexError, KeyError, ValueError):
        return template


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One message with a severity (``error``, ``warning``, ``note``, ``remark``) and an optional location."""

    severity: str
    message: str
    loc: Loc | None = None

    def render(self) -> str:
        """``file:line:col: severity: message`` and the caret lines (just ``severity: message`` if unlocated)."""
        if self.loc is None or self.loc.line <= 0:
            return f"{self.severity}: {self.message}"
        shown = self.loc.render()
        head = f"{self.loc}: {self.severity}: {self.message}"
        return f"{head}\n{shown}" if shown else head


DiagnosticHandler = Callable[[Diagnostic], None]


def _print_diagnostic(diag: Diagnostic) -> None:
    print(diag.render(), file=sys.stderr)


_HANDLER: ContextVar[DiagnosticHandler] = ContextVar("fuse_mlir_diagnostic_handler", default=_print_diagnostic)


def emit(diag: Diagnostic) -> None:
    """Report a non-fatal diagnostic to the current handler (by default: printed to stderr)."""
    _HANDLER.get()(diag)


def warning(message: str, loc: Loc | None = None) -> None:
    """Report a warning (compilation goes on)."""
    emit(Diagnostic("warning", message, loc))


def remark(message: str, loc: Loc | None = None) -> None:
    """Report a remark: information a pass gives about what it did."""
    emit(Diagnostic("remark", message, loc))


@contextmanager
def diagnostic_handler(handler: DiagnosticHandler) -> Iterator[None]:
    """Send the diagnostics emitted inside the ``with`` block to ``handler`` instead of stderr."""
    token = _HANDLER.set(handler)
    try:
        yield
    finally:
        _HANDLER.reset(token)


_CLI_HINTS: ContextVar[bool] = ContextVar("fuse_mlir_cli_hints", default=False)


def option_hint(name: str, value: object) -> str:
    """How the user sets option ``name`` to ``value``, in the spelling of where they are.

    ``compile(mode='fixpoint')`` from Python; ``--mode fixpoint`` inside the
    command-line tools, which run under :func:`cli_hints`. Messages that tell
    the user to set an option build that part with this function.
    """
    if _CLI_HINTS.get():
        return f"--{name.replace('_', '-')} {value}"
    return f"compile({name}={value!r})"


@contextmanager
def cli_hints() -> Iterator[None]:
    """Inside the ``with`` block, :func:`option_hint` spells options as command-line flags."""
    token = _CLI_HINTS.set(True)
    try:
        yield
    finally:
        _CLI_HINTS.reset(token)


def error_diagnostics(err: FuseError) -> list[Diagnostic]:
    """A :class:`FuseError` as diagnostics: the error, then its notes."""
    return [Diagnostic("error", err.message, err.loc)] + [Diagnostic("note", n, loc) for n, loc in err.notes]
