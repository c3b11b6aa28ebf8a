"""``python -m benchmarks.report``: every workload × implementation side by side, as a Markdown table.

Options: ``--quick`` (fewer repeats), ``--workloads a,b``, ``--dtypes
float64,float32``, ``--impls fuse-llvm,numpy,...``, ``--small`` (the
workloads' small inputs: a smoke run, nothing written), ``--output PATH``
(default ``benchmarks/RESULTS.md``), ``--no-write``, ``--no-settle`` (time
each batch right after whatever ran before it, neighbours' spinning threads
included; by default the process first goes quiet, then one untimed call of
the same implementation comes, see :mod:`benchmarks.measure`).

OpenBLAS's environment is fixed first (:mod:`benchmarks.blas_env`: the
command re-executes itself before NumPy is imported, so only the standard
library is imported at module level).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.blas_env import describe as describe_blas_env
from benchmarks.blas_env import reexec
from benchmarks.results_md import write_sections

if TYPE_CHECKING:
    from benchmarks.measure import CompileResult, WorkloadResult

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "benchmarks" / "RESULTS.md"
SECTIONS = ("Run time", "Compile time", "Notes")
"""The sections of RESULTS.md this report owns (with the title and header before them)."""


def _fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 1000 else f"{ms:.0f}"


def _cell(r: object) -> str:
    from benchmarks.measure import ImplResult

    assert isinstance(r, ImplResult)
    if r.status == "ok":
        return _fmt_ms(r.median_s)
    return {"unavailable": "n/a", "mismatch": "wrong", "error": "error"}[r.status]


def runtime_table(results: Sequence[WorkloadResult], impls: Sequence[str]) -> list[str]:
    """Markdown rows: median ms per implementation, best peer, best-peer/fuse ratio, bound and fuse's share of it."""

    head = ["workload", "dtype", *impls, "best peer", "best peer / fuse", "bound ms (limit)", "fuse % of bound"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for res in results:
        fuse = res.impls.get("fuse-llvm")
        fuse_t = fuse.median_s if fuse is not None and fuse.status == "ok" else None
        peers = [r for name, r in res.impls.items() if not name.startswith("fuse-") and r.status == "ok" and r.median_s]
        best = min(peers, key=lambda r: r.median_s or 0.0) if peers else None
        ratio = f"**{best.median_s / fuse_t:.2f}**" if best and best.median_s and fuse_t else "—"
        b = res.bound
        bound_txt = f"{b.seconds * 1e3:.3g} ({b.kind}, {b.detail})" if b else "—"
        share = f"{100 * b.seconds / fuse_t:.0f}%" if b and fuse_t else "—"
        cells = [_cell(res.impls[i]) if i in res.impls else "—" for i in impls]
        lines.append(
            "| "
            + " | ".join([res.workload, res.dtype, *cells, best.impl if best else "—", ratio, bound_txt, share])
            + " |"
        )
    return lines


def compile_table(results: Sequence[WorkloadResult], compiles: Sequence[CompileResult]) -> list[str]:
    """Markdown rows: fuse-llvm cold / warm compile, and the hand-offs' and peers' first-call overhead (≈ compile)."""
    by_key = {(r.workload, r.dtype): r for r in results}
    peers = [
        ("fuse-torch-compile", "fuse torch.compile"),
        ("fuse-jax", "fuse jax"),
        ("fuse-numba", "fuse numba"),
        ("jax", "jax.jit"),
        ("numba", "numba"),
        ("numba-parallel", "numba parallel"),
        ("numba-fastmath", "numba parallel fastmath"),
        ("torch-compile", "torch.compile"),
    ]
    head = ["workload", "dtype", "fuse cold", "of which passes+LLVM", "fuse warm (cache hit)", *[p[1] for p in peers]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for c in compiles:
        res = by_key.get((c.workload, c.dtype))
        cells = []
        for impl, _ in peers:
            r = res.impls.get(impl) if res else None
            cells.append(_fmt_ms(r.compile_estimate_s) if r is not None and r.status == "ok" else "—")
        lines.append(
            "| "
            + " | ".join([c.workload, c.dtype, _fmt_ms(c.cold_s), _fmt_ms(c.backend_s), _fmt_ms(c.warm_s), *cells])
            + " |"
        )
    return lines


def render(
    results: Sequence[WorkloadResult],
    compiles: Sequence[CompileResult],
    impls: Sequence[str],
    header: dict[str, str],
    notes: Sequence[str],
) -> str:
    """The whole report as Markdown."""
    from benchmarks.bounds import FORMULAS

    out = ["# fuse_mlir benchmark results", ""]
    out += [f"- **{k}**: {v}" for k, v in header.items()]
    out += [
        "",
        "## Run time",
        "",
        "Median milliseconds per call (lower is better), every implementation in the same process, timed in "
        "interleaved shuffled rounds, each timed batch after a wait until no thread of the process is busy and "
        "one untimed call of the same implementation (so the previous one's spinning worker threads have parked; "
        "`python -m benchmarks.neighbours` measures that cost) unless the mode says otherwise. **best peer / fuse** > 1 means fuse-llvm is faster than the "
        "fastest peer. "
        "`n/a`: peer not available here; `wrong`: answer differs from the NumPy formula (not timed).",
        "",
        *runtime_table(results, impls),
        "",
        "Bounds (from the machine limits this run measured beside each workload, shown in the bound column):",
        "",
        *[f"- {f}" for f in FORMULAS],
        "",
        "## Compile time",
        "",
        "Milliseconds. fuse cold: `Program(src)` + lowering + `compile_program(cache=False)` (median of 3); "
        "fuse warm: the same with the in-memory kernel cache hit. Peers: first call minus a steady call on the "
        "full-size inputs (trace + compile; numba and jax caches start empty for each workload, torch.compile "
        "after `torch._dynamo.reset()`, though Inductor's on-disk cache may be warm, and the first torch.compile "
        "in the process also pays Inductor's start-up).",
        "",
        *compile_table(results, compiles),
    ]
    if notes:
        out += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report; print it and write it to ``--output``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "numpy" not in sys.modules:  # a caller that imported NumPy keeps its process (the header says so)
        reexec("benchmarks.report", argv)

    from benchmarks.limits import measure as measure_limits
    from benchmarks.measure import FULL, QUICK, blas_info, machine, measure_compile, measure_workload
    from benchmarks.peers import DTYPES, IMPLEMENTATIONS
    from benchmarks.workloads import BY_NAME, WORKLOADS

    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--impls", default=",".join(IMPLEMENTATIONS))
    parser.add_argument("--small", action="store_true", help="small inputs (smoke run; writes nothing)")
    parser.add_argument("--output", type=Path, default=None, help=f"default {DEFAULT_OUTPUT.relative_to(ROOT)}")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--no-settle", action="store_true", help="no untimed call before each timed batch (neighbours' threads count)"
    )
    args = parser.parse_args(argv)

    names = [n for n in args.workloads.split(",") if n]
    unknown = [n for n in names if n not in BY_NAME]
    dtypes = [d for d in args.dtypes.split(",") if d]
    impls = tuple(i for i in args.impls.split(",") if i)
    bad = [d for d in dtypes if d not in DTYPES] + [i for i in impls if i not in IMPLEMENTATIONS]
    if unknown or bad:
        parser.error(f"unknown: {', '.join(unknown + bad)}")
    budget = QUICK if args.quick else FULL

    load_before = os.getloadavg()
    started = datetime.datetime.now().astimezone()
    print(f"[{datetime.datetime.now():%H:%M:%S}] machine limits", file=sys.stderr, flush=True)
    limits = measure_limits(quick=args.quick)
    _err(f"  {limits.describe()}")
    results = []
    for name in names:
        for dtype in dtypes:
            print(f"[{datetime.datetime.now():%H:%M:%S}] {name} {dtype}", file=sys.stderr, flush=True)
            results.append(
                measure_workload(
                    BY_NAME[name], dtype, impls, budget, args.small, log=_err, limits=limits, settle=not args.no_settle
                )
            )
    compiles = []
    if "fuse-llvm" in impls:
        print(f"[{datetime.datetime.now():%H:%M:%S}] compile times", file=sys.stderr, flush=True)
        compiles = [measure_compile(BY_NAME[n], d) for n in names for d in dtypes]
    load_after = os.getloadavg()

    info = machine()
    header = {
        "date": started.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{info['cpu']}; {info['cores']}",
        "versions": ", ".join(f"{k} {info[k]}" for k in ("python", "numpy", "numba", "jax", "torch", "llvmlite")),
        "BLAS": "; ".join(blas_info()),
        "OpenBLAS environment": describe_blas_env(),
        "mode": ("quick" if args.quick else "full")
        + (" (small inputs)" if args.small else " (full sizes)")
        + f"; {budget.min_rounds}–{budget.max_rounds} rounds, ≈{budget.target_s:g} s per workload and dtype"
        + (
            "; no settling call (each batch right after the previous implementation)"
            if args.no_settle
            else "; each timed batch after the process went quiet and one untimed call of the same implementation"
        ),
        "load average (1 min) before / after": f"{load_before[0]:.2f} / {load_after[0]:.2f}",
        "machine limits (measured by this run)": limits.describe(),
    }
    notes = sorted({r.note for res in results for r in res.impls.values() if r.note})
    text = render(results, compiles, impls, header, notes)
    print(text)
    output = args.output or (None if args.small else DEFAULT_OUTPUT)
    if output is not None and not args.no_write:
        write_sections(output, text, SECTIONS)  # the contractions benchmark's section stays
        print(f"written to {output}", file=sys.stderr)
    return 0


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
