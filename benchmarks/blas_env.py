"""OpenBLAS's environment for the benchmark commands, fixed before NumPy loads the library (standard library only).

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, when set, are removed for the
command (they slow current NumPy's OpenBLAS), and OPENBLAS_THREAD_TIMEOUT is
set to 4 unless the caller set it. OpenBLAS reads them once, when NumPy
loads it, so the command re-executes itself with the new environment
(:func:`reexec`). The thread timeout: an OpenBLAS worker spins for
2^timeout cycles after each call before it sleeps (default 2^28, about
0.1 s here), far longer than the report's settling call; a process with two
OpenBLAS builds (NumPy's and SciPy's, which Numba's ``np.dot`` calls) then
runs every GEMM against the other build's spinning threads, at half speed on
2 cores (contract3 float64: every BLAS implementation 11-14 ms in the
report, 6.5 ms alone; 6.8-6.9 ms with the timeout at 4).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
"""Removed for the command."""

TIMEOUT = ("OPENBLAS_THREAD_TIMEOUT", "4")
"""Set for the command unless the caller set it."""

MARK = "_FUSE_BENCH_UNSET_OPENBLAS"
"""Set in the re-executed command's environment: which of :data:`VARS` were removed (so it runs once)."""

ROOT = Path(__file__).resolve().parent.parent


def reexec(module: str, argv: Sequence[str]) -> None:
    """Re-run ``python -m module argv`` without :data:`VARS` and with :data:`TIMEOUT` (no return when anything
    changes; nothing happens when the environment is already right or this is the re-executed command)."""
    present = [k for k in VARS if k in os.environ]
    timeout_name, timeout = TIMEOUT
    if (not present and timeout_name in os.environ) or MARK in os.environ:
        return
    env = {k: v for k, v in os.environ.items() if k not in VARS}
    env.setdefault(timeout_name, timeout)
    env[MARK] = " ".join(f"{k}={os.environ[k]}" for k in present)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", module, *argv], env)


def describe() -> str:
    """This process's OpenBLAS environment, as the benchmarks' headers print it."""
    unset = os.environ.get(MARK)
    still = [f"{k}={os.environ[k]}" for k in VARS if k in os.environ]
    if unset:
        head = f"{unset} unset for this run"
    elif still:
        head = f"{' '.join(still)} still set (NumPy was imported first)"
    else:
        head = "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE not set"
    return f"{head}; {TIMEOUT[0]}={os.environ.get(TIMEOUT[0], 'not set (NumPy was imported first)')}"
