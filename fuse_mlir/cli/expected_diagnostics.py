"""``--verify-diagnostics``: check the diagnostics a run produces against ``expected-*`` annotations.

mlir-opt's rules: a comment ``expected-error {{text}}`` (or ``-warning``,
``-note``, ``-remark``; ``-re`` makes the text a regular expression) expects a
diagnostic of that severity on its own line whose message contains the text.
``@+N`` / ``@-N`` shift the line, ``@above`` / ``@below`` name the nearest line
above / below that has no annotation, ``@unknown`` expects one without a
location. Every diagnostic must match an annotation and every annotation must
be matched, else the check fails with one located error per mismatch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuse_mlir.diagnostics import Diagnostic, Loc

_ANNOTATION = re.compile(
    r"expected-(?P<kind>error|warning|note|remark)(?P<re>-re)?\s*"
    r"(?:@(?P<where>[+-]\d+|above|below|unknown))?\s*\{\{(?P<text>.*)\}\}\s*$"
)


@dataclass
class Expected:
    """One annotation: the severity and text it expects, the line it applies to, and where it is written."""

    severity: str
    text: str
    regex: bool
    line: int | None  # None: a diagnostic without location (@unknown)
    written_at: Loc
    matched: bool = False

    def accepts(self, message: str) -> bool:
        if self.regex:
            return re.search(self.text, message) is not None
        return self.text in message


def parse_expected(text: str, filename: str, comment: str) -> list[Expected]:
    """The annotations in ``comment``-introduced comments (``//`` or ``#``) of ``text``."""
    out: list[Expected] = []
    below: list[Expected] = []
    last_plain = 0
    for number, line in enumerate(text.splitlines(), start=1):
        pos = line.find(comment)
        m = _ANNOTATION.search(line, pos) if pos >= 0 else None
        if m is None:
            for e in below:
                e.line = number
            below.clear()
            last_plain = number
            continue
        where = m.group("where") or ""
        at = Loc(filename, number, m.start() + 1, m.end() - m.start())
        e = Expected(m.group("kind"), m.group("text"), bool(m.group("re")), number, at)
        if where == "unknown":
            e.line = None
        elif where == "above":
            e.line = last_plain
        elif where == "below":
            below.append(e)
        elif where:
            e.line = number + int(where)
        out.append(e)
    for e in below:  # nothing below: can never match
        e.line = -1
    return out


def check_diagnostics(expected: list[Expected], produced: list[Diagnostic], filename: str) -> list[Diagnostic]:
    """The errors a mismatch gives: unexpected diagnostics, then annotations nothing matched."""
    problems: list[Diagnostic] = []
    for diag in produced:
        line = diag.loc.line if diag.loc is not None and diag.loc.file == filename and diag.loc.line > 0 else None
        near: Expected | None = None
        found = False
        for e in expected:
            if e.line == line and e.accepts(diag.message):
                if e.severity == diag.severity:
                    e.matched = found = True
                    break
                near = e
        if found:
            continue
        if near is not None:
            near.matched = True
            problems.append(
                Diagnostic(
                    "error", f"'{diag.severity}' diagnostic emitted when expecting a '{near.severity}'", diag.loc
                )
            )
        else:
            problems.append(Diagnostic("error", f"unexpected {diag.severity}: {diag.message}", diag.loc))
    for e in expected:
        if not e.matched:
            problems.append(Diagnostic("error", f'expected {e.severity} "{e.text}" was not produced', e.written_at))
    return problems
