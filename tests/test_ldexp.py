"""``mathx.ldexp``, the expansions' final scale by 2^n: its two lowerings, interpreters and renderer agree.

The JIT lowers it to ``llvm.ldexp`` (one ``vscalefpd`` on AVX-512) or to two
multiplies by exponent-built powers of two; both must give bit-identical
results on every expansion, and both must equal NumPy's ``ldexp`` inside the
op's documented domain. The loop interpreter and the numba renderer run it too.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks import math_probe as probe
from fuse_mlir.backends.llvm.jit import native_ldexp
from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.backends.numba import numba_program
from fuse_mlir.diagnostics import FuseError
from fuse_mlir.interp.loop_interp import run_loop_module
from fuse_mlir.ir import parse_mlir, print_module
from fuse_mlir.mathlib.ops import LdexpOp
from tests.test_expand_math import FUNCTIONS, points

BITS = {np.float64: np.int64, np.float32: np.int32}
# Where exp's result crosses into the subnormal range and into overflow, the scale's two halves matter most.
EDGE_RANGES = {np.float64: [(-745.2, -700.0), (700.0, 709.8)], np.float32: [(-104.0, -85.0), (85.0, 88.8)]}


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(a.view(BITS[a.dtype.type]), b.view(BITS[b.dtype.type]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [*FUNCTIONS, "pow"])
def test_native_and_split_lowerings_agree_bitwise(fn, dtype):
    """Every expansion gives the same bits with ``llvm.ldexp`` as with the two-half product, on the accuracy
    tests' points plus dense ones where exp's result goes subnormal or overflows."""
    native = probe.math_kernel(fn, dtype, native_ldexp=True)
    split = probe.math_kernel(fn, dtype, native_ldexp=False)
    rng = np.random.default_rng(7)
    if fn == "pow":
        x = np.abs(points("pow", dtype))
        args: tuple[np.ndarray, ...] = (x, rng.uniform(-400.0, 400.0, x.size).astype(dtype))
    else:
        edges = [rng.uniform(lo, hi, 20_000) for lo, hi in EDGE_RANGES[dtype]]
        args = (np.concatenate([points(fn, dtype), *edges]).astype(dtype),)
    with np.errstate(all="ignore"):
        assert _bitwise_equal(native(*args), split(*args)), fn


LOOP_LDEXP = """
builtin.module attributes {fuse.args = [#fuse.arg<"X", input>, #fuse.arg<"N", input>], fuse.results = [#fuse.result<"Y", export>], fuse.errors = [], fuse.host_calls = []} {
  func.func @fuse_main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = loop.arg 0 : i64 "X" : memref<?xT>
    %n = loop.arg 1 : i64 "N" : memref<?xi32>
    %len = loop.dim %x, 0 : i64 : memref<?xT>
    %y = loop.alloc(%len) : memref<?xT>
    loop.for %c0 to %len step %c1 attributes {parallel} {
    ^bb0(%i: index):
      %v = loop.load %x[%i] : memref<?xT> -> T
      %m = loop.load %n[%i] : memref<?xi32> -> i32
      %s = mathx.ldexp %v, %m : T
      loop.store %s, %y[%i] : T, memref<?xT>
      loop.yield
    }
    loop.result %y, 0 : i64 "Y" : memref<?xT>
    func.return
  }
}
"""


def _domain(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Values near 1 of both signs, zeros, inf and NaN, scaled by exponents over the op's documented domain
    (|n| ≤ 2044, float32 252): normal, subnormal, underflowing and overflowing results."""
    rng = np.random.default_rng(3)
    big = 2044 if dtype == np.float64 else 252
    x = np.concatenate([rng.uniform(0.5, 2.0, 4000) * rng.choice([-1.0, 1.0], 4000), [0.0, -0.0, np.inf, -np.inf]])
    x = np.concatenate([x, [np.nan]]).astype(dtype)
    n = rng.integers(-big, big + 1, x.size).astype(np.int32)
    n[:8] = [big, -big, 0, 1, -1, big // 2, -(big // 2) - 30, -(big // 2) - 60]
    return x, n


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_executor_of_the_op_matches_numpy(dtype):
    """Parsed from text (the op round-trips), run by the loop interpreter, the numba renderer and both native
    lowerings: all equal ``np.ldexp`` bit for bit on the domain."""
    text = LOOP_LDEXP.replace("T", "f64" if dtype == np.float64 else "f32")
    module = parse_mlir(text)
    assert parse_mlir(print_module(module)).is_structurally_equivalent(module)
    assert [type(op) for op in module.walk() if isinstance(op, LdexpOp)] == [LdexpOp]
    x, n = _domain(dtype)
    with np.errstate(all="ignore"):
        want = np.ldexp(x, n)
        runs = {
            "loop interpreter": run_loop_module(module, {"X": x, "N": n}).exports["Y"],
            "numba": numba_program(module, parallel=False).function(x, n, np.zeros(3, dtype=np.int64))[0],
            "native ldexp": NativeKernel(module, ldexp=True)([x, n])[0],
            "split ldexp": NativeKernel(module, ldexp=False)([x, n])[0],
        }
    for name, got in runs.items():
        assert got.dtype == dtype, name
        assert _bitwise_equal(np.asarray(got), want), name


def test_exponent_must_be_i32():
    text = LOOP_LDEXP.replace("T", "f64").replace("memref<?xi32>", "memref<?xi64>").replace("-> i32", "-> i64")
    with pytest.raises(FuseError, match="i32"):
        parse_mlir(text)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_host_choice_reaches_the_jit(dtype):
    """The JIT's kernels use ``llvm.ldexp`` exactly on AVX-512 hosts (where it vectorises to ``vscalef``) and
    the two-half product elsewhere; either way the exp loop is vectorised."""
    ir = probe.math_kernel("exp", dtype).kernel.optimized_ir()  # type: ignore[attr-defined]
    elem = "f64" if dtype == np.float64 else "f32"
    assert bool(re.search(rf"@llvm\.ldexp\.v\d+{elem}", ir)) == native_ldexp()
    assert re.search(rf"<\d+ x {'double' if dtype == np.float64 else 'float'}>", ir)
