"""Run code in a fresh Python interpreter: for tests about process-wide state (the thread pool's workers, fork,
CPU time) that other tests in the same process, or other libraries' threads in it, would disturb."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fresh_python(code: str, unset: tuple[str, ...] = ()) -> str:
    """The standard output of ``python -c code`` (see :func:`fresh_run`)."""
    return fresh_run(["-c", code], unset)


def fresh_run(args: Sequence[str], unset: tuple[str, ...] = (), set_env: Mapping[str, str] | None = None) -> str:
    """The standard output of ``python *args`` run in the repository root with it on ``PYTHONPATH``, the
    environment variables ``unset`` removed and ``set_env`` set; the test fails with the child's stderr if it
    exits non-zero."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(set_env or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout
