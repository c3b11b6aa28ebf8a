"""Naive versus semi-naive fixpoint evaluation of a chain's transitive closure: times and operation counts.

``Anc(x,z) = Par(x,z) + Anc(x,y) Par(y,z)`` over a chain of n nodes (``Par``
from a ``.tsv`` facts file, so the group qualifies for the semi-naive rewrite)
needs n runs. Per run, the join ``Anc·Par`` is n³ multiply-adds for a dense
kernel; the llvm backend skips the zero facts of the left factor, so its
inner-loop work is ``nnz(left) × n``: every fact of ``Anc`` in naive
iteration, only the new facts ``ΔAnc`` in semi-naive. The script reports the
wall time of a run (after compilation) per backend and mode, the run count,
and both operation counts (summed over the runs, measured on the fact sets
the iteration goes through).

Run from the repository root::

    python -m benchmarks.fixpoint_closure                      # n = 100, 200 (reference), 100..1000 (llvm)
    python -m benchmarks.fixpoint_closure --sizes 64 --backends reference

Naive llvm runs above ``--naive-limit`` nodes (default 400) are skipped: their
work grows as n⁴/3 (about 3·10¹¹ inner multiply-adds at n = 1000).

Measured on the 2-core development machine, shared with other jobs (seconds
per run of the whole program, after compilation; ``--naive-limit 1000`` for
the last naive row)::

    backend        n mode    runs   seconds   dense MACs    MACs done
    reference    100 naive    100     0.246        1e+08        1e+08
    reference    100 semi     100     0.289        1e+08        1e+08
    reference    200 naive    200     3.234      1.6e+09      1.6e+09
    reference    200 semi     200     3.927      1.6e+09      1.6e+09
    llvm         100 naive    100     0.012        1e+08     3.28e+07
    llvm         100 semi     100     0.014        1e+08     4.95e+05
    llvm         200 naive    200     0.143      1.6e+09     5.29e+08
    llvm         200 semi     200     0.030      1.6e+09     3.98e+06
    llvm         400 naive    400     1.488     2.56e+10      8.5e+09
    llvm         400 semi     400     0.152     2.56e+10     3.19e+07
    llvm        1000 naive   1000    55.677        1e+12     3.33e+11
    llvm        1000 semi    1000     3.413        1e+12        5e+08

The reference interpreter's dense einsum does n³ work per run in both modes
(semi-naive adds a few elementwise ops per run, so it is slightly slower
there); its n = 1000 runs would take about an hour each and are not run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import sparse

from fuse_mlir import Program

SOURCE = 'Par(x,y) = "par.tsv"\nAnc(x,z) = Par(x,z) + Anc(x,y) Par(y,z)\nexport Anc'


def chain_program(folder: Path, n: int) -> Program:
    """The closure program over an n-node chain 0 → 1 → … → n-1, its facts written to ``folder``."""
    rows = [f"# shape: {n},{n}"] + [f"{i}\t{i + 1}" for i in range(n - 1)]
    (folder / "par.tsv").write_text("\n".join(rows) + "\n")
    (folder / "anc.fuse").write_text(SOURCE)
    return Program.from_file(folder / "anc.fuse")


def operation_counts(n: int) -> dict[str, int]:
    """Multiply-adds of the closure's join summed over the runs: dense, and with zero facts skipped.

    Follows the fact sets run by run (as both modes do: they visit the same
    sets): naive joins all of ``Anc_k`` with ``Par``, semi-naive only ``ΔAnc_k``.
    """
    par = sparse.eye(n, k=1, dtype=np.int64, format="csr")
    anc = sparse.csr_matrix((n, n), dtype=np.int64)
    delta = sparse.csr_matrix((n, n), dtype=np.int64)
    dense = naive = semi = runs = 0
    while True:
        runs += 1
        dense += n**3
        naive += anc.nnz * n
        semi += delta.nnz * n
        new = ((par + anc @ par) > 0).astype(np.int64)
        delta = ((new - anc) > 0).astype(np.int64)
        if delta.nnz == 0:
            break
        anc = new
    return {"runs": runs, "dense": dense, "naive_skip": naive, "semi_skip": semi}


def time_run(prog: Program, backend: str, semi: bool, n: int) -> tuple[float, int]:
    runner = prog.compile(backend, mode="fixpoint", max_iters=n + 1, semi_naive=semi)
    out = runner()  # compiles (llvm) and checks the result
    want = np.triu(np.ones((n, n), np.int8), 1)
    assert np.array_equal(out["Anc"], want), "wrong closure"
    t0 = time.perf_counter()
    runner()
    return time.perf_counter() - t0, runner.last_run.iterations["Anc"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="", help="comma-separated chain lengths (default: per backend)")
    ap.add_argument("--backends", default="reference,llvm")
    ap.add_argument("--naive-limit", type=int, default=400, help="largest n timed naively on llvm")
    args = ap.parse_args()
    defaults = {"reference": [100, 200], "llvm": [100, 200, 400, 1000]}
    print(f"{'backend':<10} {'n':>5} {'mode':<6} {'runs':>5} {'seconds':>9} {'dense MACs':>12} {'MACs done':>12}")
    for backend in args.backends.split(","):
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else defaults[backend]
        for n in sizes:
            counts = operation_counts(n)
            with tempfile.TemporaryDirectory() as d:
                prog = chain_program(Path(d), n)
                for semi in (False, True):
                    mode = "semi" if semi else "naive"
                    if backend == "llvm" and not semi and n > args.naive_limit:
                        print(f"{backend:<10} {n:>5} {mode:<6} {'-':>5} {'skipped':>9}")
                        continue
                    seconds, runs = time_run(prog, backend, semi, n)
                    done = counts["dense"]
                    if backend == "llvm":
                        done = counts["semi_skip" if semi else "naive_skip"]
                    assert runs == counts["runs"]
                    print(
                        f"{backend:<10} {n:>5} {mode:<6} {runs:>5} {seconds:>9.3f} {counts['dense']:>12.3g} {done:>12.3g}"
                    )


if __name__ == "__main__":
    main()
