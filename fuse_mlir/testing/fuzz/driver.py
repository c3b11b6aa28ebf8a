"""The differential driver: every backend against the oracle, in worker processes with a watchdog.

Outcomes per (program, backend): ``agree``; ``disagree`` (values, dtype or
shape differ from the oracle); ``crash`` (an exception that is not a
FuseError, or a FuseError where the oracle has a value); ``hang`` (the
worker passed the per-program timeout and was killed). Text mutants are
run by the same workers (:mod:`fuse_mlir.testing.fuzz.mutate`): there a
FuseError with a location is a pass, anything else a crash.

A task is a module-level function and its arguments (both pickled to a
spawned worker). Workers die with the process that started them (Linux's
parent-death signal), so a driver killed while a worker is stuck in a
runaway compile leaves nothing running. A failure is compiled once more with
the IR verified after every pass (``FUSE_VERIFY=each``), so a pass that
builds invalid IR is named in the report instead of surfacing as an LLVM
parse error or as wrong values.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuse_mlir.testing.fuzz.mutate import EXAMPLES
from fuse_mlir.testing.fuzz.program import Query

#: Backend configurations: name -> compile() arguments.
CONFIGS: dict[str, dict[str, Any]] = {
    "reference": {"backend": "reference"},
    "llvm-O0": {"backend": "llvm", "opt_level": 0},
    "llvm-O2": {"backend": "llvm", "opt_level": 2},
    # Every parallel nest of two or more iterations split over two threads: the generated programs are small, so
    # at the default parallel_min (65536) none of them would run the threaded code.
    "llvm-threads": {"backend": "llvm", "opt_level": 2, "threads": 2, "parallel_min": 0},
    "torch": {"backend": "torch"},
    "jax": {"backend": "jax"},
    "numba": {"backend": "numba"},
}


def available_configs() -> list[str]:
    """The configurations whose hand-off packages are installed here."""
    import importlib.util

    out = []
    for name in CONFIGS:
        if name in ("torch", "jax", "numba") and importlib.util.find_spec(name) is None:
            continue
        out.append(name)
    return out


# ----------------------------------------------------------------------------- in the worker


def _calls(arrays: dict[str, np.ndarray], steps: int, streams: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    """The inputs of each runner call, copied: one call, or one per streaming step with each stream input's
    slice along its last axis (the rest whole)."""
    return [{k: (v[..., s] if k in streams else v).copy() for k, v in arrays.items()} for s in range(max(steps, 1))]


def supports(config: str, options: dict[str, Any]) -> bool:
    """Whether ``config`` runs programs compiled with ``options``: fixpoint and streaming modes are the
    reference's and llvm's."""
    return options.get("mode", "single") == "single" or CONFIGS[config]["backend"] in ("reference", "llvm")


def run_one(
    source: str,
    arrays: dict[str, np.ndarray],
    config: str,
    options: dict[str, Any] | None = None,
    steps: int = 0,
    streams: tuple[str, ...] = (),
    queries: tuple[Query, ...] = (),
) -> tuple[str, Any]:
    """Compile and run ``source`` on one configuration: ("ok", outputs) | ("fuse_error", text) | ("crash", tb).

    ``options`` are the program's own compile keywords (its mode). In fixpoint mode the outputs also hold
    each recursive group's run count and converged flag, as ``<names>#iterations`` and ``<names>#converged``
    (the group's tensor names sorted and joined by ``+``), which the oracle computes too. In streaming mode
    the runner makes ``steps`` calls, giving the ``streams`` inputs one slice of their last axis each, and
    the outputs are each step's exports as ``name@step``. After the run, each of ``queries`` is asked of the
    runner (``runner.query``, demand mode) and its answer is an output under the query's label.
    """
    from fuse_mlir import FuseError, Program
    from fuse_mlir.diagnostics import diagnostic_handler

    try:
        # the warnings (a fixpoint that reached max_iters) are outputs the comparison already sees
        with diagnostic_handler(lambda diagnostic: None):
            runner = Program(source).compile(**CONFIGS[config], **(options or {}))
            if steps:
                got = {}
                for s, given in enumerate(_calls(arrays, steps, streams)):
                    got.update({f"{k}@{s + 1}": np.array(v, copy=True) for k, v in runner(**given).items()})
                return "ok", got
            (given,) = _calls(arrays, steps, streams)
            out = runner(**given)
        got = {k: np.array(v, copy=True) for k, v in out.items()}
        if (options or {}).get("mode") == "fixpoint" and runner.last_run is not None:
            for g in runner.last_run.groups:
                label = "+".join(sorted(g.names))
                got[f"{label}#iterations"] = np.array(g.iterations, dtype=np.int64)
                got[f"{label}#converged"] = np.array(int(g.converged), dtype=np.int8)
        with diagnostic_handler(lambda diagnostic: None):
            for q in queries:
                got[q.label()] = np.array(runner.query(q.name, q.selection(), **given), copy=True)
        return "ok", got
    except FuseError as e:
        return "fuse_error", str(e)
    except BaseException as e:  # noqa: BLE001 - a crash is what the fuzzer looks for
        if isinstance(e, KeyboardInterrupt):
            raise
        return "crash", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"


def invalid_ir_pass(
    source: str,
    arrays: dict[str, np.ndarray],
    config: str,
    options: dict[str, Any] | None = None,
    steps: int = 0,
    streams: tuple[str, ...] = (),
    queries: tuple[Query, ...] = (),
) -> str | None:
    """Compile and run ``source`` again, uncached, with the IR verified after every pass: the verifier's error,
    which names the pass that built invalid IR, or None when every pass's output verifies.

    The driver asks this of each failure: invalid IR can crash LLVM, or compile and give wrong values (a
    float32 stored into a float64 buffer writes half of each element), and either way the pass is the lead.
    """
    from fuse_mlir import Program

    kw = {**CONFIGS[config], **(options or {})}
    if kw["backend"] == "llvm":
        kw["cache"] = False  # a cached kernel would skip the lowering
    before = os.environ.get("FUSE_VERIFY")
    os.environ["FUSE_VERIFY"] = "each"
    try:
        runner = Program(source).compile(**kw)
        for given in _calls(arrays, steps, streams):
            runner(**given)
        for q in queries:
            runner.query(q.name, q.selection(), **given)
    except Exception as e:  # noqa: BLE001 - only a verifier's message is wanted here
        text = str(e)
        return text if "does not verify" in text else None
    finally:
        if before is None:
            del os.environ["FUSE_VERIFY"]
        else:
            os.environ["FUSE_VERIFY"] = before
    return None


MODE_HINTS = (("recursive programs need", "fixpoint"), ("needs streaming mode", "streaming"))
"""Phrases of the errors that tell the user a program needs another mode, and that mode: a text mutant of a
recursive or streamed program is compiled again in the mode its error names, so the fixpoint and streaming
lowerings (and the run, when it names no inputs) meet mutants too, not only the error that stops single mode."""


#: The extents a text mutant's inputs may have, drawn by the mutant's text: 1 reaches the single-element edge
#: cases, 3 and 4 the vector remainders.
MUTANT_EXTENTS = (1, 2, 3, 4)


@dataclass(frozen=True)
class AxisClasses:
    """Which input axes a program requires to be equal, read from its tensor_eq checks: ``of`` maps
    (input, axis) to a class, ``fixed`` a class to the constant extent it must have (a source file's shape, an
    ``axis`` declaration). Axes that no check joins are absent and get their own extents."""

    of: Mapping[tuple[str, int], int]
    fixed: Mapping[int, int]


def axis_classes(module: Any) -> AxisClasses:
    """The classes of input axes that ``te.check_dim`` equalities join in ``module`` (streaming mode's
    :func:`~fuse_mlir.interp.shapes.tied_extents`, with no input given): so that a mutant's inputs can have a
    different extent per class, which uniform extents cannot tell from a transposed access, and still pass the
    program's shape checks. A class tied to a constant (an ``axis`` declaration) is fixed to it. Checks against
    derived extents (a slice's length, a concat's sum) are not followed: an input they constrain may fail them,
    and the mutant then runs on uniform extents (:func:`compile_text`)."""
    from fuse_mlir.interp.shapes import tied_extents

    ids: dict[Any, int] = {}
    of: dict[tuple[str, int], int] = {}
    fixed: dict[int, int] = {}
    for (_, name, axis), root in sorted(tied_extents(module, {}).items()):
        cls = of[(name, axis)] = ids.setdefault(root, len(ids))
        if root[0] == "int":
            fixed[cls] = root[1]
    return AxisClasses(of, fixed)


def mixed_extents(seed: int) -> bool:
    """Whether the mutant with this text key draws an extent per axis class (else one for every axis)."""
    return (seed >> 16) & 1 == 1


def tiny_inputs(specs: Mapping[str, Any], seed: int, classes: AxisClasses | None = None) -> dict[str, np.ndarray]:
    """Inputs for a text mutant from its runner's input specs, drawn from ``seed``: floats in [-2, 2), integers
    in [0, the smallest extent) (valid positions of any axis), booleans at random.

    Every axis has one extent of :data:`MUTANT_EXTENTS` (chosen by ``seed``), unless ``classes`` are given:
    then each class of axes draws its own extent (or has its fixed one) and every other axis its own."""
    rng = np.random.default_rng(seed)
    uniform = MUTANT_EXTENTS[seed % len(MUTANT_EXTENTS)]
    shapes: dict[str, tuple[int, ...]] = {}
    if classes is None:
        shapes = {name: (uniform,) * spec.rank for name, spec in specs.items()}
    else:
        drawn: dict[int, int] = dict(classes.fixed)
        for name, spec in specs.items():
            dims: list[int] = []
            for axis in range(spec.rank):
                cls = classes.of.get((name, axis))
                if cls is None:
                    dims.append(int(rng.choice(MUTANT_EXTENTS)))
                else:
                    dims.append(drawn.setdefault(cls, int(rng.choice(MUTANT_EXTENTS))))
            shapes[name] = tuple(dims)
    low = min((e for s in shapes.values() for e in s), default=uniform)
    out: dict[str, np.ndarray] = {}
    for name, spec in specs.items():
        shape = shapes[name]
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            out[name] = rng.uniform(-2.0, 2.0, shape).astype(dtype)
        elif dtype.kind in "iu":
            out[name] = rng.integers(0, max(low, 1), shape).astype(dtype)
        else:
            out[name] = rng.integers(0, 2, shape).astype(dtype)
    return out


def compile_text(source: str, configs: list[str]) -> tuple[str, str]:
    """A text mutant: parse, resolve, lower, compile and run, in single mode and, where the error names one
    (:data:`MODE_HINTS`) and the configuration runs it, in that mode.

    A mutant that names inputs runs on :func:`tiny_inputs`: half the mutants (by their text) on an extent per
    class of axes that the program's checks join (:func:`axis_classes`), and on one extent for every axis
    if the first configuration raises a run-time error on those (a derived extent that the classes do not
    follow); the other half on one extent. Every configuration's run is compared with the first
    configuration's (the reference, in the fuzzer's lists) where both compiled in the same mode: a value that
    differs, a run-time error where the first has a value, or a value where the first raised a run-time error
    (an unchecked out-of-range position, say) is a disagreement. A FuseError without a location, or any other
    exception, is a crash."""
    import zlib

    key = zlib.crc32(source.encode("utf-8", "replace"))
    if mixed_extents(key):
        got = _compile_text(source, configs, key, True)
        if got is not None:
            return got
    got = _compile_text(source, configs, key, False)
    assert got is not None
    return got


def _compile_text(source: str, configs: list[str], key: int, mixed: bool) -> tuple[str, str] | None:
    """:func:`compile_text` on one kind of extents; None where ``mixed`` and the first configuration raised a
    run-time error."""
    from fuse_mlir import FuseError, Program
    from fuse_mlir.diagnostics import diagnostic_handler

    # the first configuration that compiled: its name, mode, and outputs or run-time error text
    first: tuple[str, str | None, dict[str, np.ndarray] | str] | None = None
    classes: AxisClasses | None = None
    for config in configs:
        mode: str | None = None
        while True:
            compiled = False
            try:
                with diagnostic_handler(lambda diagnostic: None):  # warnings (max_iters reached) are not errors
                    prog = Program(source, base_dir=EXAMPLES)
                    options: dict[str, Any] = {"mode": mode} if mode else {}
                    runner = prog.compile(**CONFIGS[config], **options)
                    compiled = True
                    if mixed and classes is None:
                        classes = _classes_of(prog, mode)
                    given = tiny_inputs(runner.input_specs(), key, classes if mixed else None)
                    # no sinks: a mutant's sink paths are arbitrary text
                    out = runner.run(given, write_sinks=False)
                    got = {k: np.array(v, copy=True) for k, v in out.items()}
                    why = _more_runs(runner, given, got, mode, key // len(MUTANT_EXTENTS))
                    if why is not None:
                        return "disagree", f"{config} (mode {mode or 'single'}): {why}"
                    if mode is None and monte_carlo_samples(key):
                        got.update(_monte_carlo(prog, config, given, key))
                if first is None:
                    first = (config, mode, got)
                elif first[1] == mode:
                    if isinstance(first[2], str):
                        return "disagree", (
                            f"{config} (mode {mode or 'single'}) has a value where {first[0]} raised: "
                            f"{first[2].splitlines()[0][:300]}"
                        )
                    why = compare(first[2], got)
                    if why is not None:
                        return "disagree", f"{config} (mode {mode or 'single'}) against {first[0]}: {why}"
            except FuseError as e:
                text = str(e)
                if not _located(text):
                    return "crash", f"{config} (mode {mode or 'single'}): FuseError without a location: {text[:400]}"
                wanted = next((m for hint, m in MODE_HINTS if hint in text), None)
                if mode is None and wanted is not None and supports(config, {"mode": wanted}):
                    mode = wanted
                    continue
                if compiled and first is None:
                    if mixed:
                        return None
                    first = (config, mode, text)
                elif compiled and first is not None and first[1] == mode and not isinstance(first[2], str):
                    return "disagree", (
                        f"{config} (mode {mode or 'single'}): {text.splitlines()[0][:300]}, "
                        f"where {first[0]} has a value"
                    )
            except RecursionError as e:
                return "crash", f"{config} (mode {mode or 'single'}): RecursionError: {e}"
            except BaseException as e:  # noqa: BLE001
                if isinstance(e, KeyboardInterrupt):
                    raise
                tb = traceback.format_exc(limit=8)
                return "crash", f"{config} (mode {mode or 'single'}): {type(e).__name__}: {e}\n{tb}"
            break
    return "ok", ""


def monte_carlo_samples(key: int) -> int:
    """The samples of the Monte Carlo run that a quarter of the single-mode mutants (by their text key) add: 2
    to 4, against projections of 1 to 4^k positions, so ops are both sampled and left exact; 0 for none."""
    return 2 + (key >> 19) % 3 if (key >> 17) & 3 == 0 else 0


def _monte_carlo(prog: Any, config: str, given: dict[str, np.ndarray], key: int) -> dict[str, np.ndarray]:
    """The mutant's outputs under ``projection="monte_carlo"`` (labelled ``name~mc``), seeded by its key.

    The sample tables are drawn by NumPy from the seed, the same on every backend, so every configuration's
    estimate must equal the reference's. A located error is recorded as ``~mc raised`` (every configuration
    must raise one too); an unlocated one propagates (a crash)."""
    from fuse_mlir import FuseError

    try:
        runner = prog.compile(
            **CONFIGS[config], projection="monte_carlo", samples=monte_carlo_samples(key), seed=key % 1000
        )
        out = runner.run(given, write_sinks=False)
    except FuseError as e:
        if not _located(str(e)):
            raise
        return {"~mc raised": np.array(1)}
    return {f"{k}~mc": np.array(v, copy=True) for k, v in out.items()}


def _classes_of(prog: Any, mode: str | None) -> AxisClasses:
    """The axis classes of ``prog``'s lowering in ``mode`` (the one the runner just compiled)."""
    from fuse_mlir.lowered import LowerOptions

    return axis_classes(prog.lower(options=LowerOptions(mode=mode) if mode else None).module)


def _more_runs(
    runner: Any, given: dict[str, np.ndarray], got: dict[str, np.ndarray], mode: str | None, pick: int = 0
) -> str | None:
    """After a mutant's first run: two more streaming steps (so the kept history is read, not only zeros); or
    a second run, which must give the first's outputs (a buffer the first run left behind, in the arena or
    written in place, must not leak into the next), and a demand query of part of one export, which must
    equal that part of the run's own export (and joins ``got``, to be compared across backends). ``pick``
    chooses the export (of those with rows) and the selection (:data:`QUERIES`): each query compiles a demand
    program, so a mutant asks one, and the mutants' seeds spread the queries over all exports and selections.
    Returns why a run disagrees with the first, or None."""
    if mode == "streaming":
        for step in (2, 3):
            got.update({f"{k}@{step}": np.array(v, copy=True) for k, v in runner.run(given, write_sinks=False).items()})
        return None
    again = {k: np.array(v, copy=True) for k, v in runner.run(given, write_sinks=False).items()}
    why = compare(got, again)
    if why is not None:
        return f"a second run differs from the first: {why}"
    rows = [k for k, v in got.items() if v.ndim > 0 and v.size > 0 and "#" not in k]
    if not rows:
        return None
    name = rows[pick % len(rows)]
    label, select, index = QUERIES[pick // len(rows) % len(QUERIES)]
    answer = np.array(runner.query(name, select, **given), copy=True)
    why = compare({name: got[name][index]}, {name: answer})
    if why is not None:
        return f"query({name!r}, {label}) differs from the run's export: {why}"
    got[f"{name}?{label}"] = answer
    return None


QUERIES: tuple[tuple[str, dict[int, int | slice], Any], ...] = (
    ("{0: -1}", {0: -1}, -1),
    ("{0: ::2}", {0: slice(None, None, 2)}, slice(None, None, 2)),
    ("{-1: 0}", {-1: 0}, (Ellipsis, 0)),
)
"""The demand queries a mutant may ask of an export (label, selection, the NumPy index of the run's export
that must equal the answer): the last row, every other row (a slice), position 0 of the last axis."""


def _located(text: str) -> bool:
    """A located diagnostic names ``file:line:col``."""
    import re

    return re.search(r"^[^\n:]*:\d+:\d+: ", text, re.M) is not None


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to kill this process when its parent dies (Linux ``PR_SET_PDEATHSIG``); exit at once if
    the parent is already gone (it died before the request took effect). The signal follows the thread that
    started the worker, so a pool belongs to a thread that outlives it (the drivers here use the main one)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
            pass
    if os.getppid() != parent:
        os._exit(1)


def _worker(conn: Any, parent: int) -> None:
    _die_with_parent(parent)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        fn, args = task
        conn.send(fn(*args))


Task = tuple[Callable[..., Any], tuple]


class Worker:
    """One worker process; :meth:`call` returns its answer or ``("hang", ...)`` after ``timeout`` seconds
    (the worker is then killed and a fresh one started on the next call)."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.proc: Any = None
        self.conn: Any = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, os.getpid()), daemon=True)
        self.proc.start()
        self.conn = parent

    def call(self, fn: Callable[..., Any], args: tuple) -> Any:
        """``fn(*args)`` in the worker: its answer, or ``("hang", ...)`` / ``("crash", ...)``."""
        if self.proc is None or not self.proc.is_alive():
            self.start()
        try:
            self.conn.send((fn, args))
            if self.conn.poll(self.timeout):
                return self.conn.recv()
        except (EOFError, BrokenPipeError, OSError) as e:
            return "crash", f"worker died: {type(e).__name__} (exit code {self.reap()})"
        self.kill()
        return "hang", f"no answer in {self.timeout:.0f} s"

    def reap(self) -> int | None:
        """The exit code of a worker whose pipe broke (it died, or is about to), after making sure it is gone."""
        code = None
        if self.proc is not None and self.proc.pid is not None:
            self.proc.join(5)
            code = self.proc.exitcode
        self.kill()
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.pid is not None:  # a process whose start failed has no pid
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.proc.join(5)
        self.kill()


class Pool:
    """Several persistent :class:`Worker` processes, spawned once and fed one task at a time each.

    :meth:`run` hands out tasks as workers free up and yields ``(task index, answer)`` as answers come;
    a worker that passes its timeout is killed (answer ``("hang", ...)``) and a fresh one started for
    the next task, as is one that died (``("crash", ...)``).
    """

    def __init__(self, size: int, timeout: float = 60.0):
        self.workers = [Worker(timeout) for _ in range(max(1, size))]
        self.timeout = timeout

    def run(self, tasks: list[Task]) -> Iterator[tuple[int, Any]]:
        import time
        from multiprocessing.connection import wait

        todo = list(enumerate(tasks))[::-1]
        busy: dict[int, tuple[int, float]] = {}  # worker slot -> (task index, start time)
        while todo or busy:
            for slot, w in enumerate(self.workers):
                if slot in busy or not todo:
                    continue
                k, task = todo.pop()
                if w.proc is None or not w.proc.is_alive():
                    w.start()
                try:
                    w.conn.send(task)
                    busy[slot] = (k, time.monotonic())
                except (BrokenPipeError, OSError) as e:
                    w.kill()
                    yield k, ("crash", f"worker died: {type(e).__name__}")
            if not busy:
                continue
            now = time.monotonic()
            left = min(start + self.timeout - now for _, start in busy.values())
            ready = wait([self.workers[s].conn for s in busy], timeout=max(0.0, left))
            for slot in list(busy):
                w = self.workers[slot]
                k, start = busy[slot]
                if w.conn in ready:
                    try:
                        answer = w.conn.recv()
                    except (EOFError, OSError) as e:
                        answer = ("crash", f"worker died: {type(e).__name__} (exit code {w.reap()})")
                    del busy[slot]
                    yield k, answer
                elif time.monotonic() - start > self.timeout:
                    w.kill()
                    del busy[slot]
                    yield k, ("hang", f"no answer in {self.timeout:.0f} s")

    def close(self) -> None:
        for w in self.workers:
            w.close()


def default_jobs() -> int:
    """Worker processes to run at once: the CPUs this process may use, at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(8, n))


# ----------------------------------------------------------------------------- comparison


def tolerance(dtype: np.dtype) -> float:
    """Relative tolerance (of the value's scale) for one output dtype: exact for integers."""
    if dtype.kind in "iub":
        return 0.0
    return 2e-3 if dtype == np.float32 else 1e-7


#: Relative tolerance of float outputs when a float fixpoint stopped one run earlier or later than the oracle's.
FIXPOINT_TOLERANCE = 1e-4


def compare(
    want: dict[str, np.ndarray], got: dict[str, np.ndarray], loose: bool = False, slack: Collection[str] = ()
) -> str | None:
    """None when ``got`` matches ``want`` (names, shapes, dtypes and values within tolerance), else why not.

    ``loose``: the program computes in float32 somewhere (a float32 input), so a float64 output may carry
    float32 rounding from an intermediate: compare every float output at float32's tolerance.
    ``slack``: labels of float recursive groups (fixpoint mode). Rounding may decide their convergence
    test one run apart (the last run changed values by about the test's tolerance, ``1e-6 + 1e-5 |x|``),
    so a run count one off the oracle's agrees, and then float outputs compare at
    :data:`FIXPOINT_TOLERANCE` of their scale; with equal counts everything compares as usual.
    """
    one_off: set[str] = set()
    for label in slack:
        name = f"{label}#iterations"
        if name in want and name in got and abs(int(np.asarray(got[name])) - int(want[name])) == 1:
            one_off.add(name)
    for name, w in want.items():
        if name in one_off:
            continue
        if name not in got:
            return f"{name}: missing from the outputs"
        g = np.asarray(got[name])
        w = np.asarray(w)
        if g.shape != w.shape:
            return f"{name}: shape {g.shape}, expected {w.shape}"
        if g.dtype != w.dtype:
            return f"{name}: dtype {g.dtype}, expected {w.dtype}"
        if w.size == 0:
            continue
        if w.dtype.kind in "iub":
            if not np.array_equal(g, w):
                k = int(np.flatnonzero(g.ravel() != w.ravel())[0])
                return f"{name}: value {g.ravel()[k]} at flat {k}, expected {w.ravel()[k]}"
            continue
        wf, gf = w.astype(np.float64), g.astype(np.float64)
        finite = np.isfinite(wf)
        scale = max(1.0, float(np.max(np.abs(wf[finite]))) if finite.any() else 1.0)
        tol = tolerance(np.dtype(np.float32) if loose else w.dtype) * scale
        if one_off:
            tol = max(tol, FIXPOINT_TOLERANCE * scale)
        same_special = (np.isnan(wf) & np.isnan(gf)) | (np.isinf(wf) & (wf == gf))
        with np.errstate(invalid="ignore"):  # inf - inf: the same infinity is same_special, any other a miss
            close = np.abs(wf - gf) <= tol
        bad = ~(same_special | (finite & close))
        if bad.any():
            k = int(np.flatnonzero(bad.ravel())[0])
            return f"{name}: value {gf.ravel()[k]!r} at flat {k}, expected {wf.ravel()[k]!r} (tol {tol:.1e})"
    return None


@dataclass
class Outcome:
    """The result of one program on one configuration."""

    config: str
    kind: str  # agree | disagree | crash | hang
    detail: str = ""


def classify(
    want: dict[str, np.ndarray],
    result: tuple[str, Any],
    config: str,
    loose: bool = False,
    slack: Collection[str] = (),
) -> Outcome:
    """The outcome of one run against the oracle's ``want`` (``loose``, ``slack``: see :func:`compare`)."""
    status, value = result
    if status == "ok":
        why = compare(want, value, loose, slack)
        return Outcome(config, "agree" if why is None else "disagree", why or "")
    if status == "fuse_error":
        return Outcome(config, "crash", "FuseError on a valid program: " + value.splitlines()[0][:300])
    return Outcome(config, status, str(value)[:2000])
