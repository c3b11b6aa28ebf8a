"""Start-up and incremental recompilation: what a user waits for before any work is done.

``python -m benchmarks.startup`` measures, in fresh processes, the median wall
time of ``python -c "import numpy"`` (the yardstick), ``python -c "import
fuse_mlir"`` and a warm ``fuse run examples/mlp.fuse`` (its kernel and lowering
already in a private disk cache, Python's bytecode cache on as in an
installation), with the ratio of the last to the first;
then, in this process, the incremental recompile of a chain of matmul + bias +
relu layers (3 equations per layer): a cold compile (empty caches), then the
same program with one activation edited, as a fraction of the cold compile,
with the compilation units LLVM compiled and reused. ``--quick`` runs fewer
repeats and a 60-equation chain (a smoke run). No timing is asserted anywhere;
the load average is printed beside the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def chain(n_equations: int, edit: int | None = None) -> str:
    """``n_equations`` (a multiple of 3) one-line equations: layer k is ``Zk = Wk Hk-1``, ``Ak = Zk + Bk``,
    ``Hk = relu(Ak)`` (``tanh`` for layer ``edit``)."""
    lines = []
    layers = n_equations // 3
    for k in range(1, layers + 1):
        prev = "X" if k == 1 else f"H{k - 1}"
        lines.append(f"Z{k}[b,h] = W{k}[h,d] {prev}[b,d]")
        lines.append(f"A{k}[b,h] = Z{k}[b,h] + B{k}[h]")
        lines.append(f"H{k}[b,h] = {'tanh' if edit == k else 'relu'}(A{k}[b,h])")
    lines.append(f"export H{layers}")
    return "\n".join(lines) + "\n"


def _wall(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def startup(repeats: int) -> dict[str, float]:
    """Median wall seconds of the three commands (the warm one after one untimed run fills the cache)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FUSE_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        # As installed: bytecode cached (with PYTHONDONTWRITEBYTECODE, every process would compile the sources).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        run = [sys.executable, "-m", "fuse_mlir", "run", "mlp.fuse"]
        _wall(run, env, ROOT / "examples")
        times: dict[str, list[float]] = {"import numpy": [], "import fuse_mlir": [], "warm fuse run mlp": []}
        for _ in range(repeats):  # interleaved, so a load spike hits all three alike
            times["import numpy"].append(_wall([sys.executable, "-c", "import numpy"], env, ROOT))
            times["import fuse_mlir"].append(_wall([sys.executable, "-c", "import fuse_mlir"], env, ROOT))
            times["warm fuse run mlp"].append(_wall(run, env, ROOT / "examples"))
    out = {k: statistics.median(v) for k, v in times.items()}
    out["warm run / import numpy"] = out["warm fuse run mlp"] / out["import numpy"]
    return out


_INCREMENTAL = r"""
import json, sys, time
from benchmarks.startup import chain
from fuse_mlir import Program
from fuse_mlir.backends.llvm import executor, jit
n = int(sys.argv[1])
def once(src):
    t0 = time.perf_counter()
    compiled = executor.compile_program(Program(src).lower())
    return time.perf_counter() - t0, compiled
cold, _ = once(chain(n))
units_cold = dict(jit.UNIT_STATS)
jit.UNIT_STATS.clear()
edit, _ = once(chain(n, edit=n // 6))
print(json.dumps({"cold": cold, "edit": edit, "units_cold": units_cold, "units_edit": dict(jit.UNIT_STATS)}))
"""


def incremental(n: int) -> dict[str, object]:
    """Cold compile of the n-equation chain and of the edited chain after it, in one fresh process."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FUSE_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", _INCREMENTAL, str(n)], env=env, cwd=ROOT, check=True, capture_output=True, text=True
        )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["fraction"] = r["edit"] / r["cold"]
    return r


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a 60-equation chain")
    parser.add_argument("--equations", type=int, default=None, help="chain length (default 400; 60 with --quick)")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for name, value in startup(3 if args.quick else 9).items():
        print(f"{name:>24}: {value:.3f}{'' if '/' in name else ' s'}")
    n = args.equations or (60 if args.quick else 400)
    n -= n % 3
    r = incremental(n)
    print(
        f"chain of {n} equations: cold {r['cold']:.2f} s, one equation edited {r['edit']:.2f} s "
        f"({100 * r['fraction']:.0f}% of cold); units cold {r['units_cold']}, after the edit {r['units_edit']}"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
