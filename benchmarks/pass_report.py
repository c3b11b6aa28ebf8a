"""``python -m benchmarks.pass_report``: what the optimisation passes do to each example and workload.

For every program in ``examples/`` and every benchmark workload, lowers the
tensor_eq module to the loop level with the llvm target's ``O0`` pipeline (no
fusion, no inplace) and its ``O2`` pipeline, and prints a Markdown table of

- kernels: loop nests (outermost ``loop.for``) plus BLAS and host calls;
- allocations: ``loop.alloc`` ops, i.e. buffers the native code allocates;
- the pass statistics of the O2 run (ops merged by dedup, producers inlined,
  siblings merged, allocations saved by inplace);
- the time of the O0 and O2 lowerings (median of 5), so the compile time the
  passes add is visible.

Options: ``--examples-only``, ``--workloads-only``, ``--output PATH`` (also
write the table there).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from benchmarks.workloads import WORKLOADS
from fuse_mlir import Program
from fuse_mlir.dialects import loop
from fuse_mlir.passes.lowering import lower_to_loop
from fuse_mlir.passes.statistics import Statistics

ROOT = Path(__file__).resolve().parent.parent


def kernels(module: ModuleOp) -> int:
    """Top-level loop nests plus BLAS and host calls: the units of work of a loop-level module."""
    n = 0
    for op in module.walk():
        if isinstance(op, loop.GemmOp | loop.HostCallOp):
            n += 1
        elif isinstance(op, loop.ForOp) and not isinstance(op.parent_op(), loop.ForOp):
            n += 1
    return n


def allocations(module: ModuleOp) -> int:
    return sum(isinstance(op, loop.AllocOp) for op in module.walk())


def timed(te: ModuleOp, opt: str) -> tuple[ModuleOp, float]:
    times, out = [], None
    for _ in range(5):
        t0 = time.perf_counter()
        out = lower_to_loop(te, opt_level=opt)
        times.append(time.perf_counter() - t0)
    assert out is not None
    return out, statistics.median(times)


def row(name: str, program: Program) -> str:
    te = program.lower().module
    o0, t0 = timed(te, "O0")
    with Statistics() as stats:
        o2 = lower_to_loop(te, opt_level="O2")
    _, t2 = timed(te, "O2")
    counts = {f"{p}:{c}": n for p, cs in stats.counts.items() for c, n in cs.items()}
    get = counts.get
    return (
        f"| {name} | {kernels(o0)} → {kernels(o2)} | {allocations(o0)} → {allocations(o2)} "
        f"| {get('dedup:ops-merged', 0)} | {get('fuse:producers-inlined', 0)} | {get('fuse:siblings-merged', 0)} "
        f"| {get('fuse:outputs-kept', 0)} | {get('inplace:allocations-saved', 0)} "
        f"| {t0 * 1e3:.1f} | {t2 * 1e3:.1f} |"
    )


HEAD = [
    "| program | kernels O0 → O2 | allocations O0 → O2 | dedup merged | producers inlined | siblings merged "
    "| second outputs | inplace saved | lower O0 ms | lower O2 ms |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pass_report", description=__doc__.splitlines()[0])
    parser.add_argument("--examples-only", action="store_true")
    parser.add_argument("--workloads-only", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    lines = list(HEAD)
    if not args.workloads_only:
        for path in sorted((ROOT / "examples").glob("*.fuse")):
            lines.append(row(f"examples/{path.name}", Program.from_file(path)))
    if not args.examples_only:
        for w in WORKLOADS:
            lines.append(row(f"workload {w.name}", Program(w.source)))
    text = "\n".join(lines)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
