"""Pipeline instruments: objects that watch each pass run (print IR, time passes, verify after each).

An instrument has ``before_pass(pass_, module)`` and/or ``after_pass(pass_,
module)``; :meth:`Pipeline.instrument` registers both. Before-hooks run in
the order they were added and after-hooks in the reverse order (MLIR's
nesting), so the instrument added last sits closest to the pass: add
:class:`Timing` last and it measures the pass alone.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TextIO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fuse_mlir.ir import print_module, verify_module


class PrintIR:
    """Print the module before/after passes, as ``// -----// IR Dump After NAME //----- //`` blocks.

    ``before`` and ``after`` are sets of pass names; ``stream`` defaults to stderr
    (read when printing, so redirections made later apply).
    """

    def __init__(
        self,
        *,
        after_all: bool = False,
        before_all: bool = False,
        after: Collection[str] = (),
        before: Collection[str] = (),
        stream: TextIO | None = None,
        generic: bool = False,
    ) -> None:
        self.after_all = after_all
        self.before_all = before_all
        self.after = set(after)
        self.before = set(before)
        self.stream = stream
        self.generic = generic

    def _dump(self, when: str, pass_: ModulePass, module: ModuleOp) -> None:
        out = self.stream or sys.stderr
        out.write(f"// -----// IR Dump {when} {pass_} //----- //\n")
        out.write(print_module(module, generic=self.generic))
        out.write("\n")
        out.flush()

    def before_pass(self, pass_: ModulePass, module: ModuleOp) -> None:
        if self.before_all or pass_.name in self.before:
            self._dump("Before", pass_, module)

    def after_pass(self, pass_: ModulePass, module: ModuleOp) -> None:
        if self.after_all or pass_.name in self.after:
            self._dump("After", pass_, module)


class Timing:
    """Collect the wall time of each pass (and of phases timed with :meth:`measure`); :meth:`report` shows them.

    Rows keep the order in which they first ran; a pass instance that runs on
    several modules (``--split-input-file``) accumulates into one row.
    """

    def __init__(self) -> None:
        self._rows: dict[object, tuple[str, float]] = {}
        self._started: list[float] = []

    def record(self, label: str, seconds: float, key: object = None) -> None:
        """Add ``seconds`` to the row ``label`` (or to the row of ``key``)."""
        key = label if key is None else key
        old = self._rows.get(key, (label, 0.0))[1]
        self._rows[key] = (label, old + seconds)

    @contextmanager
    def measure(self, label: str) -> Iterator[None]:
        """Time the ``with`` block as the row ``label`` (e.g. parsing, printing)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.record(label, time.perf_counter() - start)

    def before_pass(self, pass_: ModulePass, module: ModuleOp) -> None:
        self._started.append(time.perf_counter())

    def after_pass(self, pass_: ModulePass, module: ModuleOp) -> None:
        elapsed = time.perf_counter() - self._started.pop()
        self.record(str(pass_), elapsed, key=id(pass_))

    @property
    def entries(self) -> list[tuple[str, float]]:
        """(label, seconds) per row, in first-run order."""
        return list(self._rows.values())

    def report(self) -> str:
        """An mlir-opt style timing report."""
        rows = self.entries
        total = sum(s for _, s in rows)
        rule = "===" + "-" * 73 + "==="
        lines = [
            rule,
            "... Execution time report ...".center(79).rstrip(),
            rule,
            f"  Total Execution Time: {total:.4f} seconds",
            "",
            "  ----Wall Time----  ----Name----",
        ]
        for label, secs in [*rows, ("Total", total)]:
            share = 100.0 * secs / total if total > 0 else 0.0
            lines.append(f"  {secs:8.4f} ({share:5.1f}%)  {label}")
        return "\n".join(lines) + "\n"


class VerifyEach:
    """Verify the module after every pass; a failure is an error that names the pass that broke it."""

    def after_pass(self, pass_: ModulePass, module: ModuleOp) -> None:
        verify_module(module, context=f"IR does not verify after pass '{pass_.name}': ")
