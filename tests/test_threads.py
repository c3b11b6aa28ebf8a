"""Multithreaded kernels: results with 1, 2 and 4 threads against the reference, determinism, errors, settings.

``parallel_min=0`` splits every parallel nest with two or more iterations, so
small inputs exercise the threaded path.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workloads import WORKLOADS
from fuse_mlir import FuseError, FuseRuntimeError, Program
from fuse_mlir.backends.llvm.executor import NativeExecutor
from fuse_mlir.backends.llvm.parallel import (
    MAX_CHUNKS,
    MAX_THREADS,
    SCHEDULER_CALLS,
    default_spin_us,
    default_threads,
    parallel_for_address,
    pool_ir,
    set_spin,
)
from fuse_mlir.passes.lowering import lower_to_loop
from tests.fresh import fresh_python
from tests.strategies import GenProgram, programs
from tests.test_llvm_programs import same
from tests.test_semantics import CASES

THREADED = {"parallel_min": 0}


def _repeat_identical(prog: Program, inputs: dict, threads: int) -> None:
    """Two runs of a threaded kernel give bit-identical results."""
    run = prog.compile("llvm", threads=threads, **THREADED)
    a, b = run(**inputs), run(**inputs)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("threads", [2, 4])
@pytest.mark.parametrize("name,src,inputs,expected", CASES, ids=[c[0] for c in CASES])
def test_semantics_cases_threaded(name, src, inputs, expected, threads):
    same(Program(src), inputs, threads=threads, **THREADED)


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workloads_threaded(w, dtype, threads):
    inputs = w.inputs(np.random.default_rng(1), np.dtype(dtype), True)
    same(Program(w.source), inputs, 1e-10 if dtype == np.float64 else 1e-4, threads=threads, **THREADED)
    _repeat_identical(Program(w.source), inputs, threads)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16), threads=st.sampled_from([2, 3, 4]))
def test_random_programs_threaded(prog: GenProgram, seed: int, threads: int):
    same(Program(prog.source()), prog.arrays(seed), 1e-9, threads=threads, **THREADED)


def test_large_reduction_is_split_and_deterministic():
    """A reduction over more elements than threads: chunk partials fold in order, the same on every run."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(100_003)
    prog = Program("S = X[i] * X[i]\nexport S\nM max= X[i]\nexport M\nP min= X[i]\nexport P")
    for threads in (2, 3, 4):
        got = prog.compile("llvm", threads=threads, **THREADED)(X=x)
        np.testing.assert_allclose(got["S"], (x * x).sum(), rtol=1e-12)
        assert got["M"] == x.max() and got["P"] == x.min()
        _repeat_identical(prog, {"X": x}, threads)


def test_integer_and_boolean_reductions_threaded():
    rng = np.random.default_rng(6)
    k = rng.integers(-50, 50, 10_001)
    prog = Program("S = K[i]\nexport S\nM max= K[i]\nexport M")
    got = prog.compile("llvm", threads=3, **THREADED)(K=k)
    assert got["S"] == k.sum() and got["M"] == k.max()


@pytest.mark.parametrize("n", [1000, 300_000])  # one chunk per thread; 18 chunks claimed as the threads go
@pytest.mark.parametrize("threads", [2, 4])
def test_error_in_parallel_region_is_the_first_in_order(threads, n):
    """Out-of-range gathers in several chunks: the error is the one a serial run reports first."""
    prog = Program("S = X[Idx[n]]\nexport S\nY[n] = X[Idx[n]] * 2.0\nexport Y")
    run = prog.compile("llvm", threads=threads, **THREADED)
    x = np.arange(10.0)
    idx = np.arange(n) % 10
    np.testing.assert_allclose(run(X=x, Idx=idx)["S"], x[idx].sum())
    first, last = n * 2 // 5, n * 9 // 10
    idx[first], idx[last] = 12, 13
    with pytest.raises(FuseRuntimeError, match="index 12 is out of range"):
        run(X=x, Idx=idx)
    idx[first] = 3
    with pytest.raises(FuseRuntimeError, match="index 13 is out of range"):
        run(X=x, Idx=idx)
    idx[last] = 4
    np.testing.assert_allclose(run(X=x, Idx=idx)["S"], x[idx].sum())


_CHUNK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))
_PARALLEL_FOR = ctypes.CFUNCTYPE(
    ctypes.c_int32, _CHUNK, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
)


def _parallel_for(chunk, n: int, threads: int) -> tuple[int, list[int]]:
    """Run the Python ``chunk(c, err)`` through the native pool's ``fuse_parallel_for``: its code and details."""
    fn = _PARALLEL_FOR(parallel_for_address())
    err = (ctypes.c_int64 * 3)()
    rc = fn(_CHUNK(lambda env, c, e: chunk(c, e)), None, n, threads, err)
    return rc, list(err)


@pytest.fixture(params=[0, None, 20_000], ids=["sleep", "default-spin", "long-spin"])
def spin(request):
    """The pool with idle threads that sleep at once, poll for the default time, or poll for 20 ms."""
    set_spin(request.param)
    yield request.param
    set_spin(None)


@pytest.mark.parametrize("n,threads", [(1, 4), (2, 2), (37, 3), (MAX_CHUNKS, 2), (MAX_CHUNKS + 5, 2), (9, 1)])
def test_pool_runs_every_chunk_once(n, threads, spin):
    """Every chunk runs exactly once, on at most ``threads`` threads; beyond MAX_CHUNKS or with one thread,
    in order on the caller."""
    ran: list[tuple[int, int]] = []
    rc, _ = _parallel_for(lambda c, e: ran.append((c, threading.get_ident())) or 0, n, threads)
    assert rc == 0
    assert sorted(c for c, _ in ran) == list(range(n))
    assert len({t for _, t in ran}) <= threads
    if n > MAX_CHUNKS or threads == 1:
        assert [c for c, _ in ran] == list(range(n))
        assert {t for _, t in ran} == {threading.get_ident()}


def test_pool_threads_claim_chunks_as_they_go():
    """A thread held up in its first chunk (as by another program's threads on its core) runs only that
    chunk: the others claim the rest, instead of each thread owning a fixed share."""
    held = threading.Event()
    ran: dict[int, list[int]] = {}
    caller = threading.get_ident()

    def chunk(c: int, err) -> int:
        me = threading.get_ident()
        if me == caller:
            assert held.wait(10), "the worker never took a chunk"
        elif not held.is_set():
            held.set()
            time.sleep(1.0)
        ran.setdefault(me, []).append(c)
        return 0

    rc, _ = _parallel_for(chunk, 40, 2)
    assert rc == 0 and sorted(c for cs in ran.values() for c in cs) == list(range(40))
    worker = next(t for t in ran if t != caller)
    assert len(ran[worker]) == 1 and len(ran[caller]) == 39


@pytest.mark.parametrize("threads", [2, 3])
def test_pool_reports_the_first_failing_chunk(threads, spin):
    """Chunks 30 and 7 fail (in whichever order the threads reach them): the region returns chunk 7's code
    and details, what a serial run stops at; every chunk still ran, none is left running."""
    ran: list[int] = []

    def chunk(c: int, err) -> int:
        ran.append(c)
        if c in (7, 30):
            err[0], err[1], err[2] = c + 100, c, -c
            return c + 100
        return 0

    rc, err = _parallel_for(chunk, 40, threads)
    assert (rc, err) == (107, [107, 7, -7])
    assert sorted(ran) == list(range(40))


def test_pool_regions_back_to_back_and_after_pauses(spin):
    """Regions one after another, and after pauses around the spin time (a worker still polling, one just
    gone to sleep, one asleep): every chunk of every region runs once, none runs twice or is lost."""
    rng = np.random.default_rng(3)
    for k in range(300):
        counts = [0] * 6
        rc, _ = _parallel_for(lambda c, e, counts=counts: counts.__setitem__(c, counts[c] + 1) or 0, 6, 3)
        assert rc == 0 and counts == [1] * 6, k
        if k % 3:
            time.sleep(float(rng.choice([0.0, 2e-5, 1e-4, 1.5e-4, 1e-3])))


def test_idle_pool_threads_stop_polling():
    """After a region, the pool's idle threads poll for the spin time, then sleep: with a 200 ms spin the
    process burns CPU for about that long, with no spin or the default (100 us) almost none. Run in a
    fresh interpreter so no other library's threads (OpenBLAS's, still spinning) count."""
    code = (
        "import resource, time, numpy as np\n"
        "from fuse_mlir import Program\n"
        "from fuse_mlir.backends.llvm.parallel import set_spin\n"
        "run = Program('S = X[i]\\nexport S').compile('llvm', threads=2, parallel_min=0)\n"
        "x = np.arange(1000.0)\n"
        "def idle_cpu(spin_us):\n"
        "    set_spin(spin_us)\n"
        "    run(X=x); run(X=x)\n"
        "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
        "    time.sleep(0.5)\n"
        "    v = resource.getrusage(resource.RUSAGE_SELF)\n"
        "    return v.ru_utime + v.ru_stime - u.ru_utime - u.ru_stime\n"
        "print(idle_cpu(0), idle_cpu(200_000), idle_cpu(None))\n"
    )
    none, long, default = map(float, fresh_python(code).split()[-3:])
    assert none < 0.05 and default < 0.05, (none, long, default)
    assert none + 0.02 < long < 0.45, (none, long, default)


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and two CPUs"
)
def test_woken_worker_leaves_the_callers_cpu():
    """A worker woken for a region on the CPU its caller runs on moves to another allowed CPU, and keeps its
    CPU mask. With the calling thread pinned to one CPU and pauses long enough for the worker to sleep, the
    worker last ran on another CPU after all but a few regions (0 of 20 on a quiet machine; a worker that
    wakes too late to join may still sit there on a loaded one) where before the fix it sat on the caller's
    after about half of them, and the region ran on one core. In a fresh interpreter: the pool's worker is found as the one
    thread the first parallel call starts."""
    code = (
        "import os, time, numpy as np\n"
        "from fuse_mlir import Program\n"
        "run = Program('Y[i] = exp(X[i])\\nexport Y').compile('llvm', threads=2)\n"
        "x = np.ones(2_000_000)\n"
        "before = set(os.listdir('/proc/self/task'))\n"
        "run(X=x)\n"
        "(worker,) = set(os.listdir('/proc/self/task')) - before\n"
        "cpus = sorted(os.sched_getaffinity(0))\n"
        "os.sched_setaffinity(0, {cpus[0]})\n"
        "last = []\n"
        "for _ in range(20):\n"
        "    time.sleep(0.01)\n"
        "    run(X=x)\n"
        "    stat = open(f'/proc/self/task/{worker}/stat').read()\n"
        "    last.append(int(stat.rsplit(')', 1)[1].split()[36]))\n"
        "print(sorted(os.sched_getaffinity(int(worker))) == cpus, sum(c == cpus[0] for c in last))\n"
    )
    same_mask, on_caller = fresh_python(code).split()[-2:]
    assert same_mask == "True"
    assert int(on_caller) <= 5, on_caller  # before the fix: 10-12 of 20


def test_spin_settings(monkeypatch):
    monkeypatch.delenv("FUSE_SPIN_US", raising=False)
    assert default_spin_us() == 100
    monkeypatch.setenv("FUSE_SPIN_US", "0")
    assert default_spin_us() == 0
    for bad, msg in (("soon", "FUSE_SPIN_US must be an integer"), ("-5", "FUSE_SPIN_US must be a non-negative")):
        monkeypatch.setenv("FUSE_SPIN_US", bad)
        with pytest.raises(FuseError, match=msg):
            default_spin_us()
    for bad in (-1, 2.5, True, "10"):
        with pytest.raises(FuseError, match="spin time must be a non-negative integer"):
            set_spin(bad)


def test_concurrent_callers_share_the_pool():
    """Kernels called from several Python threads at once: a region that finds the pool busy runs serially."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 300))
    prog = Program("Y[r, c.] = softmax(X[r, c])\nexport Y")
    run = prog.compile("llvm", threads=2, **THREADED)
    want = run(X=x)["Y"]
    failures: list[str] = []

    def worker() -> None:
        for _ in range(20):
            if not np.array_equal(run(X=x)["Y"], want):
                failures.append("mismatch")

    pool = [threading.Thread(target=worker) for _ in range(3)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not failures


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_parallel_kernel_after_fork():
    """A forked child can use a pool its parent started. Run in a fresh interpreter: forking this test
    process could deadlock on threads other libraries (jax, torch) started in it."""
    code = (
        "import os, numpy as np\n"
        "from fuse_mlir import Program\n"
        "run = Program('S = X[i]\\nexport S').compile('llvm', threads=2, parallel_min=0)\n"
        "x = np.arange(1000.0)\n"
        "assert run(X=x)['S'] == x.sum()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if run(X=x)['S'] == x.sum() else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    assert fresh_python(code).strip().splitlines()[-1] == "0"


def test_small_calls_start_no_threads():
    """Below the threshold a kernel compiled for 4 threads runs on the caller and starts no worker."""
    code = (
        "import numpy as np\n"
        "from fuse_mlir import Program\n"
        "from fuse_mlir.backends.llvm.parallel import pool_workers\n"
        "p = Program('Y[i] = exp(X[i]) + 1.0\\nexport Y')\n"
        "r = p.compile('llvm', threads=4)\n"
        "r(X=np.ones(1000))\n"
        "print(pool_workers())\n"
        "r2 = p.compile('llvm', threads=4, parallel_min=10)\n"
        "r2(X=np.ones(1000))\n"
        "print(pool_workers())\n"
    )
    assert fresh_python(code).split() == ["0", "3"]


def test_thread_settings(monkeypatch):
    monkeypatch.setenv("FUSE_NUM_THREADS", "3")
    monkeypatch.setenv("FUSE_PARALLEL_MIN", "17")
    ex = NativeExecutor()
    assert (ex.threads, ex.parallel_min) == (3, 17)
    assert NativeExecutor(threads=2, parallel_min=5).threads == 2
    monkeypatch.delenv("FUSE_NUM_THREADS")
    assert default_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("FUSE_NUM_THREADS", "many")
    with pytest.raises(FuseError, match="FUSE_NUM_THREADS must be an integer"):
        NativeExecutor()
    monkeypatch.delenv("FUSE_NUM_THREADS")
    for bad in (0, -1, MAX_THREADS + 1, 2.5, True):
        with pytest.raises(FuseError, match="threads must be an integer"):
            Program("Y[i] = X[i]\nexport Y").compile("llvm", threads=bad)
    with pytest.raises(FuseError, match="parallel_min"):
        Program("Y[i] = X[i]\nexport Y").compile("llvm", parallel_min=-3)


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).parent.parent / "examples").glob("*.fuse")), ids=lambda p: p.name
)
def test_pipeline_output_verifies(path):
    """The compile path skips verification for speed (FUSE_VERIFY turns it on): the IR it builds must verify."""
    lower_to_loop(Program.from_file(path).lower().module, verify=True)


@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workload_pipeline_output_verifies(w):
    inputs = w.inputs(np.random.default_rng(1), np.dtype(np.float32), True)
    lower_to_loop(Program(w.source).lower({k: v.dtype for k, v in inputs.items()}).module, verify=True)


def test_pool_spin_benchmark_prints_every_size(capsys):
    """``python -m benchmarks.pool_spin`` (docs/threads.md's figures) runs and prints one timed row per size."""
    from benchmarks import pool_spin

    assert pool_spin.main(["--sizes", "2000,5000", "--workloads", "gather_sum", "--quick"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| gather_sum |")]
    assert [r.split("|")[2].strip() for r in rows] == ["2,000", "5,000"]
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")][2:]
        assert all(c == "n/a" or float(c) > 0 for c in cells), r


def test_idle_wake_benchmark_prints_every_pause(capsys):
    """``python -m benchmarks.idle_wake`` (docs/threads.md's figures) runs and prints one timed row per pause."""
    from benchmarks import idle_wake

    assert idle_wake.main(["--workloads", "gather_sum", "--pauses", "0,1", "--rounds", "2", "--small"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| gather_sum |")]
    assert [r.split("|")[2].strip() for r in rows] == ["0", "1"]
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")][2:]
        assert all(c == "n/a" or float(c) > 0 for c in cells), r


def test_pool_ir_without_scheduler_calls():
    """Where the C library lacks sched_getcpu, sched_yield or the affinity calls (not Linux), the pool defines
    them as stubs that fail: its IR still parses and verifies, and declares only what the process provides."""
    import llvmlite.binding as llvm

    for provided in (frozenset(), frozenset({"sched_yield"}), frozenset(SCHEDULER_CALLS)):
        ir = pool_ir(provided)
        llvm.parse_assembly(ir).verify()
        for name in SCHEDULER_CALLS:
            assert (f"declare i32 @{name}(" in ir) == (name in provided), (name, provided)
            assert (f"define internal i32 @{name}(" in ir) == (name not in provided), (name, provided)
