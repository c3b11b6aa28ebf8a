"""What the command-line tools share: argument parsing that never exits the
process, and one error policy.

The policy: a user error (:class:`FuseError`, a usage error, an unreadable
file) prints a one-screen message to stderr and gives exit status 1; any
other exception is a bug in fuse_mlir and prints ``internal error: ...``
(with the traceback only when ``FUSE_DEBUG=1``) and gives exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import NoReturn

from fuse_mlir.diagnostics import FuseError, cli_hints

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_INTERNAL_ERROR = 2


class UsageError(Exception):
    """A bad command line; argparse has already printed the usage line."""


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser that raises :class:`UsageError` instead of exiting,
    so ``main(argv)`` returns a status and tests can call it in-process."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


def debug_enabled() -> bool:
    """Whether ``FUSE_DEBUG`` asks for tracebacks."""
    return os.environ.get("FUSE_DEBUG", "") not in ("", "0")


def version_string(tool: str) -> str:
    """``tool X.Y.Z (xdsl A.B.C)``: fuse_mlir's ``__version__`` (the checkout that runs) and xDSL's metadata."""

    def get(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "unknown"

    from fuse_mlir import __version__

    return f"{tool} {__version__} (xdsl {get('xdsl')})"


def run_main(body: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None) -> int:
    """Run a tool's ``body(argv)`` under the error policy and return the exit status."""
    from fuse_mlir.frontend.parser import recursion_room

    try:
        with cli_hints(), recursion_room():  # every command walks expressions as deep as the parser accepts
            return body(argv)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USER_ERROR)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USER_ERROR
    except FuseError as exc:
        if debug_enabled():
            traceback.print_exc()
        print(str(exc), file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our stdout went away (``fuse-opt x.fuse | head``): not an error.
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        if debug_enabled():
            traceback.print_exc()
        else:
            print("(this is a bug in fuse_mlir; set FUSE_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def read_text(path: str) -> tuple[str, str]:
    """The text of ``path`` (``-`` is stdin) and the name diagnostics use for it."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    from fuse_mlir.paths import read_text_file

    return read_text_file(path, ""), path  # NUL, over-long names, devices, FIFOs, huge files: a FuseError


def write_text(path: str | None, text: str) -> None:
    """Write ``text`` to ``path``, or to stdout when ``path`` is None or ``-``."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise FuseError(f"cannot write '{path}': {exc.strerror or exc}") from None
