"""benchmarks/RESULTS.md has sections from several benchmarks; a writer replaces only its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import contractions, report
from benchmarks.results_md import merge_sections, split_sections, write_sections

REPORT_V1 = (
    "# results\n\n- date: 1\n\n## Run time\n\nold table\n\n## Compile time\n\nold compile\n\n## Notes\n\n- stale\n"
)
CONTRACTIONS = "## Contractions (benchmarks/contractions.py)\n\ncontraction table\n"


def test_split_sections() -> None:
    pre, secs = split_sections(REPORT_V1)
    assert pre == "# results\n\n- date: 1"
    assert [h for h, _ in secs] == ["Run time", "Compile time", "Notes"]
    assert secs[0][1] == "## Run time\n\nold table"


def test_the_report_keeps_the_contractions_section(tmp_path: Path) -> None:
    """The report rewriting RESULTS.md keeps the contractions table (it dropped it once); its own sections are
    replaced and one it no longer writes (no notes this run) is dropped, not left stale."""
    path = tmp_path / "RESULTS.md"
    path.write_text(REPORT_V1)
    contractions.write_results("contraction table", path)
    assert path.read_text().endswith(CONTRACTIONS)
    write_sections(
        path, "# results\n\n- date: 2\n\n## Run time\n\nnew table\n\n## Compile time\n\nnew\n", report.SECTIONS
    )
    text = path.read_text()
    assert "- date: 2" in text and "new table" in text and "old" not in text
    assert "## Notes" not in text and "stale" not in text
    assert text.endswith(CONTRACTIONS)
    contractions.write_results("table 2", path)
    assert text.replace("contraction table", "table 2") == path.read_text()


def test_contractions_into_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    contractions.write_results("contraction table", path)
    assert path.read_text() == CONTRACTIONS


def test_a_writer_cannot_write_a_section_it_does_not_own() -> None:
    with pytest.raises(ValueError, match="not owned"):
        merge_sections(REPORT_V1, CONTRACTIONS, report.SECTIONS)
