"""The benchmark commands' OpenBLAS environment (benchmarks/blas_env.py): removed variables, the thread timeout,
and the re-executed command saying so in its header."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import blas_env

ROOT = Path(__file__).resolve().parent.parent


def test_nothing_to_do_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the timeout set and nothing to remove (or in the re-executed command) reexec returns."""
    for k in blas_env.VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(*blas_env.TIMEOUT)
    assert blas_env.reexec("no.such.module", []) is None
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv(blas_env.MARK, "")
    assert blas_env.reexec("no.such.module", []) is None


def test_describe(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in (*blas_env.VARS, blas_env.MARK, blas_env.TIMEOUT[0]):
        monkeypatch.delenv(k, raising=False)
    assert blas_env.describe() == (
        "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE not set; OPENBLAS_THREAD_TIMEOUT=not set (NumPy was imported first)"
    )
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "1024")
    assert blas_env.describe().startswith("OPENBLAS_L2_SIZE=1024 still set")
    monkeypatch.delenv("OPENBLAS_L2_SIZE")
    monkeypatch.setenv(blas_env.MARK, "OPENBLAS_CORETYPE=Haswell")
    monkeypatch.setenv(*blas_env.TIMEOUT)
    assert blas_env.describe() == "OPENBLAS_CORETYPE=Haswell unset for this run; OPENBLAS_THREAD_TIMEOUT=4"


def test_the_contractions_command_runs_with_the_fixed_environment() -> None:
    """Started with OPENBLAS_CORETYPE set and no timeout, the command re-executes itself: its header says the
    variable was unset and the timeout is 4."""
    env = {k: v for k, v in os.environ.items() if k not in (*blas_env.VARS, blas_env.MARK, blas_env.TIMEOUT[0])}
    env["OPENBLAS_CORETYPE"] = "Haswell"
    env["PYTHONPATH"] = str(ROOT)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.contractions",
            "--quick",
            "--programs",
            "outer_reduce",
            "--dtypes",
            "float32",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "OpenBLAS environment: OPENBLAS_CORETYPE=Haswell unset for this run; OPENBLAS_THREAD_TIMEOUT=4" in res.stdout
