"""``python -m fuse_mlir.testing.fuzz``: run the differential and mutation fuzzers and print a summary."""

from __future__ import annotations

import argparse
import sys

from fuse_mlir.testing.fuzz import driver, reproducer, run_mutants, run_programs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fuse_mlir.testing.fuzz", description=__doc__)
    ap.add_argument("-n", "--programs", type=int, default=200, help="generated programs (default 200)")
    ap.add_argument("-m", "--mutants", type=int, default=0, help="text mutants (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="first program seed")
    ap.add_argument("--backends", default="reference,llvm-O2", help=f"comma list of {', '.join(driver.CONFIGS)} or all")
    ap.add_argument("--long", action="store_true", help="20,000 programs and 20,000 mutants on every installed backend")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program before it counts as a hang")
    ap.add_argument("--no-minimise", action="store_true", help="report failures as generated")
    ap.add_argument(
        "-j", "--jobs", type=int, default=None, help="worker processes (default: the usable CPUs, at most 8)"
    )
    ap.add_argument("--max-groups", type=int, default=4, help="equation groups per program (default 4; CI uses 2)")
    ap.add_argument(
        "--fixpoint",
        type=float,
        default=0.15,
        help="share of programs given a recursive group and run in fixpoint mode (default 0.15; "
        "torch, jax and numba skip them)",
    )
    ap.add_argument(
        "--streaming",
        type=float,
        default=0.1,
        help="share of programs given a streamed recurrence and run step by step in streaming mode (default 0.1; "
        "torch, jax and numba skip them)",
    )
    ap.add_argument(
        "--demand",
        type=float,
        default=0.2,
        help="share of programs (not streamed) that also make demand queries, runner.query(name, select), after "
        "the run (default 0.2)",
    )
    args = ap.parse_args(argv)
    for flag in ("fixpoint", "streaming", "demand"):
        if not 0.0 <= getattr(args, flag) <= 1.0:
            ap.error(f"--{flag} must be between 0 and 1 (got {getattr(args, flag)})")
    configs = driver.available_configs() if args.backends == "all" or args.long else args.backends.split(",")
    n, m = (20000, 20000) if args.long else (args.programs, args.mutants)
    failed = False
    if n:
        rep = run_programs(
            n,
            configs,
            seed=args.seed,
            timeout=args.timeout,
            minimise_failures=not args.no_minimise,
            progress=True,
            jobs=args.jobs,
            max_groups=args.max_groups,
            fixpoint=args.fixpoint,
            streaming=args.streaming,
            demand=args.demand,
        )
        print(rep.table(configs))
        for f in rep.failures:
            print(f"\n=== {f.headline()}")
            if f.invalid_ir:
                print(f.invalid_ir.splitlines()[0])
            print(reproducer(f.minimised or f.program))
        failed |= bool(rep.failures)
    if m:
        mrep = run_mutants(
            m, configs[:2] if len(configs) > 1 else configs, seed=args.seed, timeout=args.timeout, jobs=args.jobs
        )
        print(mrep.table(["mutants"]))
        for f in mrep.failures:
            print(f"\n=== mutant {f.seed}: {f.kind}: {f.detail[:1500]}")
        failed |= bool(mrep.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
