"""Cold compile time against program length: fuse_mlir at O0 and O2, stage by stage, next to jax.jit.

Generates transformer-like programs of N equations (layer norm, attention with
softmax, an MLP with bias and relu, residual adds, reductions; see
:func:`program`) and, in this one process, compiles each cold: the kernel
caches off (``cache=False``, and ``FUSE_CACHE_DIR`` pointed at a fresh empty
folder), a new :class:`~fuse_mlir.program.Program` each time (no lowering
cache). The time of every stage comes from the compiler's own stage
timing (:mod:`fuse_mlir.stages`): parse, resolve, lowering to tensor_eq, each
pass and lowering of the pipeline, loop → LLVM dialect, LLVM IR emission,
LLVM's parse / optimise / codegen. jax.jit's compile of the same program
through the jax backend is its first call less a steady call (tracing plus
XLA's compile; the tensor_eq lowering they share is not counted for jax).

    python -m benchmarks.compile_scaling                    # N = 50 100 200 400 800
    python -m benchmarks.compile_scaling --quick            # N up to 200, fewer stages shown
    python -m benchmarks.compile_scaling --sizes 100,400 --levels O2 --no-jax
    python -m benchmarks.compile_scaling --wide             # one equation summing N inputs, N = 250 to 4000

``--wide`` measures the other axis of program size: one expression of N terms
(``S[p,i] = X0[p,i] + X1[p,i] + ...``), whose fusion, shape classes, cache key
and entry function (one pointer and one shape check per input) grow with N.

The growth column is t(largest N) / t(N = 100) (linear: the ratio of the
Ns, 8 for 800 / 100). Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

SIZES = (50, 100, 200, 400, 800)
QUICK_SIZES = (50, 100, 200)
WIDE_SIZES = (250, 500, 1000, 2000, 4000)
QUICK_WIDE_SIZES = (250, 500, 1000)
P, D, E, F = 8, 16, 16, 32  # sequence, model width, head width, MLP width


def _block(k: int) -> list[str]:
    """One transformer block (15 equations): layer norm, attention, MLP, residuals, reductions."""
    h, n = f"H{k}", f"N{k}"
    return [
        f"Mu{k}[p] avg= {h}[p,i]",
        f"C{k}[p,i] = {h}[p,i] - Mu{k}[p]",
        f"Var{k}[p] avg= C{k}[p,i] C{k}[p,i]",
        f"{n}[p,i] = C{k}[p,i] / sqrt(Var{k}[p] + 0.00001) G{k}[i] + Be{k}[i]",
        f"Q{k}[p,e] = {n}[p,i] Wq{k}[i,e]",
        f"K{k}[p,e] = {n}[p,i] Wk{k}[i,e]",
        f"V{k}[p,e] = {n}[p,i] Wv{k}[i,e]",
        f"S{k}[p,q] = 0.25 Q{k}[p,e] K{k}[q,e]",
        f"A{k}[p,q.] = softmax(S{k}[p,q])",
        f"O{k}[p,e] = A{k}[p,q] V{k}[q,e]",
        f"R{k}[p,i] = {h}[p,i] + O{k}[p,e] Wo{k}[e,i]",
        f"F{k}[p,f] = relu(R{k}[p,i] W1{k}[i,f] + B1{k}[f])",
        f"H{k + 1}[p,i] = R{k}[p,i] + F{k}[p,f] W2{k}[f,i] + B2{k}[i]",
        f"Tot{k + 1} = Tot{k} + H{k + 1}[p,i] H{k + 1}[p,i]",
        f"Top{k}[p] max= H{k + 1}[p,i]",
    ]


INPUTS = {  # name prefix -> shape, per block
    "G": (D,),
    "Be": (D,),
    "Wq": (D, E),
    "Wk": (D, E),
    "Wv": (D, E),
    "Wo": (E, D),
    "W1": (D, F),
    "B1": (F,),
    "W2": (F, D),
    "B2": (D,),
}


def program(n: int) -> tuple[str, dict[str, np.ndarray]]:
    """A program of exactly ``n`` equations (blocks of :func:`_block`, the last one cut) and its inputs.

    Every tensor that no later equation reads is exported, so nothing is dead.
    """
    lines = ["Tot0 = 0.0"]
    k = 0
    while len(lines) < n:
        lines.extend(_block(k))
        k += 1
    lines = lines[:n]
    defined = [line.split("[", 1)[0].split(" ", 1)[0] for line in lines]
    text = "\n".join(lines)
    read_later = set()
    for i, line in enumerate(lines):
        rhs = line.split("=", 1)[1]
        read_later.update(name for name in defined[:i] if f"{name}[" in rhs or f" {name} " in f" {rhs} ")
    exports = [name for name in defined if name not in read_later]
    rng = np.random.default_rng(0)
    inputs = {"H0": rng.standard_normal((P, D))}
    for b in range(k):
        for prefix, shape in INPUTS.items():
            name = f"{prefix}{b}"
            if f"{name}[" in text:
                inputs[name] = rng.standard_normal(shape) * (0.3 if len(shape) == 2 else 1.0)
    return f"{text}\nexport {', '.join(exports)}\n", inputs


def wide_program(n: int) -> tuple[str, dict[str, np.ndarray]]:
    """One equation summing ``n`` inputs of shape (P, D), and its inputs."""
    rng = np.random.default_rng(0)
    terms = " + ".join(f"X{k}[p,i]" for k in range(n))
    return f"S[p,i] = {terms}\n", {f"X{k}": rng.standard_normal((P, D)) for k in range(n)}


@dataclass
class Row:
    """One compile: its stages (seconds) and wall time."""

    stages: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0


def compile_fuse(src: str, inputs: dict[str, np.ndarray], n: int, opt_level: str) -> Row:
    """Cold-compile ``src`` with the llvm backend at ``opt_level``, stage by stage (the call's run excluded)."""
    from fuse_mlir.program import Program
    from fuse_mlir.stages import StageTimes

    gc.collect()
    t0 = time.perf_counter()
    with StageTimes() as times:
        prog = Program(src, f"scaling{n}.fuse")
        runner = prog.compile("llvm", opt_level=opt_level, cache=False)
        runner(**inputs)
    wall = time.perf_counter() - t0
    trace = runner._last_run()
    return Row(times.as_dict(), wall - trace.seconds)


def compile_jax(src: str, inputs: dict[str, np.ndarray], n: int) -> float:
    """jax.jit's compile of the program through the jax backend: first call less a steady call."""
    from fuse_mlir.program import Program

    prog = Program(src, f"scaling{n}.fuse")
    prog.lower({k: v.dtype for k, v in inputs.items()})  # the shared tensor_eq lowering is not jax's cost
    runner = prog.compile("jax")
    gc.collect()
    t0 = time.perf_counter()
    runner(**inputs)
    t1 = time.perf_counter()
    runner(**inputs)
    t2 = time.perf_counter()
    return max((t1 - t0) - (t2 - t1), 0.0)


GROUPS = {  # table columns: stage names summed into each
    "frontend": ("parse", "resolve", "lower-to-te"),
    "te→ew": ("contract-order", "lower-te-to-ew"),
    "passes": ("dedup", "fuse", "inplace", "expand-math", "schedule", "canonicalize", "cse", "dce"),
    "ew→loop": ("lower-ew-to-loop",),
    "loop→llvm": ("lower-loop-to-llvm",),
    "emit IR": ("emit-llvm-ir",),
    "llvmlite": ("llvm-parse", "llvm-optimize", "llvm-codegen", "llvm-load"),
}
# "other": the backend's work between the stages it reports (backend-other: cache keys, tables, set-up).


def grouped(stages: dict[str, float]) -> dict[str, float]:
    """Stage seconds summed into the table's columns (anything unlisted goes to ``other``)."""
    out = dict.fromkeys([*GROUPS, "other"], 0.0)
    where = {s: g for g, names in GROUPS.items() for s in names}
    for name, secs in stages.items():
        out[where.get(name, "other")] += secs
    return out


def _fmt(seconds: float) -> str:
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"N in {QUICK_SIZES}")
    ap.add_argument("--sizes", help="comma-separated Ns (default: 50,100,200,400,800; --wide: 250,...,4000)")
    ap.add_argument("--wide", action="store_true", help="one equation of N terms instead of N equations")
    ap.add_argument("--levels", default="O0,O2", help="fuse optimisation levels (default: O0,O2)")
    ap.add_argument("--no-jax", action="store_true", help="skip jax.jit")
    ap.add_argument("--stages", action="store_true", help="also print every stage's seconds per compile")
    args = ap.parse_args(argv)
    make = wide_program if args.wide else program
    default = (QUICK_WIDE_SIZES if args.quick else WIDE_SIZES) if args.wide else (QUICK_SIZES if args.quick else SIZES)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(default)
    levels = [lv.strip() for lv in args.levels.split(",") if lv.strip()]

    os.environ["FUSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fuse-scaling-")  # a fresh, empty disk cache
    warm_src, warm_inputs = program(20)  # first-use costs (imports, LLVM and allocator set-up) out of the way
    for level in levels:
        compile_fuse(warm_src, warm_inputs, 20, level)
    jax_ok = not args.no_jax
    if jax_ok:
        try:
            compile_jax(warm_src, warm_inputs, 20)
        except ImportError as err:
            print(f"jax unavailable ({err}); skipped", file=sys.stderr)
            jax_ok = False

    load = os.getloadavg()
    what = "terms of one equation" if args.wide else "program length"
    print(f"# cold compile vs {what} (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})\n")
    results: dict[tuple[str, int], Row] = {}
    jax_s: dict[int, float] = {}
    for n in sizes:
        src, inputs = make(n)
        for level in levels:
            results[level, n] = row = compile_fuse(src, inputs, n, level)
            print(f"  N={n} {level}: {_fmt(row.wall)} s", file=sys.stderr, flush=True)
            if args.stages:
                for name, secs in row.stages.items():
                    print(f"      {name:<20} {secs * 1e3:10.1f} ms", file=sys.stderr)
        if jax_ok:
            jax_s[n] = compile_jax(src, inputs, n)
            print(f"  N={n} jax.jit: {_fmt(jax_s[n])} s", file=sys.stderr, flush=True)

    cols = [*GROUPS, "other"]
    head = ["N", "level", *cols, "total", "wall"] + (["jax.jit", "fuse/jax"] if jax_ok else [])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n in sizes:
        for level in levels:
            row = results[level, n]
            g = grouped(row.stages)
            cells = [str(n), level, *(_fmt(g[c]) for c in cols), _fmt(sum(g.values())), _fmt(row.wall)]
            if jax_ok:
                cells += [_fmt(jax_s[n]), f"{row.wall / jax_s[n]:.2f}" if jax_s[n] > 0 else "-"]
            print("| " + " | ".join(cells) + " |")
    base = 100 if 100 in sizes else sizes[0]
    top = sizes[-1]
    if top != base:
        print(f"\ngrowth t(N={top}) / t(N={base}) (linear would be {top / base:.1f}):")
        for level in levels:
            a, b = results[level, base], results[level, top]
            ga, gb = grouped(a.stages), grouped(b.stages)
            parts = [f"{c} {gb[c] / ga[c]:.1f}" for c in cols if ga[c] > 1e-3]
            print(f"  {level}: wall {b.wall / a.wall:.1f}; " + ", ".join(parts))
        if jax_ok and jax_s.get(base):
            print(f"  jax.jit: {jax_s[top] / jax_s[base]:.1f}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
