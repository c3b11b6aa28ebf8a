"""Results are fresh arrays on every call, and released ones come back as the arena's next buffers.

The runtime hands large results out over a holder whose buffer returns to a
pool when no array views it any more (``backends/llvm/recycle.py``); these
tests check that a result (or any view of it) is never written by a later
call, that released buffers are reused, and that results behave as ordinary
writable NumPy arrays.
"""

from __future__ import annotations

import gc

import numpy as np

from fuse_mlir import Program
from fuse_mlir.backends.llvm import recycle

SRC = "Y[i, j] = exp(X[i, j]) * 2\nexport Y"


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((64, 100))


def test_results_are_not_aliased_across_calls():
    run = Program(SRC).compile("llvm")
    a = run(X=_x(0))["Y"]
    b = run(X=_x(1))["Y"]
    assert not np.shares_memory(a, b)
    np.testing.assert_allclose(a, np.exp(_x(0)) * 2)
    np.testing.assert_allclose(b, np.exp(_x(1)) * 2)
    a[0, 0] = 5.0  # writable, and writing it touches no other result
    assert a.flags.writeable and b[0, 0] != 5.0


def test_a_view_keeps_its_buffer_after_the_result_is_dropped():
    run = Program(SRC).compile("llvm")
    view = run(X=_x(2))["Y"][3:, ::2]
    expected = (np.exp(_x(2)) * 2)[3:, ::2]
    gc.collect()
    for seed in range(3, 8):  # later calls must not reuse the buffer the view still reads
        run(X=_x(seed))
    np.testing.assert_allclose(view, expected)


def test_released_results_are_reused_by_later_calls():
    run = Program(SRC).compile("llvm")
    run(X=_x(0))  # warm: the arena slot has its own buffer
    y = run(X=_x(1))["Y"]
    addr = y.__array_interface__["data"][0]
    del y
    gc.collect()
    assert recycle.pool_bytes() > 0
    again = [run(X=_x(s))["Y"].__array_interface__["data"][0] for s in range(2, 4)]
    assert addr in again  # the released buffer came back (the slot restocked from the pool)


def test_the_pool_is_bounded(monkeypatch):
    monkeypatch.setattr(recycle, "POOL_BYTES", 0)
    before = recycle.pool_bytes()
    run = Program(SRC).compile("llvm")
    for s in range(3):
        run(X=_x(s))
    gc.collect()
    assert recycle.pool_bytes() <= before
