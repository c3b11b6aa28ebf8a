"""Streaming stores: ``streaming-stores`` marks, ``lower-loop-to-llvm{streaming-min-bytes}`` versions the loop.

A streamed loop must write exactly what the plain loop writes, for every row length (whole tiles, a partial
tile, rows shorter than a line), every alignment (misaligned ``out=`` arrays fall back to the plain loop),
both float widths, one and two threads, and with values carried through the same loop. The lowering's
structure is pinned by ``tests/lit/conversions/loop-to-llvm-streaming.mlir`` and the marking rules by
``tests/lit/passes/streaming-stores.mlir``; here the kernels run.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from fuse_mlir import Program
from fuse_mlir.backends.llvm import jit
from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import ArgKind
from fuse_mlir.passes.lowering import lower_to_loop

# name: (source, input shapes for (rows, cols), exact). Exact programs must give the same bits streamed or
# not; the others carry a reduction through a streamed loop, which the tiles reassociate.
PROGRAMS = {
    "elementwise": ("Y[i] = exp(X[i]) * A[i] + B[i]\nexport Y", lambda r, c: {"X": r * c, "A": r * c, "B": r * c}),
    "rows": ("Y[r, c] = X[r, c] * X[r, c] + 1.0\nexport Y", lambda r, c: {"X": (r, c)}),
    "row_softmax": ("Y[r, c.] = softmax(X[r, c])\nexport Y", lambda r, c: {"X": (r, c)}),
    "sum_and_value": ("E[i] = exp(X[i])\nS = sum(E[i])\nexport E, S", lambda r, c: {"X": r * c}),
    "layer_norm": ("Y[r, c.] = lnorm(X[r, c], eps=1e-5)\nexport Y", lambda r, c: {"X": (r, c)}),
}
EXACT = {"elementwise", "rows", "row_softmax", "layer_norm"}
SHAPES = [(0, 5), (3, 0), (1, 1), (3, 6), (2, 8), (5, 127), (4, 128), (3, 300), (2, 1030), (1, 70001)]


def _module(src: str, dtype: str):
    return lower_to_loop(Program(src).lower(dict.fromkeys("XAB", dtype)).module)


def _slots(module) -> list[str]:
    """The input slots' names in slot order (constant slots are filled by the kernel itself)."""
    return [a.slot.data for a in module.attributes["fuse.args"].data if a.kind.data == ArgKind.INPUT]


def _arrays(shapes: dict[str, object], dtype: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {k: rng.uniform(-2.0, 2.0, s).astype(dtype) for k, s in shapes.items()}


def _kernel(module, *, streaming: int, threads: int = 1) -> NativeKernel:
    return NativeKernel(module, streaming=streaming, threads=threads, parallel_min=1)


def _run(kernel: NativeKernel, module, arrays, out=None) -> list[np.ndarray]:
    return kernel([arrays[n] for n in _slots(module)], out=out)


def _marked(module) -> int:
    return sum(1 for op in module.walk() if isinstance(op, loop.StoreOp) and op.nontemporal is not None)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_streamed_kernels_write_what_plain_ones_write(name, dtype, threads):
    src, shapes = PROGRAMS[name]
    module = _module(src, dtype)
    assert _marked(module) > 0, "the llvm pipeline marks this program's output stores"
    plain_kernel = _kernel(module, streaming=0, threads=threads)
    streamed_kernel = _kernel(module, streaming=1, threads=threads)
    for rows, cols in SHAPES:
        arrays = _arrays(shapes(rows, cols), dtype)
        plain = _run(plain_kernel, module, arrays)
        streamed = _run(streamed_kernel, module, arrays)
        for p, s in zip(plain, streamed):
            if name in EXACT:
                np.testing.assert_array_equal(s, p, err_msg=f"{name} {rows}x{cols}")
            else:
                tol = 1e-12 if dtype == "float64" else 1e-5
                np.testing.assert_allclose(s, p, rtol=tol, atol=tol, err_msg=f"{name} {rows}x{cols}")


@pytest.mark.parametrize("offset", [0, 1, 3, 8])
def test_misaligned_out_arrays_take_the_plain_loop(offset):
    """An ``out=`` array whose rows do not start on a line is written by the plain loop, with the same values."""
    module = _module(PROGRAMS["rows"][0], "float64")
    x = _arrays({"X": (6, 200)}, "float64")
    base = np.full(6 * 200 + 16, np.nan)
    out = base[offset : offset + 6 * 200].reshape(6, 200)
    (got,) = _run(_kernel(module, streaming=1), module, x, out=[out])
    np.testing.assert_array_equal(got, x["X"] * x["X"] + 1.0)
    np.testing.assert_array_equal(out, got)


def test_below_the_size_threshold_nothing_streams():
    """The threshold is the buffer's size: a 4 KiB output under a 1 MiB threshold runs the plain loop, and its
    machine code keeps both versions."""
    module = _module(PROGRAMS["rows"][0], "float64")
    x = _arrays({"X": (4, 128)}, "float64")
    (got,) = _run(_kernel(module, streaming=1 << 20), module, x)
    np.testing.assert_array_equal(got, x["X"] * x["X"] + 1.0)


@pytest.mark.skipif(not jit.llvm.get_default_triple().startswith("x86_64"), reason="x86-64 instructions")
def test_streamed_tiles_are_whole_line_nontemporal_vector_stores():
    """The copy-out is vector stores of a whole line marked ``!nontemporal``, and a fence ends the loop."""
    kernel = NativeKernel(_module(PROGRAMS["rows"][0], "float64"), streaming=1)
    ir = kernel.optimized_ir()
    assert re.search(r"store <8 x double> %[\w.]+, ptr %[\w.]+, align 64, !nontemporal", ir)
    assert "fence seq_cst" in ir
    plain = NativeKernel(_module(PROGRAMS["rows"][0], "float64"), streaming=0).optimized_ir()
    assert "nontemporal" not in plain and "fence" not in plain


def test_stores_read_back_by_their_nest_are_not_marked():
    """Softmax's pipelined nest scales its exp row in place: those stores stay ordinary; the unpipelined
    fallback nest, which only writes Y, is marked."""
    module = _module(PROGRAMS["row_softmax"][0], "float64")
    for nest in (op for op in module.walk() if isinstance(op, loop.ForOp) and op.parallel is not None):
        loads = {x.buffer for x in nest.walk() if isinstance(x, loop.LoadOp)}
        for store in (x for x in nest.walk() if isinstance(x, loop.StoreOp)):
            if store.buffer in loads:
                assert store.nontemporal is None


def test_the_environment_sets_the_threshold(monkeypatch):
    monkeypatch.setenv("FUSE_STREAMING_MIN_BYTES", "4096")
    jit.streaming_min_bytes.cache_clear()
    try:
        assert jit.streaming_min_bytes() == 4096
        monkeypatch.setenv("FUSE_STREAMING_MIN_BYTES", "lots")
        jit.streaming_min_bytes.cache_clear()
        with pytest.raises(FuseError, match="FUSE_STREAMING_MIN_BYTES"):
            jit.streaming_min_bytes()
    finally:
        monkeypatch.delenv("FUSE_STREAMING_MIN_BYTES")
        jit.streaming_min_bytes.cache_clear()
    assert jit.streaming_min_bytes() in (0, jit.last_level_cache_bytes())
