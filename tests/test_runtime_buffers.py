"""The llvm runtime's buffers: arenas reused across calls, ``out=``, ``reuse_outputs``, donation, the direct path.

Every result is compared with the reference interpreter; inputs (and source
arrays) are compared before and after each run, since only a donated input
may ever be written.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ArrayAttr, StringAttr

from benchmarks.workloads import WORKLOADS
from fuse_mlir import Program
from fuse_mlir.backends.llvm import arena
from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.diagnostics import FuseError, FuseRuntimeError
from fuse_mlir.dialects.abi import LoopAbi, ReuseEntry
from tests.concurrency import run_in_threads
from tests.test_llvm_backend import F64, elementwise_module

SOFTMAX = "Y[r, c.] = softmax(X[r, c])\nexport Y"
SUM3 = "S = exp(X[i]) Y2[i] + Z[i]\nT[i] = X[i] * Z[i]\nexport S\nexport T"


def _inputs(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {k: rng.standard_normal(n) for k in ("X", "Y2", "Z")}


def _check(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12)


@pytest.fixture
def slow_allocs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the arena's slow-path allocations (native fuse_alloc falling back to Python)."""
    calls: list[int] = []
    orig = arena.CallState.alloc_slow

    def counting(self: arena.CallState, nbytes: int, k: int) -> int:
        calls.append(nbytes)
        return orig(self, nbytes, k)

    monkeypatch.setattr(arena.CallState, "alloc_slow", counting)
    return calls


def test_arena_many_calls_changing_shapes() -> None:
    rng = np.random.default_rng(1)
    prog = Program(SUM3)
    native, ref = prog.compile("llvm"), prog.compile("reference")
    kept = []
    for n in [5, 17, 3, 100, 17, 1, 0, 64, 100, 2] * 3:
        inputs = _inputs(rng, n)
        got = native(**inputs)
        _check(got, ref(**inputs))
        kept.append((got, ref(**inputs)))
    for got, want in kept:  # earlier results are the caller's: later calls never overwrite them
        _check(got, want)


def test_arena_2d_temporaries_reused(slow_allocs: list[int]) -> None:
    rng = np.random.default_rng(2)
    prog = Program(SOFTMAX)
    native, ref = prog.compile("llvm"), prog.compile("reference")
    for shape in [(4, 7), (9, 3), (4, 7)]:
        x = rng.standard_normal(shape)
        _check(native(X=x), ref(X=x))
    x = rng.standard_normal((9, 7))
    native(X=x)
    before = len(slow_allocs)
    for _ in range(5):
        _check(native(X=x), ref(X=x))
    assert len(slow_allocs) == before  # steady state: every buffer comes from the arena, natively


def test_reuse_outputs_overwrites_previous_result() -> None:
    rng = np.random.default_rng(3)
    prog = Program(SUM3)
    native, ref = prog.compile("llvm", reuse_outputs=True), prog.compile("reference")
    a, b = _inputs(rng, 50), _inputs(rng, 50)
    first = native(**a)["T"]
    second = native(**b)["T"]
    assert np.shares_memory(first, second)
    _check(native(**b), ref(**b))
    np.testing.assert_allclose(first, ref(**b)["T"])  # the earlier result now holds the latest values
    small = _inputs(rng, 7)
    _check(native(**small), ref(**small))


def test_default_results_are_fresh() -> None:
    rng = np.random.default_rng(4)
    native = Program(SUM3).compile("llvm")
    a, b = _inputs(rng, 50), _inputs(rng, 50)
    first, second = native(**a)["T"], native(**b)["T"]
    assert not np.shares_memory(first, second)


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_out_buffer_written_in_place(backend: str) -> None:
    rng = np.random.default_rng(5)
    prog = Program(SUM3)
    runner, ref = prog.compile(backend), prog.compile("reference")
    inputs = _inputs(rng, 40)
    t = np.empty(40)
    s = np.empty(())
    for _ in range(3):
        got = runner(**inputs, out={"T": t, "S": s})
        assert got["T"] is t and got["S"] is s
        _check(got, ref(**inputs))
        inputs = _inputs(rng, 40)


def test_out_buffer_checks() -> None:
    rng = np.random.default_rng(6)
    runner = Program(SUM3).compile("llvm")
    inputs = _inputs(rng, 10)
    with pytest.raises(FuseRuntimeError, match="shape"):
        runner(**inputs, out={"T": np.empty(11)})
    with pytest.raises(FuseRuntimeError, match="dtype"):
        runner(**inputs, out={"T": np.empty(10, dtype=np.float32)})
    with pytest.raises(FuseRuntimeError, match="C-contiguous"):
        runner(**inputs, out={"T": np.empty(20)[::2]})
    ro = np.empty(10)
    ro.flags.writeable = False
    with pytest.raises(FuseRuntimeError, match="read-only"):
        runner(**inputs, out={"T": ro})
    with pytest.raises(FuseRuntimeError, match="overlaps an input"):
        runner(**inputs, out={"T": inputs["X"]})
    both = np.empty(11)
    with pytest.raises(FuseRuntimeError, match="overlap"):
        runner(**inputs, out={"T": both[:10], "S": both[9:10].reshape(())})
    with pytest.raises(FuseRuntimeError, match="not an export"):
        runner(**inputs, out={"Q": np.empty(10)})
    with pytest.raises(FuseRuntimeError, match="NumPy array"):
        runner(**inputs, out={"T": [0.0] * 10})
    _check(runner(**inputs), Program(SUM3).compile("reference")(**inputs))


def _donating_kernel() -> NativeKernel:
    module = elementwise_module(F64, 1)
    abi = LoopAbi.read(module)
    abi.reuse = [ReuseEntry(0, "x")]
    abi.write(module)
    return NativeKernel(module)


def test_donated_input_backs_the_result() -> None:
    kernel = _donating_kernel()
    rng = np.random.default_rng(7)
    x, y, z = (rng.standard_normal(33) for _ in range(3))
    want = np.exp(x) * y + z
    keep = x.copy()
    (got,) = kernel([x, y, z], donated={"x": True})
    np.testing.assert_allclose(got, want)
    assert np.shares_memory(got, x)  # written in place into the donated buffer
    np.testing.assert_allclose(x, want)
    x = keep.copy()
    (got,) = kernel([x, y, z])  # not donated: never written
    np.testing.assert_array_equal(x, keep)
    np.testing.assert_allclose(got, want)
    assert not np.shares_memory(got, x)


def test_donated_read_only_input_is_not_written() -> None:
    kernel = _donating_kernel()
    x = np.linspace(0, 1, 8)
    x.flags.writeable = False
    (got,) = kernel([x, np.ones(8), np.zeros(8)], donated={"x": True})
    np.testing.assert_allclose(got, np.exp(np.linspace(0, 1, 8)))
    assert not np.shares_memory(got, x)


def test_donated_strided_input_is_not_written() -> None:
    kernel = _donating_kernel()
    base = np.linspace(0, 1, 16)
    keep = base.copy()
    x = base[::2]  # its memory span holds elements that were not donated
    (got,) = kernel([x, np.ones(8), np.zeros(8)], donated={"x": True})
    np.testing.assert_allclose(got, np.exp(keep[::2]))
    np.testing.assert_array_equal(base, keep)


def test_donate_option() -> None:
    rng = np.random.default_rng(8)
    prog = Program(SUM3)
    inputs = _inputs(rng, 20)
    want = prog.compile("reference")(**inputs)
    _check(prog.compile("llvm", donate=["X"])(**{k: v.copy() for k, v in inputs.items()}), want)
    with pytest.raises(FuseError, match="not an input"):
        prog.compile("llvm", donate=["W"])(**inputs)


@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_inputs_never_written(w) -> None:  # noqa: ANN001
    inputs = w.inputs(np.random.default_rng(9), np.dtype(np.float64), True)
    before = {k: v.copy() for k, v in inputs.items()}
    runner = Program(w.source).compile("llvm")
    for _ in range(2):
        runner(**inputs)
        runner(**inputs, out=None)
    for k in inputs:
        np.testing.assert_array_equal(inputs[k], before[k])


def test_example_sources_never_written() -> None:
    from tests.test_examples import ALL_EXAMPLES

    for path in ALL_EXAMPLES:
        prog = Program.from_file(path)
        sources = prog.source_arrays()
        if prog.lower().inputs:
            continue
        before = {k: np.array(v, copy=True) for k, v in sources.items()}
        try:
            prog.compile("llvm", out_root=path.parent / "__never__").run({}, write_sinks=False)
        except FuseError:
            continue  # examples the llvm backend rejects are covered by test_examples
        for k, v in sources.items():
            np.testing.assert_array_equal(v, before[k], err_msg=f"{path.name}: source {k} was written")


def test_direct_path_keeps_checks() -> None:
    rng = np.random.default_rng(10)
    prog = Program(SUM3)
    native, ref = prog.compile("llvm"), prog.compile("reference")
    inputs = _inputs(rng, 12)
    native(**inputs)
    assert native._fast  # the signature is remembered
    strided = {k: rng.standard_normal(24)[::2] for k in inputs}  # same dtypes and ranks, not contiguous
    _check(native(**strided), ref(**strided))
    with pytest.raises(FuseRuntimeError, match="i is"):
        native(X=inputs["X"], Y2=inputs["Y2"][:5], Z=inputs["Z"])
    with pytest.raises(FuseRuntimeError, match="rank"):
        native(X=inputs["X"].reshape(3, 4), Y2=inputs["Y2"], Z=inputs["Z"])
    with pytest.raises(FuseRuntimeError, match="missing"):
        native(X=inputs["X"], Y2=inputs["Y2"])
    f32 = {k: v.astype(np.float32) for k, v in inputs.items()}
    assert native(**f32)["T"].dtype == np.float32
    _check(native(**inputs), ref(**inputs))


def test_concurrent_calls_on_one_runner() -> None:
    prog = Program(SUM3)
    native, ref = prog.compile("llvm"), prog.compile("reference")

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for n in (10, 300, 7, 300):
            inputs = _inputs(rng, n)
            _check(native(**inputs), ref(**inputs))

    run_in_threads(work, 4)


def test_native_allocator_claims_each_slot_once_per_call(slow_allocs: list[int]) -> None:
    import ctypes

    from fuse_mlir.backends.llvm.jit import _symbols

    arena.install_allocator()
    fuse_alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        _symbols["fuse_alloc"]
    )
    state = arena.CallState(None, 2, 0)
    state.begin()
    a = fuse_alloc(state.rt, 100, 0)  # empty slot: grown through Python
    b = fuse_alloc(state.rt, 100, 0)  # second claim in the same call: a one-call buffer
    c = fuse_alloc(state.rt, 8, 5)  # an id beyond the table: a one-call buffer
    assert len({a, b, c}) == 3 and a % arena.ALIGN == 0
    assert len(slow_allocs) == 3
    state.end()
    state.begin()
    assert fuse_alloc(state.rt, 64, 0) == a  # fits: served natively, no Python
    assert len(slow_allocs) == 3
    d = fuse_alloc(state.rt, 0, 1)  # zero bytes on an empty slot: still a real pointer
    assert d and len(slow_allocs) == 4
    state.end()
    state.begin()
    e = fuse_alloc(state.rt, 200, 0)  # too small now: grown (a new buffer)
    assert e != a and len(slow_allocs) == 5


def test_reuse_allocs_call_the_aliasing_allocator() -> None:
    kernel = _donating_kernel()
    ir = kernel.llvm_ir or ""
    shared = [line for line in ir.splitlines() if line.startswith("declare") and "@fuse_alloc_shared" in line]
    assert shared and "noalias" not in shared[0]  # may alias the donated argument: no noalias promise
    assert "@fuse_alloc(" not in ir
    plain = NativeKernel(elementwise_module(F64, 1)).llvm_ir or ""
    assert any(line.startswith("declare noalias") and "@fuse_alloc(" in line for line in plain.splitlines())


def test_bad_reuse_attribute_is_a_fuse_error() -> None:
    module = elementwise_module(F64, 1)
    module.attributes["fuse.reuse"] = ArrayAttr([ArrayAttr([StringAttr("x")])])
    with pytest.raises(FuseError, match="fuse.reuse"):
        NativeKernel(module)
