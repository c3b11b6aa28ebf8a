"""The benchmark commands' OpenBLAS environment (benchmarks/blas_env.py): removed variables, the thread timeout,
and the re-executed command saying so in its header."""

from __future__ import annotations

import pytest

from benchmarks import blas_env
from tests.fresh import fresh_run


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
    out = fresh_run(
        ["-m", "benchmarks.contractions", "--quick", "--programs", "outer_reduce", "--dtypes", "float32"],
        unset=(*blas_env.VARS, blas_env.MARK, blas_env.TIMEOUT[0]),
        set_env={"OPENBLAS_CORETYPE": "Haswell"},
    )
    assert "OpenBLAS environment: OPENBLAS_CORETYPE=Haswell unset for this run; OPENBLAS_THREAD_TIMEOUT=4" in out
