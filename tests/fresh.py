"""Run code in a fresh Python interpreter: for tests about process-wide state (the thread pool's workers, fork,
CPU time) that other tests in the same process, or other libraries' threads in it, would disturb."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fresh_python(code: str, unset: tuple[str, ...] = ()) -> str:
    """The standard output of ``python -c code`` run in the repository root with it on ``PYTHONPATH`` and the
    environment variables ``unset`` removed; the test fails with the child's stderr if it exits non-zero."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout
