"""Contractions written every way: fuse_mlir's llvm backend against np.einsum, opt_einsum, torch and jax.jit.

``python -m benchmarks.contractions`` runs a suite of contraction programs
(skewed matrix chains, ``W[h,i] X[b,i]`` in its four index orders, batched
matmul with the batch index in each position, attention scores, a bilinear
form, a 3-tensor contraction, an MPS contraction, a Tucker reconstruction,
an outer product feeding a reduction), each in float64 and float32, with
**every permutation of its factors** under two index namings. For each
program it prints fuse_mlir's fastest and slowest permutation, the peers
(``np.einsum(optimize=True)``, ``opt_einsum.contract``, ``torch.einsum``,
``jax.jit(jnp.einsum)``, timed in the same process on the program as
written), the worst permutation over the best peer (``worst/peer``: target
≤ 1.11, i.e. fuse's worst ≥ 0.9× the peer's speed) and the spread
(slowest / fastest permutation; target ≤ 1.2); then the repeat-shape cost of
the shape-aware planning (target ≤ 1 µs). Every answer is checked against
``np.einsum`` in float64 before it is timed; no timing is asserted anywhere.

Every permutation and peer of a program is timed in interleaved shuffled
rounds (:func:`benchmarks.measure.interleaved_medians`, each batch after one
untimed call of its own), so load that comes and goes falls on all of them
alike rather than on whichever permutation ran at the time.

``--quick`` uses small extents, one index naming and short timing; ``--write``
puts the table into ``benchmarks/RESULTS.md`` (section "Contractions").
Run as a command, it first fixes OpenBLAS's environment as the report does
(:mod:`benchmarks.blas_env`; the table's header says which).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.blas_env import describe as describe_blas_env
from benchmarks.blas_env import reexec
from benchmarks.measure import Budget, interleaved_medians
from benchmarks.results_md import write_sections


@dataclass(frozen=True)
class Case:
    """One contraction program: its factors (name, indices), result indices and the extents (full, quick)."""

    name: str
    factors: tuple[tuple[str, str], ...]
    result: str
    extents: dict[str, int]
    quick: dict[str, int]

    def source(self, order: Sequence[int], rename: dict[str, str]) -> str:
        """The program with the factors in ``order`` and indices renamed."""

        def ref(name: str, idx: str) -> str:
            return f"{name}[{','.join(rename[c] for c in idx)}]" if idx else name

        rhs = " ".join(ref(*self.factors[k]) for k in order)
        return f"{ref('R', self.result)} = {rhs}\nexport R\n"

    def spec(self) -> str:
        """The einsum subscripts, as written."""
        return ",".join(idx for _, idx in self.factors) + "->" + self.result


SUITE: list[Case] = [
    Case(
        "chain3_skewed",
        (("Z", "kl"), ("Y", "jk"), ("X", "ij")),
        "il",
        dict(i=10, j=1500, k=1500, l=1500),
        dict(i=10, j=300, k=300, l=300),
    ),
    Case(
        "chain4",
        (("A", "ij"), ("B", "jk"), ("C", "kl"), ("D", "lm")),
        "im",
        dict(i=600, j=40, k=600, l=8, m=600),
        dict(i=150, j=20, k=150, l=4, m=150),
    ),
    Case("wx_hi_bi", (("W", "hi"), ("X", "bi")), "bh", dict(b=1024, h=1024, i=1024), dict(b=192, h=192, i=192)),
    Case("wx_ih_bi", (("W", "ih"), ("X", "bi")), "bh", dict(b=1024, h=1024, i=1024), dict(b=192, h=192, i=192)),
    Case("wx_hi_ib", (("W", "hi"), ("X", "ib")), "bh", dict(b=1024, h=1024, i=1024), dict(b=192, h=192, i=192)),
    Case("wx_ih_ib", (("W", "ih"), ("X", "ib")), "bh", dict(b=1024, h=1024, i=1024), dict(b=192, h=192, i=192)),
    Case(
        "bmm_batch_first",
        (("A", "bij"), ("B", "bjk")),
        "bik",
        dict(b=32, i=128, j=128, k=128),
        dict(b=8, i=48, j=48, k=48),
    ),
    Case(
        "bmm_batch_middle",
        (("A", "ibj"), ("B", "jbk")),
        "ibk",
        dict(b=32, i=128, j=128, k=128),
        dict(b=8, i=48, j=48, k=48),
    ),
    Case(
        "bmm_batch_last",
        (("A", "ijb"), ("B", "jkb")),
        "ikb",
        dict(b=32, i=128, j=128, k=128),
        dict(b=8, i=48, j=48, k=48),
    ),
    Case(
        "attention_scores",
        (("Q", "bhqd"), ("K", "bhkd")),
        "bhqk",
        dict(b=4, h=8, q=256, k=256, d=64),
        dict(b=2, h=4, q=64, k=64, d=32),
    ),
    Case(
        "bilinear",
        (("x", "bi"), ("A", "ij"), ("z", "bj")),
        "b",
        dict(b=1024, i=512, j=512),
        dict(b=128, i=96, j=96),
    ),
    Case(
        "tensor3",
        (("A", "ijk"), ("B", "jl"), ("C", "klm")),
        "im",
        dict(i=64, j=48, k=48, l=64, m=64),
        dict(i=16, j=12, k=12, l=16, m=16),
    ),
    Case(
        "mps",
        (("A", "pa"), ("B", "aqb"), ("C", "brc"), ("D", "cs")),
        "pqrs",
        dict(p=16, q=16, r=16, s=16, a=64, b=64, c=64),
        dict(p=6, q=6, r=6, s=6, a=12, b=12, c=12),
    ),
    Case(
        "tucker",
        (("G", "abc"), ("U", "ia"), ("V", "jb"), ("W", "kc")),
        "ijk",
        dict(i=96, j=96, k=96, a=24, b=24, c=24),
        dict(i=24, j=24, k=24, a=6, b=6, c=6),
    ),
    Case(
        "outer_reduce",
        (("x", "i"), ("y", "j"), ("z", "j")),
        "i",
        dict(i=200000, j=200000),
        dict(i=20000, j=20000),
    ),
]

DTYPES = ("float64", "float32")


def inputs_for(case: Case, dtype: str, extents: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs (standard normal, scaled so sums stay O(1)) for each factor."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, idx in case.factors:
        shape = tuple(extents[c] for c in idx)
        out[name] = (rng.standard_normal(shape) / np.sqrt(max(1, max(shape, default=1)))).astype(dtype)
    return out


CLOCK: Callable[[], float] = time.perf_counter
"""Wall time; ``--cpu-time`` switches to the process's CPU time (all its threads), steadier on a loaded machine."""


def peers(case: Case, ins: dict[str, np.ndarray]) -> dict[str, Callable[[], Any]]:
    """The peers' calls on the program as written (each may be missing here: then it is left out)."""
    spec = case.spec()
    arrays = [ins[name] for name, _ in case.factors]
    calls: dict[str, Callable[[], Any]] = {"np.einsum": lambda: np.einsum(spec, *arrays, optimize=True)}
    try:
        import opt_einsum

        expr = opt_einsum.contract_expression(spec, *(a.shape for a in arrays))
        calls["opt_einsum"] = lambda: expr(*arrays)
    except ImportError:
        pass
    try:
        import torch

        torch.set_grad_enabled(False)
        ts = [torch.from_numpy(a) for a in arrays]
        calls["torch"] = lambda: torch.einsum(spec, *ts)
    except ImportError:
        pass
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        f = jax.jit(lambda *xs: jnp.einsum(spec, *xs, precision=jax.lax.Precision.HIGHEST))
        js = [jax.device_put(a) for a in arrays]
        calls["jax"] = lambda: f(*js).block_until_ready()
    except ImportError:
        pass
    return calls


@dataclass
class Row:
    """One (program, dtype): fuse's per-permutation times and the peers'."""

    case: str
    dtype: str
    fuse: dict[str, float]
    peers: dict[str, float]

    @property
    def best_peer(self) -> tuple[str, float]:
        return min(self.peers.items(), key=lambda kv: kv[1])

    @property
    def worst_over_peer(self) -> float:
        return max(self.fuse.values()) / self.best_peer[1]

    @property
    def spread(self) -> float:
        return max(self.fuse.values()) / min(self.fuse.values())


def check(got: np.ndarray, want: np.ndarray, dtype: str, what: str) -> None:
    tol = 1e-9 if dtype == "float64" else 2e-3
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    err = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want))) if want.size else 0.0
    if err > tol * scale:
        raise AssertionError(f"{what}: max error {err:.3g} (scale {scale:.3g})")


def run_case(case: Case, dtype: str, quick: bool, budget: float) -> Row:
    from fuse_mlir import Program

    extents = case.quick if quick else case.extents
    ins = inputs_for(case, dtype, extents)
    want = np.einsum(case.spec(), *(ins[n].astype(np.float64) for n, _ in case.factors))
    letters = sorted(extents)
    namings = [dict(zip(letters, letters))]
    if not quick:
        namings.append(dict(zip(letters, "zyxwvutsrqpon"[: len(letters)])))
    calls: dict[str, Callable[[], Any]] = {}
    for nk, rename in enumerate(namings):
        for order in itertools.permutations(range(len(case.factors))):
            runner = Program(case.source(order, rename)).compile("llvm")
            check(runner(**ins)["R"], want, dtype, f"fuse {case.name} {order}")
            calls[f"fuse {nk}:{''.join(map(str, order))}"] = lambda r=runner: r(**ins)
    peer_calls = peers(case, ins)
    for name, call in peer_calls.items():
        check(np.asarray(call()), want, dtype, f"{name} {case.name}")
        calls[name] = call
    # Every permutation and peer in interleaved shuffled rounds, as benchmarks.report times its workloads: a
    # noisy second falls on all of them alike instead of showing up as one permutation's spread.
    medians = interleaved_medians(calls, Budget(budget * len(calls), 5, 200), clock=CLOCK)
    fuse = {k.removeprefix("fuse "): t for k, t in medians.items() if k not in peer_calls}
    return Row(case.name, dtype, fuse, {k: medians[k] for k in peer_calls})


def planning_overhead(calls: int = 50000) -> dict[str, float]:
    """Seconds the shape-aware planning adds to a call of a repeated shape: the direct path's shape dispatch
    (measured around a no-op in place of the kernel call, so only the dispatch is timed) and the general
    path's plan lookup; plus one whole direct call of a tiny 3-factor chain for scale."""
    from fuse_mlir import Program
    from fuse_mlir.passes.transforms.contract_plan import ShapePlans

    ins = {n: np.ones((2, 2)) for n in "XYZ"}
    runner = Program("R[i,l] = X[i,j] Y[j,k] Z[k,l]\nexport R\n").compile("llvm")
    runner(**ins)
    runner(**ins)
    dispatch, _ = runner._fast[tuple(ins)]
    plans = next(p for p in runner._plans.values() if isinstance(p, ShapePlans))
    key = plans.calls.key(ins)
    kernel = plans.calls.table[key]

    def per_call(f: Callable[[], Any], n: int = calls) -> float:
        best = float("inf")
        for _ in range(7):
            t0 = time.thread_time()  # this thread's CPU time: another process holding the core does not count
            for _ in range(n // 7):
                f()
            best = min(best, (time.thread_time() - t0) / (n // 7))
        return best

    whole = per_call(lambda: dispatch(ins, None), calls // 10)

    def noop(inputs: Any, out: Any) -> None:
        return None

    plans.calls.table[key] = (noop, kernel[1], None)
    try:
        dispatched = per_call(lambda: dispatch(ins, None))
        bare = per_call(lambda: noop(ins, None))
    finally:
        plans.calls.table[key] = kernel
    lookup = per_call(lambda: plans.lowered_for(ins))
    return {"direct_dispatch": dispatched - bare, "general_lookup": lookup, "call": whole}


def table(rows: list[Row], overhead: dict[str, float], quick: bool, cpu: bool = False) -> str:
    load = os.getloadavg()[0]
    flags = (" --quick" if quick else "") + (" --cpu-time" if cpu else "")
    lines = [
        f"Command: `python -m benchmarks.contractions{flags}`; load average (1 min) {load:.2f}; "
        f"OpenBLAS environment: {describe_blas_env()}; "
        f"{'process CPU time' if cpu else 'wall time'}; "
        f"{'quick: small extents, one index naming' if quick else 'full extents, two index namings'}; "
        "every permutation of the factors. Times in ms (median); worst/peer = fuse's slowest permutation over the "
        "fastest peer (target ≤ 1.11); spread = slowest / fastest permutation (target ≤ 1.2).",
        "",
        "| program | dtype | perms | fuse best | fuse worst | np.einsum | opt_einsum | torch | jax | best peer "
        "| worst/peer | spread |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]

    def ms(x: float | None) -> str:
        return "n/a" if x is None else f"{x * 1e3:.3g}"

    for r in rows:
        peer, _ = r.best_peer
        lines.append(
            f"| {r.case} | {r.dtype} | {len(r.fuse)} | {ms(min(r.fuse.values()))} | {ms(max(r.fuse.values()))} | "
            + " | ".join(ms(r.peers.get(p)) for p in ("np.einsum", "opt_einsum", "torch", "jax"))
            + f" | {peer} | **{r.worst_over_peer:.2f}** | {r.spread:.2f} |"
        )
    lines += [
        "",
        f"Repeat-shape planning cost (thread CPU time): direct-path shape dispatch "
        f"{overhead['direct_dispatch'] * 1e9:.0f} ns per call (of a {overhead['call'] * 1e6:.2f} µs call), "
        f"general-path plan lookup {overhead['general_lookup'] * 1e9:.0f} ns (target ≤ 1 µs).",
    ]
    return "\n".join(lines)


SECTION = "Contractions (benchmarks/contractions.py)"
"""The section of RESULTS.md this benchmark owns."""


def write_results(text: str, path: Path) -> None:
    """Replace (or append) the "Contractions" section of RESULTS.md, keeping the others (:mod:`.results_md`)."""
    write_sections(path, f"## {SECTION}\n\n{text}", (SECTION,))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small extents, one index naming, short timing")
    ap.add_argument("--programs", default="", help="comma-separated program names (default: all)")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--write", action="store_true", help="write the table into benchmarks/RESULTS.md")
    ap.add_argument("--cpu-time", action="store_true", help="time CPU seconds of the process, not wall time")
    args = ap.parse_args(argv)
    global CLOCK
    if args.cpu_time:
        CLOCK = time.process_time
    chosen = [c for c in SUITE if not args.programs or c.name in args.programs.split(",")]
    budget = 0.05 if args.quick else 0.5
    rows = []
    for case in chosen:
        for dtype in args.dtypes.split(","):
            row = run_case(case, dtype, args.quick, budget)
            rows.append(row)
            print(
                f"{case.name:<18} {dtype:<8} fuse {min(row.fuse.values()) * 1e3:9.3f}..{max(row.fuse.values()) * 1e3:9.3f} ms"
                f"  best peer {row.best_peer[0]:<10} {row.best_peer[1] * 1e3:9.3f} ms  worst/peer {row.worst_over_peer:5.2f}"
                f"  spread {row.spread:5.2f}",
                flush=True,
            )
    text = table(rows, planning_overhead(), args.quick, args.cpu_time)
    print()
    print(text)
    if args.write:
        write_results(text, Path(__file__).with_name("RESULTS.md"))


if __name__ == "__main__":
    reexec("benchmarks.contractions", sys.argv[1:])  # OpenBLAS reads its environment when NumPy loads it
    main()
