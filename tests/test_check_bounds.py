"""The checked build (``compile(check_bounds=True)``, ``FUSE_CHECK_BOUNDS=1``): out-of-range accesses are errors.

Loop-level IR written to read or write outside a buffer, and a deliberately
wrong lowering (a loop pass that shifts every load by one), must give a
FuseRuntimeError naming the op on llvm (O0, O2, parallel nests) and numba;
ordinary programs must run unchanged under it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp

from fuse_mlir import FuseRuntimeError, Program
from fuse_mlir.backends.llvm.executor import NativeExecutor, compile_program
from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.dialects import loop
from fuse_mlir.ir import parse_mlir
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass
from fuse_mlir.passes.registry import register_pass
from fuse_mlir.passes.transforms.check_bounds import check_bounds, checked_build
from tests.frameworks import available_backends
from tests.fresh import fresh_run

HEAD = 'builtin.module attributes {fuse.args = [#fuse.arg<"x", input>], fuse.results = [#fuse.result<"y", export>], fuse.errors = []} {'


def loop_module(body: str) -> ModuleOp:
    return parse_mlir(f"{HEAD}\n  func.func @fuse_main() {{\n{body}\n    func.return\n  }}\n}}\n")


def checked_kernel(body: str) -> NativeKernel:
    module = loop_module(body)
    assert check_bounds(module) > 0
    return NativeKernel(module)


READ_PAST = """
    %x = loop.arg 0 : i64 "x" : memref<?xf64>
    %y = loop.alloc() : memref<f64>
    %p = arith.constant {pos} : index
    %v = loop.load %x[%p] : memref<?xf64> -> f64
    loop.store %v, %y[] : f64, memref<f64>
    loop.result %y, 0 : i64 "y" : memref<f64>"""


@pytest.mark.parametrize("pos", [2, 3, 1000000, -1])
def test_a_load_past_the_end_is_an_error_naming_the_op(pos):
    kernel = checked_kernel(READ_PAST.format(pos=pos))
    with pytest.raises(FuseRuntimeError, match=rf"loop.load out of bounds: position {pos} on axis 0 of input 'x'"):
        kernel([np.zeros(2)])
    np.testing.assert_array_equal(checked_kernel(READ_PAST.format(pos=1))([np.arange(2.0)])[0], 1.0)


def test_a_store_past_the_end_is_an_error_naming_the_op():
    body = """
    %x = loop.arg 0 : i64 "x" : memref<?xf64>
    %n = loop.dim %x, 0 : i64 : memref<?xf64>
    %y = loop.alloc(%n) : memref<?xf64>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %up = arith.addi %n, %c1 : index
    loop.for %c0 to %up step %c1 {
    ^bb0(%i: index):
      %v = arith.constant 1.0 : f64
      loop.store %v, %y[%i] : f64, memref<?xf64>
      loop.yield
    }
    loop.result %y, 0 : i64 "y" : memref<?xf64>"""
    kernel = checked_kernel(body)
    with pytest.raises(FuseRuntimeError, match=r"loop.store out of bounds: position 4 on axis 0 of result 'y'.* 4"):
        kernel([np.zeros(4)])


def test_a_blas_call_larger_than_its_buffers_is_an_error():
    body = """
    %x = loop.arg 0 : i64 "x" : memref<?x?xf64>
    %m = loop.dim %x, 0 : i64 : memref<?x?xf64>
    %c1 = arith.constant 1 : index
    %k = arith.addi %m, %c1 : index
    %y = loop.alloc(%m, %m) : memref<?x?xf64>
    loop.gemm %x, %x, %y batch %c1 m %m n %m k %k {trans_a = false, trans_b = false, broadcast_a = false, broadcast_b = false} : memref<?x?xf64>, memref<?x?xf64>, memref<?x?xf64>
    loop.result %y, 0 : i64 "y" : memref<?x?xf64>"""
    kernel = checked_kernel(body)
    with pytest.raises(FuseRuntimeError, match=r"loop.gemm out of bounds: BLAS would access 12 elements of operand a"):
        kernel([np.ones((3, 3))])


@pytest.mark.parametrize(
    ("strides", "reach", "spec"),
    [
        ("%c3, %c9, %c3, %c9, %c3, %c9", None, "ibj,jbk->ibk"),  # [rows, batch, cols], 3 × 3×3: exactly fits
        ("%c9, %c3, %c3, %c9, %c3, %c9", None, "bij,jbk->ibk"),  # a contiguous [batch, rows, cols]: fits
        ("%c3, %c10, %c3, %c9, %c3, %c9", "29 elements of operand a", None),  # a row stride one too long
        ("%c10, %c3, %c3, %c9, %c3, %c9", "29 elements of operand a", None),  # a batch stride one too long
        ("%c3, %c9, %c3, %c9, %c4, %c9", "29 elements of operand c", None),
    ],
)
def test_a_strided_blas_call_is_checked_by_the_last_element_it_reaches(
    strides: str, reach: str | None, spec: str | None
) -> None:
    """With explicit strides the check is on the furthest element, (batch-1)·step + (rows-1)·row + cols, so an
    exactly fitting strided layout passes and one element more fails."""
    body = f"""
    %x = loop.arg 0 : i64 "x" : memref<?x?x?xf64>
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c9 = arith.constant 9 : index
    %c10 = arith.constant 10 : index
    %y = loop.alloc(%c3, %c3, %c3) : memref<?x?x?xf64>
    loop.gemm %x, %x, %y batch %c3 m %c3 n %c3 k %c3 strides({strides}) {{trans_a = false, trans_b = false, broadcast_a = false, broadcast_b = false}} : memref<?x?x?xf64>, memref<?x?x?xf64>, memref<?x?x?xf64>
    loop.result %y, 0 : i64 "y" : memref<?x?x?xf64>"""
    kernel = checked_kernel(body)
    x = np.random.default_rng(0).standard_normal((3, 3, 3))
    if spec is not None:
        (y,) = kernel([x])
        np.testing.assert_allclose(y, np.einsum(spec, x, x), rtol=1e-12)
    else:
        with pytest.raises(FuseRuntimeError, match=rf"loop.gemm out of bounds: BLAS would access {reach}"):
            kernel([x])


def test_checking_twice_adds_nothing():
    module = loop_module(READ_PAST.format(pos=1))
    assert check_bounds(module) == 1
    assert check_bounds(module) == 0


@register_pass
@dataclass(frozen=True)
class ShiftLoadsForTest(FusePass):
    """A deliberately wrong lowering for the checked-build tests: every load reads one position further on."""

    name = "test-shift-loads"
    level: ClassVar[str] = "loop"

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        for op in list(module.walk()):
            if isinstance(op, loop.LoadOp) and op.positions:
                one = arith.ConstantOp(IntegerAttr(1, op.positions[-1].type))  # type: ignore[arg-type]
                shifted = arith.AddiOp(op.positions[-1], one.result)
                block = op.parent_block()
                assert block is not None
                block.insert_ops_before([one, shifted], op)
                op.operands = [*op.operands[:-1], shifted.result]
        return True


WRONG = [
    ("llvm-O2", "llvm", {}),
    ("llvm-O0", "llvm", {"opt_level": 0}),
    ("llvm-threads", "llvm", {"threads": 4, "parallel_min": 1}),
]


@pytest.mark.parametrize("name,backend,options", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_lowering_is_caught(name, backend, options):
    prog = Program("Y[i, j] = exp(X[i, j]) + 1\nexport Y")
    x = np.zeros((64, 32))
    runner = prog.compile(backend, pipeline="test-shift-loads", check_bounds=True, cache=False, **options)
    with pytest.raises(FuseRuntimeError, match=r"loop.load out of bounds: position 32 on axis 1 of input 'X'"):
        runner(X=x)


PROGRAMS = [
    ("gather-offset-slice", "Y[i] = T[G[i]] + X[i+1] + X[i-1] + S[i, 0:2]", "GTXS"),
    ("matmul", "Y[i, k] = A[i, j] B[j, k]", "AB"),
    ("softmax-reduce", "Y[b, o.] = softmax(A[b, o])\nZ[b] max= A[b, o]", "A"),
    ("inplace-chain", "H[b, h] = relu(A[b, j] B[j, h] + C[h])\nY[b, h] = H[b, h] 2", "ABC"),
]


@pytest.mark.parametrize("name,src,names", PROGRAMS, ids=[p[0] for p in PROGRAMS])
@pytest.mark.parametrize("options", [{}, {"opt_level": 0}, {"threads": 4, "parallel_min": 1}])
def test_ordinary_programs_pass_checked(name, src, names, options):
    rng = np.random.default_rng(0)
    every = {
        "G": np.array([2, 0, 1, 2, 0]),
        "T": rng.standard_normal(3),
        "X": rng.standard_normal(5),
        "S": rng.standard_normal((5, 4)),
        "A": rng.standard_normal((5, 6)),
        "B": rng.standard_normal((6, 3)),
        "C": rng.standard_normal(3),
    }
    inputs = {n: every[n] for n in names}
    prog = Program(src)
    ref = prog.compile("reference")(**inputs)
    got = prog.compile("llvm", check_bounds=True, **options)(**inputs)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-12, atol=1e-12)
    if not options and available_backends(["numba"]):
        numba = prog.compile("numba", check_bounds=True)(**inputs)
        for k in ref:
            np.testing.assert_allclose(numba[k], ref[k], rtol=1e-12, atol=1e-12)


def test_checked_is_part_of_the_compile_key():
    module = Program("Y[i] = X[i] 2\nexport Y").lower({"X": np.float64}).module
    plain = compile_program(module)
    checked = compile_program(module, check_bounds=True)
    assert plain is not checked
    assert checked.loop_module is not None and "fuse.checked" in checked.loop_module.attributes
    assert compile_program(module, check_bounds=True) is checked


def test_the_environment_variable_turns_it_on(monkeypatch):
    monkeypatch.setenv("FUSE_CHECK_BOUNDS", "1")
    assert checked_build() and NativeExecutor().check_bounds
    assert not checked_build(False)
    monkeypatch.setenv("FUSE_CHECK_BOUNDS", "0")
    assert not checked_build() and not NativeExecutor().check_bounds


def test_fuse_run_check_bounds(tmp_path):
    src = tmp_path / "p.fuse"
    src.write_text("Y[i] = X[i] 2\nexport Y\n")
    np.save(tmp_path / "x.npy", np.arange(3.0))
    out = fresh_run(["-m", "fuse_mlir", "run", str(src), "--check-bounds", "--input", f"X={tmp_path / 'x.npy'}"])
    assert "[0. 2. 4.]" in out


def test_donated_and_out_buffers_pass_checked():
    """Buffers bound to a donated input or to the caller's out= array are checked against their extents too."""
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((5, 6)), rng.standard_normal((6, 3)), rng.standard_normal((5, 3))
    src = "Y[i, k] = relu(A[i, j] B[j, k] + C[i, k])\nexport Y"
    want = np.maximum(a @ b + c, 0)
    run = Program(src).compile("llvm", check_bounds=True, donate=["C"])
    np.testing.assert_allclose(run(A=a, B=b, C=c.copy())["Y"], want, rtol=1e-12)
    out = np.empty((5, 3))
    got = Program(src).compile("llvm", check_bounds=True)(A=a, B=b, C=c, out={"Y": out})["Y"]
    assert got is out
    np.testing.assert_allclose(out, want, rtol=1e-12)
