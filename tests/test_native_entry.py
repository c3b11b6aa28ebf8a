"""The llvm backend's native call entry (fuse_mlir/backends/llvm/entry.py): what it takes, what it declines.

A runner's repeated plain calls go through one native builtin that checks each array itself; every case it does
not handle must decline before running (the Python path then gives the same result or the same error), or, once
the kernel ran, finish in Python. Every result is compared with the reference interpreter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fuse_mlir import Program
from fuse_mlir.backends.llvm.entry import entry_available
from fuse_mlir.diagnostics import FuseRuntimeError
from tests.concurrency import run_in_threads

pytestmark = pytest.mark.skipif(not entry_available(), reason="NumPy's array layout is not the one the entry reads")

SUM = "S = exp(X[i]) Y2[i] + Z[i]\nexport S"
BOTH = "S = exp(X[i]) Y2[i] + Z[i]\nT[i] = X[i] * Z[i]\nexport S\nexport T"


def _inputs(n: int, dtype: Any = np.float64, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(n).astype(dtype) for k in ("X", "Y2", "Z")}


def _check(got: dict[str, np.ndarray], want: dict[str, np.ndarray], rtol: float = 1e-12) -> None:
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=rtol)


def _entered(src: str, inputs: dict[str, np.ndarray], rtol: float = 1e-12, **options: Any) -> tuple[Any, Any, Any]:
    """(runner, its native entry's builtin, the reference runner) after a first call with ``inputs``."""
    prog = Program(src)
    runner, ref = prog.compile("llvm", **options), prog.compile("reference")
    _check(runner(**inputs), ref(**inputs), rtol)
    assert runner._native is not None, "a plain repeated signature gets the native entry"
    return runner, runner._native[0], ref


def test_entry_runs_and_returns_fresh_arrays() -> None:
    inputs = _inputs(1000)
    runner, call, ref = _entered(SUM, inputs)
    first = call(dict(inputs))
    assert first is not None
    _check(first, ref(**inputs))
    second = runner(**inputs)
    _check(second, ref(**inputs))
    assert second["S"] is not first["S"] and second["S"].flags.writeable and second["S"].flags.owndata
    assert "run" in runner.explain()  # explain() describes a call the entry ran


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_entry_for_both_dtypes_and_n1(dtype: Any) -> None:
    for n in (1, 7, 1000):
        inputs = _inputs(n, dtype, seed=n)
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        runner, call, ref = _entered(BOTH, inputs, rtol)
        _check(call(dict(inputs)), ref(**inputs), rtol)
        _check(runner(**inputs), ref(**inputs), rtol)


def _declines(call: Any, inputs: dict[str, Any]) -> None:
    assert call(inputs) is None


def test_entry_declines_what_it_does_not_check_itself() -> None:
    inputs = _inputs(12)
    runner, call, ref = _entered(SUM, inputs)
    x = inputs["X"]
    bad: dict[str, dict[str, Any]] = {
        "other dtype": {**inputs, "X": x.astype(np.float32)},
        "byte-swapped": {**inputs, "X": x.astype(">f8")},
        "other rank": {**inputs, "X": x.reshape(3, 4)},
        "strided": {**inputs, "X": np.repeat(x, 2)[::2]},
        "fortran 2-d": {**inputs, "X": np.asfortranarray(np.ones((3, 4)))},
        "a list": {**inputs, "X": list(x)},
        "a subclass": {**inputs, "X": x.view(np.ma.MaskedArray)},
        "a scalar": {**inputs, "X": 1.0},
        "missing": {"X": x, "Y2": inputs["Y2"]},
        "unknown name": {**inputs, "W": x},
        "out=": {**inputs, "out": {"S": np.empty(())}},
    }
    for why, given in bad.items():
        assert call(given) is None, why
    misaligned = np.zeros(12 * 8 + 1, np.uint8)[1:].view(np.float64)
    misaligned[:] = x
    assert not misaligned.flags.aligned
    _declines(call, {**inputs, "X": misaligned})
    # The runner takes the Python path for each: the same values, or the same errors, as before.
    _check(runner(**{**inputs, "X": np.repeat(x, 2)[::2]}), ref(**inputs))
    _check(runner(**{**inputs, "X": misaligned}), ref(**inputs))
    with pytest.raises(FuseRuntimeError, match="missing"):
        runner(X=x, Y2=inputs["Y2"])
    with pytest.raises(FuseRuntimeError, match="unknown input"):
        runner(**inputs, W=x)
    out = np.empty(())
    assert runner(**inputs, out={"S": out})["S"] is out
    np.testing.assert_allclose(out, ref(**inputs)["S"], rtol=1e-12)


def test_entry_not_a_dict_is_declined() -> None:
    inputs = _inputs(5)
    _, call, _ = _entered(SUM, inputs)
    assert call(list(inputs.values())) is None
    assert call(None) is None


def test_int8_entry_declines_bool() -> None:
    src = "S = X[i] + Y2[i]\nexport S"
    x, y = np.array([1, 2, 3], np.int8), np.array([4, 5, 6], np.int8)
    runner, call, ref = _entered(src, {"X": x, "Y2": y})
    _check(call({"X": x, "Y2": y}), ref(X=x, Y2=y))
    b = np.array([True, False, True])
    assert call({"X": b, "Y2": y}) is None
    _check(runner(X=b, Y2=y), ref(X=b, Y2=y))


def test_errors_raised_by_native_code_keep_their_message() -> None:
    inputs = _inputs(6)
    runner, call, _ = _entered(SUM, inputs)
    short = {**inputs, "Y2": inputs["Y2"][:4].copy()}
    with pytest.raises(FuseRuntimeError, match="i is") as direct:
        call(short)  # the kernel ran and failed: finished (raised) by the Python path
    with pytest.raises(FuseRuntimeError, match="i is") as general:
        runner(**short)
    assert str(direct.value) == str(general.value)
    _check(call(dict(inputs)), runner(**inputs))  # the entry is free again afterwards


def test_gather_index_errors_and_large_results() -> None:
    src = "S[n] = X[Idx[n]]\nexport S"
    x, idx = np.arange(10.0), np.array([0, 9, 3], np.int64)
    runner, call, ref = _entered(src, {"X": x, "Idx": idx})
    with pytest.raises(FuseRuntimeError, match="out of range|index"):
        call({"X": x, "Idx": np.array([0, 10], np.int64)})
    big = np.arange(5000, dtype=np.int64) % 10
    got = call({"X": x, "Idx": big})  # 40 kB: handed over by the Python end, not copied natively
    np.testing.assert_array_equal(got["S"], x[big])
    again = runner(X=x, Idx=big)
    assert again["S"] is not got["S"]
    np.testing.assert_array_equal(got["S"], x[big])  # the first result was not overwritten


def test_reuse_outputs_and_donation() -> None:
    inputs = _inputs(8)
    runner, call, ref = _entered(BOTH, inputs, reuse_outputs=True)
    a = call(dict(inputs))
    b = runner(**_inputs(8, seed=3))
    assert a["T"] is not None and np.shares_memory(a["T"], b["T"])  # reuse_outputs: the arena's buffer each call
    _check(b, ref(**_inputs(8, seed=3)))
    prog = Program(BOTH)
    donating = prog.compile("llvm", donate=["X"])
    donating(**_inputs(8))
    donating(**_inputs(8))
    assert donating._native is None  # donated inputs take the Python path (copies of read-only or aliased ones)


def test_busy_entry_declines_and_threads_share_it() -> None:
    inputs = _inputs(300)
    runner, call, ref = _entered(BOTH, inputs)
    entry = runner._native[2]
    entry.words[0] = 1  # another thread inside it
    assert call(dict(inputs)) is None
    _check(runner(**inputs), ref(**inputs))
    entry.words[0] = 0

    def work(seed: int) -> None:
        for n in (300, 7, 300, 0):
            given = _inputs(n, seed=seed + n)
            _check(runner(**given), ref(**given))

    run_in_threads(work, 4)
    assert entry.words[0] == 0


def test_replace_sources_drops_the_entry() -> None:
    prog = Program("S[i] = X[i] + 1\nexport S")
    runner = prog.compile("llvm")
    x = np.arange(3.0)
    runner(X=x)
    runner(X=x)
    assert runner._native is not None
    prog.sources_version += 1  # what replace_sources does to the runners bound to older lowerings
    np.testing.assert_array_equal(runner(X=x)["S"], x + 1)


def test_host_call_results_and_errors_finish_in_python() -> None:
    """A host call's outputs are buffers Python made during the call: the entry leaves such a call to the Python
    end (which also drops them); an exception raised by the host call comes out as the general path's error."""
    from fuse_mlir.backends.llvm.runtime import NativeKernel
    from tests.test_llvm_backend import topk_module

    kernel = NativeKernel(topk_module())
    entry = kernel.native_entry([(0, "ind"), (1, "vals")], keep=False)
    assert entry is not None
    x = np.random.default_rng(7).standard_normal((4, 9))
    for _ in range(3):
        got = entry.call({"x": x})
        ind, vals = kernel([x])
        np.testing.assert_array_equal(got["ind"], ind)
        np.testing.assert_array_equal(got["vals"], vals)
    with pytest.raises(FuseRuntimeError, match="topk"):
        entry.call({"x": np.ones((2, 2))})  # k = 3 > 2
    assert entry.words[0] == 0 and entry.call({"x": x}) is not None
    assert entry.call({"x": x.astype(np.float32)}) is None
    assert entry.call({"x": x, "y": x}) is None


def test_parallel_kernel_through_the_entry() -> None:
    """The entry runs the kernel with the GIL released: the thread pool's workers split it as on the Python path."""
    inputs = _inputs(50_000, seed=11)
    runner, call, ref = _entered(SUM, inputs, 1e-9, threads=2, parallel_min=1000)
    for _ in range(3):
        _check(call(dict(inputs)), ref(**inputs), 1e-9)
