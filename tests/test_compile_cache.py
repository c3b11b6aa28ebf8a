"""The persistent compile cache: hits in a second process, corrupt entries rebuilt, ``cache=False``, the folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuse_mlir import FuseRuntimeError, Program
from fuse_mlir.backends.llvm import diskcache, executor
from fuse_mlir.backends.memcache import BoundedCache

ROOT = Path(__file__).resolve().parents[1]
SRC = "S = exp(X[i]) Y2[i] + Z[i]\nT[i] = tanh(X[i]) * 2\nexport S\nexport T"

SCRIPT = """
import json, sys, numpy as np
from fuse_mlir import Program
from fuse_mlir.backends.llvm.executor import NativeExecutor, compile_program
p = Program(sys.argv[1])
e = NativeExecutor()  # the runner's thread and checked-build settings, so both share one kernel
c = compile_program(
    p.lower().module, threads=e.threads, parallel_min=e.parallel_min, check_bounds=bool(e.check_bounds)
)
x = np.linspace(-1, 1, 7)
r = p.compile("llvm")(X=x, Y2=x, Z=x)
print(json.dumps({"from_disk": c.from_disk, "S": float(r["S"]), "T": r["T"].tolist()}))
"""


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / "kernels").glob("*.bin"))


def _run_process(folder: Path, source: str = SRC) -> dict:
    env = {**os.environ, "FUSE_CACHE_DIR": str(folder), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, source], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _want() -> tuple[float, list[float]]:
    x = np.linspace(-1, 1, 7)
    return float((np.exp(x) * x + x).sum()), (np.tanh(x) * 2).tolist()


def test_second_process_loads_from_disk(tmp_path: Path) -> None:
    first = _run_process(tmp_path)
    assert not first["from_disk"]
    assert len(_entries(tmp_path)) == 1
    second = _run_process(tmp_path)
    assert second["from_disk"]
    s, t = _want()
    for r in (first, second):
        assert r["S"] == pytest.approx(s, rel=1e-12)
        np.testing.assert_allclose(r["T"], t, rtol=1e-12)


@pytest.fixture
def fresh_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty in-memory kernel cache and a private cache folder."""
    monkeypatch.setattr(executor, "_CACHE", BoundedCache())
    monkeypatch.setenv("FUSE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _compile() -> executor.CompiledProgram:
    executor._CACHE.clear()
    return executor.compile_program(Program(SRC).lower().module)


def _check(compiled: executor.CompiledProgram) -> None:
    x = np.linspace(-1, 1, 7)
    s, t = _want()
    got = compiled.kernel([x, x, x])
    assert float(got[0]) == pytest.approx(s, rel=1e-12)
    np.testing.assert_allclose(got[1], t, rtol=1e-12)


DAMAGES = ["truncate", "flip", "garbage", "empty", "other_key", "dev_zero", "fifo", "directory", "huge", "link"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_entry_is_rebuilt(fresh_memory: Path, damage: str) -> None:
    """Anything but a whole regular file of a bounded size is a corrupt entry: never read without a limit
    (a link to /dev/zero), never blocked on (a FIFO), never followed (a link to a valid entry elsewhere)."""
    _check(_compile())
    (entry,) = _entries(fresh_memory)
    data = entry.read_bytes()
    if damage in ("dev_zero", "fifo", "directory", "huge", "link"):
        entry.unlink()
        if damage == "dev_zero":
            entry.symlink_to("/dev/zero")
        elif damage == "fifo":
            os.mkfifo(entry)
        elif damage == "directory":
            entry.mkdir()
        elif damage == "huge":  # sparse: takes no disk space
            with open(entry, "wb") as f:
                f.truncate(diskcache.MAX_ENTRY_BYTES + 1)
        else:
            elsewhere = fresh_memory / "valid.bin"
            elsewhere.write_bytes(data)
            entry.symlink_to(elsewhere)
        assert diskcache.read_entry(entry.stem) is None
        if damage == "directory":  # cannot be replaced by a file: compiles, stores nothing, still correct
            rebuilt = _compile()
            assert not rebuilt.from_disk
            _check(rebuilt)
            return
    elif damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        entry.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    elif damage == "garbage":
        entry.write_bytes(os.urandom(len(data)))
    elif damage == "empty":
        entry.write_bytes(b"")
    else:  # a valid entry filed under the wrong key (a stale copy): its header names another key
        other = Program("Y[i] = X[i] + 1\nexport Y").lower().module
        executor._CACHE.clear()
        executor.compile_program(other)
        (other_entry,) = [e for e in _entries(fresh_memory) if e != entry]
        entry.write_bytes(other_entry.read_bytes())
    rebuilt = _compile()
    assert not rebuilt.from_disk
    _check(rebuilt)
    assert diskcache.read_entry(entry.stem) is not None  # rewritten whole
    again = _compile()
    assert again.from_disk
    _check(again)


def test_cache_false_skips_both_caches(fresh_memory: Path) -> None:
    module = Program(SRC).lower().module
    a = executor.compile_program(module, cache=False)
    b = executor.compile_program(module, cache=False)
    assert a is not b and not a.from_disk and not b.from_disk
    assert _entries(fresh_memory) == []
    _check(a)
    x = np.linspace(-1, 1, 7)
    Program(SRC).compile("llvm", cache=False)(X=x, Y2=x, Z=x)
    assert _entries(fresh_memory) == []


def test_cache_dir_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FUSE_CACHE_DIR", str(tmp_path / "a"))
    assert diskcache.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("FUSE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.cache_dir() == tmp_path / "xdg" / "fuse_mlir"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert diskcache.cache_dir() == tmp_path / "home" / ".cache" / "fuse_mlir"


def test_unwritable_folder_still_compiles(fresh_memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = fresh_memory / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FUSE_CACHE_DIR", str(blocker))
    _check(_compile())


def test_disk_hit_has_no_module_but_runs(fresh_memory: Path) -> None:
    _compile()
    hit = _compile()
    assert hit.from_disk and hit.loop_module is None
    with pytest.raises(Exception, match="compile cache"):
        hit.kernel.optimized_ir()
    _check(hit)


def test_host_call_and_constants_survive_the_disk(fresh_memory: Path, tmp_path: Path) -> None:
    prog = Program('"top.npz" = topk(X[i,j], k=2)\nconst c = 2.5\nY[i] = X[i,j] * c\nexport Y')
    x = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, 1.0]])
    want = prog.compile("reference", out_root=tmp_path / "ref")(X=x)
    ref_top = np.load(tmp_path / "ref" / "top.npz")
    for k in range(2):
        executor._CACHE.clear()
        got = prog.compile("llvm", out_root=tmp_path / str(k))(X=x)
        np.testing.assert_allclose(got["Y"], want["Y"])
        top = np.load(tmp_path / str(k) / "top.npz")
        for name in ref_top.files:
            np.testing.assert_array_equal(top[name], ref_top[name])
    assert len(_entries(fresh_memory)) == 1


def test_concurrent_processes_share_one_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "FUSE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, SRC], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
        )
        for _ in range(3)
    ]
    s, t = _want()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
        r = json.loads(out.decode().strip().splitlines()[-1])
        assert r["S"] == pytest.approx(s, rel=1e-12)
    (entry,) = _entries(tmp_path)
    monkeypatch.setenv("FUSE_CACHE_DIR", str(tmp_path))
    assert diskcache.read_entry(entry.stem) is not None
    assert not list((tmp_path / "kernels").glob("*.tmp"))  # no temporary file left behind


THREADS_SCRIPT = """
import sys, threading
import numpy as np
from fuse_mlir import Program
backend, n = sys.argv[1], int(sys.argv[2])
barrier = threading.Barrier(n)
ok, errors = [], []

def work(k):
    try:
        p = Program(f"Y[i] = exp(X[i]) * {k}.25 + sin(X[i])\\nS = Y[i] X[i]\\nexport Y, S")
        barrier.wait()
        runner = p.compile(backend)
        x = np.linspace(-1, 1, 5)
        out = runner(X=x)
        want = np.exp(x) * (k + 0.25) + np.sin(x)
        assert np.allclose(out["Y"], want), (k, out["Y"])
        assert np.allclose(out["S"], want @ x), (k, out["S"])
        ok.append(k)
    except BaseException as exc:
        errors.append(f"{k}: {type(exc).__name__}: {exc}")

threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(ok), errors)
"""


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_threads_compiling_new_programs_at_once_in_a_fresh_process(backend: str, tmp_path: Path) -> None:
    """Nothing is loaded yet (pass registry, levels, allocator, thread pool): every thread must find it whole."""
    env = {**os.environ, "FUSE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT, backend, "10"], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "10 []", out.stdout + out.stderr


def _dead_after_drop(program: Program, cache: bool) -> list[bool]:
    """Compile and run ``program``, drop the runner, and say which of runner, compiled program, kernel and
    LLVM engine are freed at once (by reference counting alone: no cycle keeps them)."""
    import gc
    import weakref

    runner = program.compile("llvm", cache=cache)
    runner(X=np.linspace(0, 1, 4))
    compiled = list(runner.executor.compiled.values())
    refs = [weakref.ref(runner)]
    refs += [weakref.ref(obj) for c in compiled for obj in (c, c.kernel, c.kernel.jit.engine)]
    del runner, compiled
    enabled = gc.isenabled()
    gc.disable()
    try:
        return [ref() is None for ref in refs]
    finally:
        if enabled:
            gc.enable()


def test_dropped_runner_frees_its_code_without_the_cycle_collector(fresh_memory: Path) -> None:
    src = "Y[i] = exp(X[i]) * 3.75 + X[j]\nS = Y[i] X[i]\nexport Y, S"
    assert all(_dead_after_drop(Program(src), cache=False))


def test_memory_cache_is_a_bounded_lru(fresh_memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """80 distinct programs with FUSE_CACHE_MAX=8: at most 8 entries stay, the evicted ones are freed (runners
    dropped), the most recently used stay, and one still held by a runner keeps working after eviction."""
    import gc
    import weakref

    monkeypatch.setenv("FUSE_CACHE_MAX", "8")
    x = np.linspace(0, 1, 4)
    kept = Program("Y[i] = exp(X[i]) * 0.5\nexport Y").compile("llvm")
    alive = []
    for k in range(80):
        runner = Program(f"Y[i] = exp(X[i]) * {k}.5 + {k}\nexport Y").compile("llvm")
        assert np.allclose(runner(X=x)["Y"], np.exp(x) * (k + 0.5) + k)
        alive += [weakref.ref(c) for c in runner.executor.compiled.values()]
        del runner
    gc.collect()
    assert len(executor._CACHE) == 8
    assert sum(ref() is not None for ref in alive) == 8  # nothing but the cache holds compiled programs
    assert np.allclose(kept(X=x)["Y"], np.exp(x) * 0.5)  # evicted from the cache, still held by its runner
    last = Program("Y[i] = exp(X[i]) * 79.5 + 79\nexport Y").compile("llvm")
    last(X=x)
    assert next(iter(last.executor.compiled.values())) is alive[-1]()  # a hit: most recently used stays


def test_memory_cache_bound_zero_keeps_nothing(fresh_memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSE_CACHE_MAX", "0")
    runner = Program("Y[i] = exp(X[i]) * 2.125\nexport Y").compile("llvm")
    assert np.allclose(runner(X=np.ones(2))["Y"], np.exp(1) * 2.125)
    assert len(executor._CACHE) == 0


@pytest.mark.parametrize("value", ["lots", "-1", "1e3", "8 entries", "99999999999999999999"])
def test_bad_cache_bound_is_a_fuse_error(fresh_memory: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from fuse_mlir import FuseError

    monkeypatch.setenv("FUSE_CACHE_MAX", value)
    with pytest.raises(FuseError, match="FUSE_CACHE_MAX"):
        Program("Y[i] = exp(X[i]) * 2.375\nexport Y").compile("llvm")(X=np.ones(2))


KERNELS = """A[i] = X[i,j] * X[i,j]
B[j] max= X[i,j]
C[i,j] = exp(X[i,j]) * 2
D[k] = sqrt(abs(Y[k])) + 1
export A, B, C, D"""


@pytest.fixture
def fresh_units(fresh_memory: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No compilation unit in memory, and fresh unit counters."""
    from collections import Counter

    from fuse_mlir.backends.llvm import jit

    monkeypatch.setattr(jit, "_UNITS", {})
    monkeypatch.setattr(jit, "UNIT_STATS", Counter())
    return fresh_memory


def _kernels_agree(source: str) -> None:
    x, y = np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(-2, 2, 5)
    want = Program(source).compile("reference")(X=x, Y=y)
    got = Program(source).compile("llvm")(X=x, Y=y)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-12)


def test_edit_recompiles_only_the_changed_kernel(fresh_units: Path) -> None:
    """Each kernel is its own compilation unit, named and cached by its content: after an edit, the unchanged
    kernels are reused (from memory, or from disk in another process) and only the edited one and the entry
    (which calls them all) go through LLVM."""
    from fuse_mlir.backends.llvm import jit

    first = executor.compile_program(Program(KERNELS).lower())
    n = len(first.kernel.jit.units)
    assert n >= 4 and jit.UNIT_STATS == {"compiled": n}
    jit.UNIT_STATS.clear()
    edited = KERNELS.replace("exp(", "tanh(")
    second = executor.compile_program(Program(edited).lower())
    assert jit.UNIT_STATS == {"compiled": 2, "reused": n - 2}
    assert len(set(first.kernel.jit.units) & set(second.kernel.jit.units)) == n - 2
    jit._UNITS.clear()  # as in a new process: the units come from disk
    executor._CACHE.clear()
    jit.UNIT_STATS.clear()
    third = executor.compile_program(Program(edited.replace("* 2", "* 3")).lower())
    assert jit.UNIT_STATS == {"compiled": 2, "reused": n - 2} and not third.from_disk
    _kernels_agree(edited)


def test_damaged_unit_is_rebuilt(fresh_units: Path) -> None:
    """A unit whose entry fails its checksum makes the program's entry unusable (it lists the units): the program
    is compiled again, the damaged unit alone goes through LLVM, and its entry is rewritten."""
    from fuse_mlir.backends.llvm import jit

    executor.compile_program(Program(KERNELS).lower())
    units = sorted((fresh_units / "units").glob("*.bin"))
    victim = units[0]
    data = victim.read_bytes()
    victim.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    assert diskcache.read_entry(victim.stem, "units") is None
    jit._UNITS.clear()
    executor._CACHE.clear()
    jit.UNIT_STATS.clear()
    rebuilt = executor.compile_program(Program(KERNELS).lower())
    assert not rebuilt.from_disk
    assert jit.UNIT_STATS == {"compiled": 1, "reused": len(units) - 1}
    assert diskcache.read_entry(victim.stem, "units") is not None
    _kernels_agree(KERNELS)


def test_deep_nests_are_optimised_at_o1(fresh_units: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel whose loops nest deeper than DEEP_NEST_LOOPS is optimised at O1 (LLVM's loop passes cost more than
    linearly in the depth); the program's shallow kernels keep O3; the values agree with the reference."""
    from fuse_mlir.backends.llvm import emit, jit

    units: list[emit.Unit] = []
    real = emit.emit_llvm_units

    def spy(module: object, **kw: str) -> list[emit.Unit]:
        out = real(module, **kw)  # type: ignore[arg-type]
        units.extend(out)
        return out

    monkeypatch.setattr(emit, "emit_llvm_units", spy)  # NativeKernel imports it from .emit when it compiles
    deep = jit.DEEP_NEST_LOOPS + 2
    axes = ", ".join(f"i{k}" for k in range(1, deep))
    src = f"S[i0] = A[i0, {axes}]\nT[j] = exp(B[j]) * 2\nexport S, T"
    compiled = executor.compile_program(Program(src).lower())
    depths = sorted(u.loop_depth for u in units if u.loop_depth)
    assert depths and depths[-1] == deep and depths[0] == 1, depths
    for u in units:
        if u.loop_depth:
            level = 1 if u.loop_depth > jit.DEEP_NEST_LOOPS else 3
            assert jit.unit_key(u.ir, level) in compiled.kernel.jit.units, (u.loop_depth, level)
    a = np.random.default_rng(0).standard_normal((3,) + (2,) * 4 + (1,) * (deep - 5))
    b = np.linspace(-1, 1, 7)
    want = Program(src).compile("reference")(A=a, B=b)
    got = Program(src).compile("llvm")(A=a, B=b)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-12)


def test_a_large_entry_is_compiled_at_o0(fresh_units: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry of more than LARGE_ENTRY_LINES lines of IR is compiled at O0, IR and machine code (LLVM's
    InstCombine and O3 code generator grow faster than linearly in such a function); kernels and small entries
    keep their levels. The code computes the same values and reports the same first failing shape check as the
    reference."""
    from fuse_mlir.backends.llvm import jit
    from fuse_mlir.dialects.abi import ENTRY

    assert jit.ENTRY_NAME == ENTRY  # spelt twice so that the JIT's module does not import xDSL's dialects
    src = "S[i, j] = " + " + ".join(f"X{k}[i, j]" for k in range(40)) + "\nexport S\n"
    rng = np.random.default_rng(0)
    xs = {f"X{k}": rng.standard_normal((3, 2)) for k in range(40)}
    want = sum(xs.values())
    real_object = jit._unit_object
    for limit, level, code in ((10**9, 1, 3), (50, 0, 0)):
        monkeypatch.setattr(jit, "LARGE_ENTRY_LINES", limit)
        entries: list[tuple[int, int]] = []

        def unit(
            ir: str, opt: int, tm: object, timings: dict, entry: str, entries: list[tuple[int, int]] = entries
        ) -> bytes:
            if entry in jit._DEFINE.findall(ir):
                entries.append((opt, jit.codegen_level(ir, entry)))
            else:
                assert opt >= 2 and jit.codegen_level(ir, entry) == 3  # a kernel, however long (O2: checked)
            return real_object(ir, opt, tm, timings, entry)  # type: ignore[arg-type]

        monkeypatch.setattr(jit, "_unit_object", unit)
        runner = Program(src, filename="wide.fuse").compile("llvm", cache=False)
        np.testing.assert_allclose(runner(**xs)["S"], want, rtol=1e-13)
        assert entries == [(level, code)]
        bad = xs | {"X7": np.ones((3, 5)), "X9": np.ones((4, 2))}
        with pytest.raises(FuseRuntimeError) as got:
            runner(**bad)
        with pytest.raises(FuseRuntimeError) as ref:
            Program(src, filename="wide.fuse").compile("reference")(**bad)
        assert (got.value.message, got.value.loc) == (ref.value.message, ref.value.loc)


def test_a_checked_builds_kernels_stop_at_o2(fresh_units: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checked build's kernels are optimised at O2 at most: O3's non-trivial loop unswitching copies a loop
    per loop-invariant bounds check, exponential in their number (a 16-input checked sum did not compile in 80 s).
    The default build keeps O3; both agree with the reference."""
    from fuse_mlir.backends.llvm import jit

    assert jit.unit_levels([2, 2, 0], 3, checked=True) == [2, 2, 1]
    assert jit.unit_levels([2, 2, 0], 3) == [3, 3, 1]
    src = "S[i, j] = " + " + ".join(f"X{k}[i, j]" for k in range(16)) + "\nexport S\n"
    xs = {f"X{k}": np.full((3, 2), float(k)) for k in range(16)}
    real_object = jit._unit_object
    for check_bounds, level in ((True, 2), (False, 3)):
        kernels: list[int] = []

        def unit(ir: str, opt: int, tm: object, timings: dict, entry: str, kernels: list[int] = kernels) -> bytes:
            if entry not in jit._DEFINE.findall(ir):
                kernels.append(opt)
            return real_object(ir, opt, tm, timings, entry)  # type: ignore[arg-type]

        monkeypatch.setattr(jit, "_unit_object", unit)
        got = Program(src).compile("llvm", cache=False, check_bounds=check_bounds)(**xs)["S"]
        np.testing.assert_array_equal(got, np.full((3, 2), float(sum(range(16)))))
        assert kernels and set(kernels) == {level}, kernels
