"""``benchmarks/RESULTS.md`` is written by several benchmarks; each owns some of its ``## `` sections.

``python -m benchmarks.report`` owns the title, the header and its sections
(run time, compile time, notes); ``python -m benchmarks.contractions --write``
owns the "Contractions" section. :func:`write_sections` replaces only the
sections its writer owns, so one benchmark's run never drops another's table.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

HEADING = "## "


def split_sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``text`` as its preamble (before the first ``## `` heading) and its sections, each (heading without
    ``## ``, the section's text from its heading line on)."""
    preamble: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith(HEADING):
            sections.append((line[len(HEADING) :].strip(), [line]))
        elif sections:
            sections[-1][1].append(line)
        else:
            preamble.append(line)
    return "\n".join(preamble).strip(), [(h, "\n".join(body).strip()) for h, body in sections]


def merge_sections(old: str, new: str, owned: Collection[str]) -> str:
    """``old`` with the sections whose headings are in ``owned`` replaced by ``new``'s: each in the place of the
    old one of the same heading (a new heading goes at the end), an owned one ``new`` lacks dropped, every other
    section kept as it was. ``new``'s preamble, when it has one, replaces ``old``'s."""
    old_pre, old_secs = split_sections(old)
    new_pre, new_secs = split_sections(new)
    stray = [h for h, _ in new_secs if h not in owned]
    if stray:
        raise ValueError(f"sections not owned by this writer: {stray}")
    fresh = dict(new_secs)
    out = [new_pre or old_pre]
    placed = set()
    for heading, body in old_secs:
        if heading not in owned:
            out.append(body)
        elif heading in fresh and heading not in placed:
            out.append(fresh[heading])
            placed.add(heading)
    out += [body for heading, body in new_secs if heading not in placed]
    return "\n\n".join(part for part in out if part) + "\n"


def write_sections(path: Path, text: str, owned: Collection[str]) -> None:
    """Write ``text``'s sections (and preamble, if any) into ``path`` by :func:`merge_sections`."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(merge_sections(old, text, owned), encoding="utf-8")
