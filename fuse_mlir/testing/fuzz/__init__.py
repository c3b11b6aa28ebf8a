"""The differential fuzzer: random programs against an independent oracle, and text mutants.

``python -m fuse_mlir.testing.fuzz`` runs it (``--help``); ``docs/testing.md``
describes what it covers. Modules: :mod:`.program` (the fuzzer's own
program description), :mod:`.generate` (random programs), :mod:`.oracle`
(a NumPy evaluator written from LANGUAGE.md, sharing no code with the
compiler), :mod:`.driver` (backends in watchdog-guarded workers,
comparison, classification), :mod:`.minimise` (delta debugging) and
:mod:`.mutate` (text mutants).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuse_mlir.testing.fuzz import driver, oracle
from fuse_mlir.testing.fuzz.generate import Generator
from fuse_mlir.testing.fuzz.minimise import minimise
from fuse_mlir.testing.fuzz.mutate import mutants, seeds_from_examples
from fuse_mlir.testing.fuzz.program import FuzzProgram

__all__ = ["Failure", "Report", "run_programs", "run_mutants", "reproducer", "Generator", "FuzzProgram"]


@dataclass
class Failure:
    """One failing (program, configuration), with its minimised reproducer."""

    seed: int
    config: str
    kind: str
    detail: str
    program: FuzzProgram
    minimised: FuzzProgram | None = None
    #: The verifier's error naming the pass that built invalid IR for this program, when one did.
    invalid_ir: str = ""

    def headline(self) -> str:
        """One line: seed, configuration, outcome and the first line of the detail."""
        first = self.detail.splitlines()[0] if self.detail else ""
        return f"seed {self.seed} on {self.config}: {self.kind}: {first}"


@dataclass
class Report:
    """Counts per configuration and outcome, and the failures."""

    counts: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    programs: int = 0
    skipped: int = 0
    seconds: float = 0.0

    def table(self, configs: list[str]) -> str:
        w = max([10, *(len(c) for c in configs)])
        head = f"{'backend':<{w}} {'programs':>8} {'agree':>7} {'disagree':>9} {'crash':>6} {'hang':>5}"
        rows = [head]
        for c in configs:
            n = sum(self.counts[(c, k)] for k in ("agree", "disagree", "crash", "hang"))
            rows.append(
                f"{c:<{w}} {n:>8} {self.counts[(c, 'agree')]:>7} {self.counts[(c, 'disagree')]:>9} "
                f"{self.counts[(c, 'crash')]:>6} {self.counts[(c, 'hang')]:>5}"
            )
        rows.append(f"{self.programs} programs ({self.skipped} skipped: value left open), {self.seconds:.0f} s")
        return "\n".join(rows)

    def explain(self, limit: int = 20) -> str:
        """The first ``limit`` failures for a test's message: outcome and detail, the pass that built invalid
        IR when one did, and the (minimised) reproducer of a generated program."""
        out = []
        for f in self.failures[:limit]:
            out.append(f"seed {f.seed} on {f.config}: {f.kind}: {f.detail[:600]}")
            if f.invalid_ir:
                out.append(f.invalid_ir.splitlines()[0])
            if f.program.eqs:
                out.append(reproducer(f.minimised or f.program))
        return "\n".join(out)


def reproducer(p: FuzzProgram) -> str:
    """A program's text and its inputs, ready to paste into a test."""
    lines = [p.source().rstrip()]
    if p.compile_options():
        opts = ", ".join(f"{k}={v!r}" for k, v in p.compile_options().items())
        lines.append(f"# compile with: {opts}")
    if p.mode == "streaming":
        given = ", ".join(f"{u}={u}[..., s]" for u in p.stream_inputs())
        lines.append(f"# run {p.steps} steps s = 0..{p.steps - 1}, each call given {given} (the rest whole)")
    for q in p.queries:
        lines.append(f"# then {q.text()[:-1]}, **inputs)")
    lines.append("# inputs:")
    for k, v in p.arrays().items():
        lines.append(f"#   {k} = np.array({v.tolist()!r}, dtype=np.{v.dtype})")
    return "\n".join(lines)


#: Failures of one run compiled again with the IR verified after each pass (one compile each).
MAX_DIAGNOSED = 50


def run_programs(
    n: int,
    configs: list[str],
    *,
    seed: int = 0,
    timeout: float = 60.0,
    minimise_failures: bool = True,
    max_minimise: int = 20,
    progress: bool = False,
    jobs: int | None = None,
    max_groups: int = 4,
    fixpoint: float = 0.0,
    streaming: float = 0.0,
    demand: float = 0.0,
) -> Report:
    """``n`` generated programs (seeds ``seed .. seed+n-1``) on ``configs`` against the oracle.

    ``fixpoint`` is the share of programs generated with a recursive group, run in fixpoint mode on the
    configurations that have it (the reference and llvm; the others skip those programs); ``streaming`` the
    share given a streamed recurrence over a stream input, run step by step in streaming mode (the same
    configurations); ``demand`` the share (of programs not streamed) that also make one to three demand queries
    after the run, each compared with the oracle's value of the tensor, selected.

    Every (program, configuration) is one task for a pool of ``jobs`` persistent workers (default: the
    usable CPUs); only failures are minimised, afterwards, in one worker. Every failure that is not a hang
    is compiled once more with the IR verified after each pass (:func:`driver.invalid_ir_pass`), and a pass
    that built invalid IR is kept in :attr:`Failure.invalid_ir`. With ``progress`` each failure is also
    printed as it comes, so a run stopped early still shows what it found.
    """
    rep = Report()
    start = time.perf_counter()
    pool = driver.Pool(jobs or driver.default_jobs(), timeout)
    try:
        progs: dict[int, tuple[FuzzProgram, dict, set[str]]] = {}
        tasks: list[driver.Task] = []
        keys: list[tuple[int, str]] = []
        for s in range(seed, seed + n):
            prog = Generator(s, max_groups=max_groups, fixpoint=fixpoint, streaming=streaming, demand=demand).program()
            arrays = prog.arrays()
            inexact: set[str] = set()
            try:
                want = oracle.evaluate(prog, arrays, inexact=inexact)
            except (oracle.Undefined, oracle.Reject):
                rep.skipped += 1
                continue
            rep.programs += 1
            progs[s] = (prog, want, inexact)
            options = prog.compile_options()
            for c in configs:
                if driver.supports(c, options):
                    tasks.append((driver.run_one, (prog.source(), arrays, c, *_run_args(prog))))
                    keys.append((s, c))
        done = 0
        for k, answer in pool.run(tasks):
            s, c = keys[k]
            prog, want, inexact = progs[s]
            out = driver.classify(want, answer, c, _loose(prog), inexact)
            rep.counts[(c, out.kind)] += 1
            if out.kind != "agree":
                rep.failures.append(Failure(s, c, out.kind, out.detail, prog))
                if progress:
                    print(f"  failure: {rep.failures[-1].headline()}", flush=True)
            done += 1
            if progress and done % (50 * len(configs)) == 0:
                print(f"  {done}/{len(tasks)} runs, {len(rep.failures)} failures", flush=True)
        rep.failures.sort(key=lambda f: (f.seed, f.config))
        if rep.failures:
            worker = driver.Worker(timeout)
            try:
                for f in rep.failures[:MAX_DIAGNOSED]:
                    if f.kind != "hang":
                        p = f.program
                        answer = worker.call(driver.invalid_ir_pass, (p.source(), p.arrays(), f.config, *_run_args(p)))
                        f.invalid_ir = answer if isinstance(answer, str) else ""
                if minimise_failures:
                    for f in rep.failures[:max_minimise]:
                        sig = signature(f.kind, f.detail)
                        f.minimised = minimise(f.program, _still_fails(worker, f.config, sig), budget=120)
            finally:
                worker.close()
    finally:
        pool.close()
    rep.seconds = time.perf_counter() - start
    return rep


def _run_args(p: FuzzProgram) -> tuple:
    """How the driver runs ``p`` besides its text, inputs and configuration: compile options, steps, streams."""
    return p.compile_options(), p.steps if p.mode == "streaming" else 0, p.stream_inputs(), tuple(p.queries)


def _loose(p: FuzzProgram) -> bool:
    """Whether the program computes in float32 somewhere (then floats compare at float32's tolerance)."""
    return any(v.dtype == np.float32 for v in p.data.values())


def signature(kind: str, detail: str) -> tuple[str, str]:
    """What makes two failures the same for the minimiser: the outcome and the kind of difference
    (a value, a dtype, a shape, a missing output; the error's first words for a crash)."""
    if kind == "disagree":
        return kind, " ".join(detail.split(": ", 1)[-1].split()[:1])
    if "error: " in detail:
        return kind, " ".join(detail.split("error: ", 1)[1].split()[:4])
    return kind, detail.split(":", 1)[0]


def _still_fails(worker: driver.Worker, config: str, sig: tuple[str, str]):  # noqa: ANN202
    def fails(p: FuzzProgram) -> bool:
        arrays = p.arrays()
        inexact: set[str] = set()
        want = oracle.evaluate(p, arrays, inexact=inexact)
        answer = worker.call(driver.run_one, (p.source(), arrays, config, *_run_args(p)))
        out = driver.classify(want, answer, config, _loose(p), inexact)
        return signature(out.kind, out.detail) == sig

    return fails


def run_mutants(
    n: int, configs: list[str], *, seed: int = 0, timeout: float = 30.0, generated: int = 40, jobs: int | None = None
) -> Report:
    """``n`` text mutants of the examples and of ``generated`` generated programs, compiled on ``configs``.

    A quarter as many again of the generated programs are recursive and a quarter streamed, so mutants reach the
    fixpoint and streaming lowerings (``driver.compile_text`` compiles a mutant in the mode its error asks for).
    """
    rep = Report()
    start = time.perf_counter()
    kinds: list[dict[str, Any]] = (
        [{}] * generated + [{"fixpoint": 1.0}] * (generated // 4) + [{"streaming": 1.0}] * (generated // 4)
    )
    seeds = seeds_from_examples() + [Generator(seed + k, **kw).program().source() for k, kw in enumerate(kinds)]
    texts = mutants(seeds, n, seed)
    pool = driver.Pool(jobs or driver.default_jobs(), timeout)
    try:
        for k, (status, detail) in pool.run([(driver.compile_text, (text, configs)) for text in texts]):
            kind = {"ok": "agree"}.get(status, status)
            rep.counts[("mutants", kind)] += 1
            rep.programs += 1
            if kind != "agree":
                rep.failures.append(
                    Failure(k, "mutants", kind, f"{detail}\n--- mutant ---\n{texts[k][:3000]}", FuzzProgram())
                )
    finally:
        pool.close()
    rep.failures.sort(key=lambda f: f.seed)
    rep.seconds = time.perf_counter() - start
    return rep
