"""Run the lit + FileCheck suite in tests/lit, so that ``pytest`` covers it too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).parent / "lit"


def test_lit_suite() -> None:
    pytest.importorskip("lit")
    bin_dir = os.path.dirname(sys.executable)
    if shutil.which("filecheck", path=os.pathsep.join([bin_dir, os.environ.get("PATH", "")])) is None:
        pytest.skip("filecheck is not installed")
    # lit has no ``python -m lit``; run its main with this interpreter, so %fuse-opt uses it too.
    cmd = [sys.executable, "-c", "import sys; from lit.main import main; sys.exit(main())", str(LIT_DIR), "-v"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    report = res.stdout + res.stderr
    assert res.returncode == 0, report
    assert "Failed" not in report and "Passed" in report, report
