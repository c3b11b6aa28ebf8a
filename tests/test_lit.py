"""Run the lit + FileCheck suite in tests/lit, so that ``pytest`` covers it too.

One case per folder of tests/lit, so pytest-xdist spreads the folders over its workers (lit starts a Python
process per RUN line: the suite as one case was the longest single test). The checked pass (``--check-bounds``)
runs only the lit tests that run a program (a ``%fuse run`` line): the others parse, print, lower or optimise
IR, which building kernels checked cannot change, and the plain pass ran them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuse_mlir.targets import checked_build

LIT_DIR = Path(__file__).parent / "lit"
SUFFIXES = (".fuse", ".mlir", ".test")  # lit.cfg.py's config.suffixes
FOLDERS = sorted(d.name for d in LIT_DIR.iterdir() if d.is_dir() and d.name != "Inputs")
RUNS_A_PROGRAM = re.compile(r"RUN:.*%fuse run\b")


def lit_tests(folder: str) -> list[Path]:
    """The lit tests under ``folder`` (what lit would discover there)."""
    root = LIT_DIR / folder
    return sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES and "Inputs" not in p.relative_to(root).parts)


def runs_a_program(test: Path) -> bool:
    """Whether a lit test runs native code: one of its RUN lines runs a program with ``fuse run``."""
    return bool(RUNS_A_PROGRAM.search(test.read_text(encoding="utf-8")))


def test_every_folder_has_tests() -> None:
    """The parametrisation below covers the whole suite: no lit test sits outside a folder."""
    assert FOLDERS
    assert not [p for p in LIT_DIR.iterdir() if p.is_file() and p.suffix in SUFFIXES]
    assert all(lit_tests(f) for f in FOLDERS), [f for f in FOLDERS if not lit_tests(f)]


@pytest.mark.parametrize("folder", FOLDERS)
def test_lit_suite(folder: str) -> None:
    pytest.importorskip("lit")
    bin_dir = os.path.dirname(sys.executable)
    if shutil.which("filecheck", path=os.pathsep.join([bin_dir, os.environ.get("PATH", "")])) is None:
        pytest.skip("filecheck is not installed")
    tests = lit_tests(folder)
    if checked_build():
        tests = [t for t in tests if runs_a_program(t)]
        if not tests:
            pytest.skip("no test here runs a program, so building kernels checked changes nothing")
    # lit has no ``python -m lit``; run its main with this interpreter, so %fuse-opt uses it too.
    cmd = [sys.executable, "-c", "import sys; from lit.main import main; sys.exit(main())", "-v", *map(str, tests)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    report = res.stdout + res.stderr
    assert res.returncode == 0, report
    assert "Failed" not in report and f"Passed: {len(tests)}" in report, report
