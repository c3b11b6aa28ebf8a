"""The native backend: loop level -> llvm dialect -> LLVM IR -> llvmlite JIT, checked against NumPy.

Loop-level modules are built by hand here (independent of lower-ew-to-loop).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DictionaryAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue

from fuse_mlir import Program
from fuse_mlir.backends.llvm.emit import emit_llvm_ir
from fuse_mlir.backends.llvm.jit import emit_assembly, optimize_ir
from fuse_mlir.backends.llvm.runtime import SMALL_RESULT, NativeKernel
from fuse_mlir.diagnostics import FuseRuntimeError, Loc
from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import ArgEntry, ErrorEntry, HostCallEntry, LoopAbi, ResultEntry
from fuse_mlir.passes.conversions.lower_loop_to_llvm import LowerLoopToLLVM, lower_module

F64, F32, I8, I64 = Float64Type(), Float32Type(), IntegerType(8), IntegerType(64)
INDEX = IndexType()
D = DYNAMIC_INDEX

# --------------------------------------------------------------------------- building loop-level modules


def idx(v: int) -> SSAValue:
    return arith.ConstantOp(IntegerAttr(v, INDEX)).result


def fconst(v: float, t: Attribute) -> SSAValue:
    return arith.ConstantOp(FloatAttr(v, t)).result  # type: ignore[arg-type]


def for_(
    upper: SSAValue, inits: Sequence[SSAValue], body: Callable[[SSAValue, list[SSAValue]], Sequence[SSAValue]]
) -> list[SSAValue]:
    """``loop.for`` from 0 to ``upper`` by 1; ``body(iv, carried)`` returns the next carried values."""
    region, block = loop.ForOp.make_body(inits)
    with ImplicitBuilder(block):
        loop.YieldOp(list(body(block.args[0], list(block.args[1:]))))
    return list(loop.ForOp(idx(0), upper, idx(1), inits, region).results)


def memref(elem: Attribute, rank: int) -> MemRefType:
    return MemRefType(elem, [D] * rank)


def build(
    body: Callable[[], None],
    args: Sequence[tuple[str, str]] | None = None,
    results: Sequence[str] | None = None,
    errors: Sequence[tuple[str, str]] = (),
    host_calls: Sequence[HostCallEntry] = (),
) -> ModuleOp:
    """A loop-level module: ``func.func @fuse_main`` whose body ``body()`` builds, plus the fuse.* attributes."""
    block = Block()
    with ImplicitBuilder(block):
        body()
        func.ReturnOp()
    module = ModuleOp([func.FuncOp("fuse_main", ([], []), Region(block))])
    LoopAbi(
        args=None if args is None else [ArgEntry(n, k) for n, k in args],
        results=None if results is None else [ResultEntry(n) for n in results],
        errors=[ErrorEntry(m, loc) for m, loc in errors],
        host_calls=list(host_calls),
    ).write(module)
    module.verify()
    return module


def elementwise_module(elem: Attribute, rank: int) -> ModuleOp:
    """out = exp(x) * y + z over a rank-``rank`` array."""
    t = memref(elem, rank)

    def body() -> None:
        x, y, z = (loop.ArgOp(k, n, t).result for k, n in enumerate("xyz"))
        dims = [loop.DimOp(x, d).result for d in range(rank)]
        out = loop.AllocOp(dims, t).result

        def nest(ivs: list[SSAValue]) -> None:
            if len(ivs) == rank:
                e = math.ExpOp(loop.LoadOp(x, ivs).result).result
                p = arith.MulfOp(e, loop.LoadOp(y, ivs).result).result
                s = arith.AddfOp(p, loop.LoadOp(z, ivs).result).result
                loop.StoreOp(s, out, ivs)
                return
            for_(dims[len(ivs)], [], lambda i, _: (nest([*ivs, i]), [])[1])

        nest([])
        loop.ResultOp(out, 0, "out")

    return build(body, [("x", "input"), ("y", "input"), ("z", "input")], ["out"])


def row_reduce_module(elem: Attribute, kind: str) -> ModuleOp:
    """out[i] = reduce_j x[i, j] with the accumulator carried in registers; kind: sum, max, any."""
    t = memref(elem, 2)

    def body() -> None:
        x = loop.ArgOp(0, "x", t).result
        m, n = loop.DimOp(x, 0).result, loop.DimOp(x, 1).result
        out = loop.AllocOp([m], memref(elem, 1)).result
        if kind == "sum":
            init = fconst(0.0, elem)
        elif kind == "max":
            init = fconst(float("-inf"), elem)
        else:
            init = arith.ConstantOp(IntegerAttr(0, elem)).result  # type: ignore[arg-type]

        def row(i: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            def col(j: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
                v = loop.LoadOp(x, [i, j]).result
                if kind == "sum":
                    return [arith.AddfOp(acc[0], v).result]
                if kind == "max":
                    return [arith.MaximumfOp(acc[0], v).result]
                nz = arith.CmpiOp(v, arith.ConstantOp(IntegerAttr(0, elem)).result, "ne").result  # type: ignore[arg-type]
                return [arith.OrIOp(acc[0], arith.ExtUIOp(nz, elem).result).result]

            (total,) = for_(n, [init], col)
            loop.StoreOp(total, out, [i])
            return []

        for_(m, [], row)
        loop.ResultOp(out, 0, "out")

    return build(body, [("x", "input")], ["out"])


def total_sum_module() -> ModuleOp:
    """A rank-0 result: the sum of a vector."""

    def body() -> None:
        x = loop.ArgOp(0, "x", memref(F64, 1)).result
        n = loop.DimOp(x, 0).result
        out = loop.AllocOp([], MemRefType(F64, [])).result
        (total,) = for_(n, [fconst(0.0, F64)], lambda i, acc: [arith.AddfOp(acc[0], loop.LoadOp(x, [i]).result).result])
        loop.StoreOp(total, out, [])
        loop.ResultOp(out, 0, "total")

    return build(body, [("x", "input")], ["total"])


GATHER_LOC = "prog.fuse:3:7:6"


def gather_module() -> ModuleOp:
    """out[j] = x[idx[j]] with a bounds check (error code 1)."""

    def body() -> None:
        x = loop.ArgOp(0, "x", memref(F64, 1)).result
        ix = loop.ArgOp(1, "idx", memref(I64, 1)).result
        n = loop.DimOp(x, 0).result
        m = loop.DimOp(ix, 0).result
        out = loop.AllocOp([m], memref(F64, 1)).result

        def step(j: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            p = arith.IndexCastOp(loop.LoadOp(ix, [j]).result, INDEX).result
            loop.CheckOp(arith.CmpiOp(p, n, "ult").result, p, n, 1)
            loop.StoreOp(loop.LoadOp(x, [p]).result, out, [j])
            return []

        for_(m, [], step)
        loop.ResultOp(out, 0, "out")

    return build(
        body,
        [("x", "input"), ("idx", "input")],
        ["out"],
        errors=[("index {0} is out of range for extent {1}", GATHER_LOC)],
    )


def gemm_module(elem: Attribute, trans_a: bool, trans_b: bool, batched: bool, broadcast_b: bool = False) -> ModuleOp:
    """c[b] = op(a[b]) @ op(bm[b]), shapes read from the arguments."""
    ra = 3 if batched else 2
    rb = 2 if broadcast_b or not batched else 3

    def body() -> None:
        a = loop.ArgOp(0, "a", memref(elem, ra)).result
        b = loop.ArgOp(1, "b", memref(elem, rb)).result
        off_a, off_b = ra - 2, rb - 2
        m = loop.DimOp(a, off_a + (1 if trans_a else 0)).result
        k = loop.DimOp(a, off_a + (0 if trans_a else 1)).result
        n = loop.DimOp(b, off_b + (0 if trans_b else 1)).result
        batch = loop.DimOp(a, 0).result if batched else idx(1)
        shape = [batch, m, n] if batched else [m, n]
        c = loop.AllocOp(shape, memref(elem, len(shape))).result
        loop.GemmOp(a, b, c, batch, m, n, k, trans_a, trans_b, False, broadcast_b)
        loop.ResultOp(c, 0, "c")

    return build(body, [("a", "input"), ("b", "input")], ["c"])


def topk_module() -> ModuleOp:
    """The 3 largest entries of each row, by the runtime's host call."""

    def body() -> None:
        x = loop.ArgOp(0, "x", memref(F64, 2)).result
        call = loop.HostCallOp(
            operands=[[x]],
            result_types=[[MemRefType(I64, [D, 3]), MemRefType(F64, [D, 3])]],
            attributes={"fn": StringAttr("topk"), "id": IntegerAttr(0, i64)},
        )
        loop.ResultOp(call.results[0], 0, "idx")
        loop.ResultOp(call.results[1], 1, "vals")

    params = DictionaryAttr({"k": IntegerAttr(3, i64), "axis": IntegerAttr(1, i64)})
    return build(body, [("x", "input")], ["idx", "vals"], host_calls=[HostCallEntry("topk", params)])


# --------------------------------------------------------------------------- tests

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("elem,dtype", [(F64, np.float64), (F32, np.float32)])
@pytest.mark.parametrize("shape", [(0,), (1,), (1000,), (3, 5), (0, 4), (1, 1)])
def test_elementwise(elem: Attribute, dtype: type, shape: tuple[int, ...]) -> None:
    kernel = NativeKernel(elementwise_module(elem, len(shape)))
    x, y, z = (RNG.standard_normal(shape).astype(dtype) for _ in range(3))
    (out,) = kernel([x, y, z])
    assert out.dtype == dtype and out.shape == shape
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out, np.exp(x) * y + z, rtol=tol, atol=tol)
    if out.nbytes > SMALL_RESULT:
        assert out.ctypes.data % 64 == 0  # a view of the runtime's aligned buffer (small results are copied)


def test_intrinsics_mangled_per_type() -> None:
    m64, m32 = elementwise_module(F64, 1), elementwise_module(F32, 1)
    lower_module(m64)
    lower_module(m32)
    assert "declare double @llvm.exp.f64(double)" in emit_llvm_ir(m64)
    assert "declare float @llvm.exp.f32(float)" in emit_llvm_ir(m32)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("shape", [(4, 1000), (3, 0), (0, 3), (1, 1), (2, 7)])
def test_row_sum(strict: bool, shape: tuple[int, int]) -> None:
    kernel = NativeKernel(row_reduce_module(F64, "sum"), strict=strict)
    x = RNG.standard_normal(shape)
    (out,) = kernel([x])
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-12, atol=1e-12)
    if strict:  # sequential order: bit-exact against a sequential sum
        want = np.array([sum(row.tolist(), 0.0) for row in x])
        assert np.array_equal(out, want)


def test_reassoc_only_on_reduction_and_not_strict() -> None:
    m = row_reduce_module(F64, "sum")
    LowerLoopToLLVM().apply(None, m)  # type: ignore[arg-type]
    text = emit_llvm_ir(m)
    assert "fadd reassoc double" in text
    m = row_reduce_module(F64, "sum")
    LowerLoopToLLVM(strict=True).apply(None, m)  # type: ignore[arg-type]
    assert "reassoc" not in emit_llvm_ir(m)
    m = elementwise_module(F64, 1)
    lower_module(m)
    assert "reassoc" not in emit_llvm_ir(m)


CONTRACT_MODULE = Path(__file__).parent / "lit" / "conversions" / "loop-to-llvm-contract.mlir"


@pytest.mark.parametrize("strict", [False, True])
def test_products_fused_into_reductions(strict: bool) -> None:
    """An accumulating add or sub and the product only it uses get ``contract`` (one fma); a product that is
    also stored does not, nor anything with ``strict``. The values: a dot product, a sum of negated squares
    and a sum of stored squares per row, against NumPy (the fused products round once, not twice)."""
    from fuse_mlir.ir import parse_mlir

    text = CONTRACT_MODULE.read_text()
    m = parse_mlir(text)
    LowerLoopToLLVM(strict=strict).apply(None, m)  # type: ignore[arg-type]
    ir = emit_llvm_ir(m)
    contracted = [line for line in ir.splitlines() if " contract " in line]
    if strict:
        assert not contracted and "reassoc" not in ir
    else:
        assert sum("fmul contract double" in line for line in contracted) == 2, contracted
        assert sum("fadd reassoc contract double" in line for line in contracted) == 1, contracted
        assert sum("fsub reassoc contract double" in line for line in contracted) == 1, contracted
        assert len(contracted) == 4, contracted
        asm = emit_assembly(ir)
        if platform.machine() in ("x86_64", "AMD64") and "vfmadd" in emit_assembly(_FMA_PROBE):
            assert "vfmadd" in asm or "vfnmadd" in asm
    kernel = NativeKernel(parse_mlir(text), strict=strict)
    x, y = RNG.standard_normal((5, 300)), RNG.standard_normal((5, 300))
    d, p = kernel([x, y])
    np.testing.assert_allclose(d, (x * y).sum(1) - (x * x).sum(1) + (y * y).sum(1), rtol=1e-12, atol=1e-12)
    assert np.array_equal(p, y * y)


_FMA_PROBE = """
define double @probe(double %a, double %b, double %c) {
  %m = fmul contract double %a, %b
  %s = fadd contract double %m, %c
  ret double %s
}
"""


def test_sum_reduction_vectorises() -> None:
    m = row_reduce_module(F64, "sum")
    lower_module(m)
    opt = optimize_ir(emit_llvm_ir(m))
    assert "x double>" in opt, opt  # e.g. <4 x double> / <8 x double>
    assert "fadd reassoc <" in opt
    asm = emit_assembly(emit_llvm_ir(m))
    assert "fuse_main:" in asm
    if platform.machine() in ("x86_64", "AMD64"):
        assert "vaddpd" in asm  # packed double adds


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the large code model's form is x86-64's")
def test_printed_assembly_is_the_jits() -> None:
    """emit_assembly (``fuse-opt --emit=asm``) generates code as the JIT does: MCJIT's large code model reaches
    the constant pool (here the max's -inf) through ``movabsq`` immediates, never a RIP-relative operand, which
    the default code model would print for a loop that never runs."""
    m = row_reduce_module(F64, "max")
    lower_module(m)
    asm = emit_assembly(emit_llvm_ir(m))
    uses = [line for line in asm.splitlines() if ".LCPI" in line and not line.startswith(".LCPI")]
    assert uses, asm
    assert all(line.strip().startswith("movabsq") and "(%rip)" not in line for line in uses), uses


def test_max_reduction_nan() -> None:
    kernel = NativeKernel(row_reduce_module(F64, "max"))
    x = RNG.standard_normal((5, 37))
    x[1, 3] = np.nan
    x[4, 36] = np.nan
    (out,) = kernel([x])
    want = x.max(axis=1)
    assert np.array_equal(out, want, equal_nan=True)
    assert np.isnan(out[1]) and np.isnan(out[4]) and not np.isnan(out[0])
    (empty,) = kernel([np.zeros((3, 0))])
    assert np.all(empty == -np.inf)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["max", "min", "logsumexp"])
def test_extremal_reductions_propagate_nan_and_agree_on_zeros(kind: str, dtype: str) -> None:
    """Max/min reductions carry ``nsz`` (tests/lit/llvm/extremal_reduction.fuse): a NaN anywhere in a row (first,
    last, inside a vector, the whole row), ±inf and rows of mixed-sign zeros give NumPy's values through the whole
    pipeline (row fusion, pipelining, two threads), for row lengths on both sides of every vector width."""
    runner = Program(f"L[r] = {kind}(X[r, c])\nexport L").compile("llvm", threads=2, parallel_min=0)
    for n in (1, 7, 16, 33, 1000, 4099):
        x = np.random.default_rng(n).standard_normal((10, n)).astype(dtype)
        x[1, (37 % n)] = np.nan
        x[2, :] = np.nan
        x[3, n // 2] = np.inf
        x[4, n // 3] = -np.inf
        x[5, :] = -0.0
        x[6, ::2] = 0.0
        x[6, 1::2] = -0.0
        x[7, -1] = np.nan
        x[8, :] = -np.inf
        x[9, 0] = np.nan
        with np.errstate(invalid="ignore", over="ignore"):
            m = x.max(axis=1, keepdims=True)
            shift = np.where(np.isfinite(m), m, 0)
            want = {
                "max": x.max(axis=1),
                "min": x.min(axis=1),
                "logsumexp": (np.log(np.exp(x - shift).sum(axis=1, keepdims=True)) + shift)[:, 0],
            }[kind]
        got = runner(X=x)["L"]
        assert np.array_equal(np.isnan(got), np.isnan(want)), (n, got, want)
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, equal_nan=True)


def test_i8_any_reduction() -> None:
    kernel = NativeKernel(row_reduce_module(I8, "any"))
    x = (RNG.random((6, 300)) < 0.002).astype(np.int8)
    x[2] = 0
    x[3, 299] = 1
    (out,) = kernel([x])
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, x.any(axis=1).astype(np.int8))
    (out_b,) = kernel([x.astype(bool)])  # booleans are accepted for i8 slots
    np.testing.assert_array_equal(out_b, out)


def test_rank0_result() -> None:
    kernel = NativeKernel(total_sum_module())
    x = RNG.standard_normal(1001)
    (total,) = kernel([x])
    assert total.shape == () and total.dtype == np.float64
    np.testing.assert_allclose(total, x.sum(), rtol=1e-12)
    (zero,) = kernel([np.zeros(0)])
    assert zero == 0.0


def test_gather_and_failing_check() -> None:
    kernel = NativeKernel(gather_module())
    x = np.arange(10.0)
    ix = np.array([3, 0, 9, 9], dtype=np.int64)
    (out,) = kernel([x, ix])
    np.testing.assert_array_equal(out, x[ix])
    with pytest.raises(FuseRuntimeError) as info:
        kernel([x, np.array([1, 10], dtype=np.int64)])
    assert info.value.message == "index 10 is out of range for extent 10"
    assert info.value.loc == Loc.decode(GATHER_LOC)
    with pytest.raises(FuseRuntimeError, match="index -1 is out of range"):
        kernel([x, np.array([-1], dtype=np.int64)])


@pytest.mark.parametrize("elem,dtype", [(F64, np.float64), (F32, np.float32)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm(elem: Attribute, dtype: type, trans_a: bool, trans_b: bool) -> None:
    kernel = NativeKernel(gemm_module(elem, trans_a, trans_b, batched=False))
    m, n, k = 5, 7, 3
    a = RNG.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = RNG.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    (c,) = kernel([a, b])
    want = (a.T if trans_a else a) @ (b.T if trans_b else b)
    np.testing.assert_allclose(c, want, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("broadcast_b", [False, True])
def test_gemm_batched(broadcast_b: bool) -> None:
    kernel = NativeKernel(gemm_module(F64, False, True, batched=True, broadcast_b=broadcast_b))
    a = RNG.standard_normal((4, 6, 5))
    b = RNG.standard_normal((3, 5) if broadcast_b else (4, 3, 5))
    (c,) = kernel([a, b])
    np.testing.assert_allclose(c, a @ np.swapaxes(b, -1, -2), rtol=1e-12)
    (empty,) = kernel([np.zeros((0, 6, 5)), b[:0] if not broadcast_b else b])
    assert empty.shape == (0, 6, 3)


def test_gemm_degenerate_extents() -> None:
    kernel = NativeKernel(gemm_module(F64, False, False, batched=False))
    (c,) = kernel([np.ones((1, 1)), np.full((1, 1), 2.0)])
    assert c.shape == (1, 1) and c[0, 0] == 2.0
    (c,) = kernel([np.ones((0, 4)), np.ones((4, 3))])
    assert c.shape == (0, 3)


def test_host_call_topk() -> None:
    kernel = NativeKernel(topk_module())
    x = RNG.standard_normal((4, 9))
    ind, vals = kernel([x])
    order = np.argsort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(ind, order)
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, axis=1))
    with pytest.raises(FuseRuntimeError, match="topk"):
        kernel([np.ones((2, 2))])  # k = 3 > 2: the host call's ValueError, re-raised


def test_argument_validation() -> None:
    kernel = NativeKernel(elementwise_module(F64, 1))
    x = np.ones(4)
    with pytest.raises(FuseRuntimeError, match="expected float64"):
        kernel([x, x, x.astype(np.float32)])
    with pytest.raises(FuseRuntimeError, match="expected rank 1"):
        kernel([x, x, np.ones((2, 2))])
    with pytest.raises(FuseRuntimeError, match="expected 3 input arrays"):
        kernel([x, x])
    strided = np.arange(8.0)[::2]
    (out,) = kernel([strided, x, x])  # non-contiguous input is copied
    np.testing.assert_allclose(out, np.exp(strided) + 1)


def test_constant_slot_and_result_aliasing_an_input() -> None:
    t = memref(F64, 1)

    def body() -> None:
        c = loop.ArgOp(0, "c", t).result
        x = loop.ArgOp(1, "x", t).result
        out = loop.AllocOp([loop.DimOp(x, 0).result], t).result
        for_(
            loop.DimOp(x, 0).result,
            [],
            lambda i, _: (
                loop.StoreOp(arith.AddfOp(loop.LoadOp(c, [i]).result, loop.LoadOp(x, [i]).result).result, out, [i]),
                [],
            )[1],
        )
        loop.ResultOp(out, 0, "sum")
        loop.ResultOp(x, 1, "x_again")

    module = build(body, [("c", "constant"), ("x", "input")], ["sum", "x_again"])
    kernel = NativeKernel(module, constants={"c": np.array([1.0, 2.0, 3.0])})
    x = np.array([10.0, 20.0, 30.0])
    total, again = kernel([x])
    np.testing.assert_array_equal(total, [11.0, 22.0, 33.0])
    np.testing.assert_array_equal(again, x)
    assert not np.shares_memory(again, x)  # a result never aliases the caller's array


def test_lowered_module_prints_and_verifies() -> None:
    m = row_reduce_module(F64, "sum")
    lower_module(m)
    m.verify()
    assert "llvm.func @fuse_main" in str(m)


_DETERMINISM_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    sys.path.insert(0, {root!r})
    from test_llvm_backend import row_reduce_module, elementwise_module, gemm_module, topk_module
    from fuse_mlir.backends.llvm.emit import emit_llvm_ir
    from fuse_mlir.passes.conversions.lower_loop_to_llvm import lower_module
    from xdsl.dialects.builtin import Float32Type, Float64Type, IntegerType
    from xdsl.dialects.utils.fast_math import FastMathFlag
    from xdsl.dialects import llvm
    out = []
    for m in (row_reduce_module(Float64Type(), "sum"), row_reduce_module(IntegerType(8), "any"),
              elementwise_module(Float32Type(), 2), gemm_module(Float64Type(), True, False, True), topk_module()):
        lower_module(m)
        for op in m.walk():  # several fast-math flags at once: their order must not depend on hashing
            if isinstance(op, llvm.FAddOp):
                op.properties["fastmathFlags"] = llvm.FastMathAttr([FastMathFlag.NO_NANS, FastMathFlag.REASSOC, FastMathFlag.ALLOW_CONTRACT])
        out.append(emit_llvm_ir(m))
    sys.stdout.write("\\n".join(out))
    """
)


def test_ir_text_is_deterministic_across_processes() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    script = _DETERMINISM_SCRIPT.format(tests=here, root=os.path.dirname(here))
    texts = []
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        texts.append(proc.stdout)
    assert texts[0] and texts[0] == texts[1] == texts[2]
    assert "fadd reassoc nnan contract double" in texts[0]


def test_compile_time_is_reported() -> None:
    kernel = NativeKernel(row_reduce_module(F64, "sum"))
    ms = {k: round(v * 1e3, 2) for k, v in kernel.timings.items()}
    print(f"\nrow-sum kernel compile: {kernel.compile_seconds * 1e3:.1f} ms {ms}")
    kernel = NativeKernel(elementwise_module(F64, 2))
    ms = {k: round(v * 1e3, 2) for k, v in kernel.timings.items()}
    print(f"2-d exp(x)*y+z kernel compile: {kernel.compile_seconds * 1e3:.1f} ms {ms}")
    assert kernel.compile_seconds > 0


# --------------------------------------------------------------------------- scalar ops


def map_module(
    in_elems: Sequence[Attribute], out_elem: Attribute, fn: Callable[[list[SSAValue]], SSAValue]
) -> ModuleOp:
    """out[i] = fn(a[i], b[i], ...) over vectors."""

    def body() -> None:
        ins = [loop.ArgOp(k, f"a{k}", memref(e, 1)).result for k, e in enumerate(in_elems)]
        n = loop.DimOp(ins[0], 0).result
        out = loop.AllocOp([n], memref(out_elem, 1)).result

        def step(i: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            loop.StoreOp(fn([loop.LoadOp(a, [i]).result for a in ins]), out, [i])
            return []

        for_(n, [], step)
        loop.ResultOp(out, 0, "out")

    return build(body, [(f"a{k}", "input") for k in range(len(in_elems))], ["out"])


def _erf(x: np.ndarray) -> np.ndarray:
    import math as pymath

    return np.vectorize(pymath.erf, otypes=[x.dtype])(x)


UNARY = [
    ("exp", lambda v: math.ExpOp(v[0]).result, np.exp),
    ("log", lambda v: math.LogOp(v[0]).result, np.log),
    ("sqrt", lambda v: math.SqrtOp(v[0]).result, np.sqrt),
    ("tanh", lambda v: math.TanhOp(v[0]).result, np.tanh),
    ("sin", lambda v: math.SinOp(v[0]).result, np.sin),
    ("cos", lambda v: math.CosOp(v[0]).result, np.cos),
    ("absf", lambda v: math.AbsFOp(v[0]).result, np.abs),
    ("floor", lambda v: math.FloorOp(v[0]).result, np.floor),
    ("rsqrt", lambda v: math.RsqrtOp(v[0]).result, lambda x: 1 / np.sqrt(x)),
    ("erf", lambda v: math.ErfOp(v[0]).result, _erf),
    ("log1p", lambda v: math.Log1pOp(v[0]).result, np.log1p),
    ("negf", lambda v: arith.NegfOp(v[0]).result, np.negative),
]
BINARY = [
    ("powf", lambda v: math.PowFOp(v[0], v[1]).result, np.power),
    ("maximumf", lambda v: arith.MaximumfOp(v[0], v[1]).result, np.maximum),
    ("minimumf", lambda v: arith.MinimumfOp(v[0], v[1]).result, np.minimum),
    ("divf", lambda v: arith.DivfOp(v[0], v[1]).result, np.divide),
    ("subf", lambda v: arith.SubfOp(v[0], v[1]).result, np.subtract),
    ("copysign", lambda v: math.CopySignOp(v[0], v[1]).result, np.copysign),
    ("select_gt", lambda v: arith.SelectOp(arith.CmpfOp(v[0], v[1], "ogt").result, v[0], v[1]).result, np.fmax),
]


@pytest.mark.parametrize("elem,dtype", [(F64, np.float64), (F32, np.float32)])
@pytest.mark.parametrize("name,build_fn,np_fn", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float_ops(elem: Attribute, dtype: type, name: str, build_fn: Callable, np_fn: Callable) -> None:
    kernel = NativeKernel(map_module([elem], elem, build_fn))
    x = RNG.uniform(0.1, 3.0, 257).astype(dtype)
    (out,) = kernel([x])
    tol = 2e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(out, np_fn(x), rtol=tol, atol=tol)


@pytest.mark.parametrize("elem,dtype", [(F64, np.float64), (F32, np.float32)])
@pytest.mark.parametrize("name,build_fn,np_fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_float_ops(elem: Attribute, dtype: type, name: str, build_fn: Callable, np_fn: Callable) -> None:
    kernel = NativeKernel(map_module([elem, elem], elem, build_fn))
    x = RNG.uniform(0.1, 3.0, 131).astype(dtype)
    y = RNG.uniform(-2.0, 2.0, 131).astype(dtype)
    if name in ("maximumf", "minimumf"):
        x[5] = np.nan
    (out,) = kernel([x, y])
    tol = 2e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(out, np_fn(x, y), rtol=tol, atol=tol)


def test_fma() -> None:
    kernel = NativeKernel(map_module([F64] * 3, F64, lambda v: math.FmaOp(v[0], v[1], v[2]).result))
    x, y, z = (RNG.standard_normal(50) for _ in range(3))
    (out,) = kernel([x, y, z])
    np.testing.assert_allclose(out, x * y + z, rtol=1e-13, atol=1e-15)


I32 = IntegerType(32)
INT_OPS = [
    ("floordivsi", lambda v: arith.FloorDivSIOp(v[0], v[1]).result, np.floor_divide),
    ("ceildivsi", lambda v: arith.CeilDivSIOp(v[0], v[1]).result, lambda a, b: -np.floor_divide(-a, b)),
    ("divsi", lambda v: arith.DivSIOp(v[0], v[1]).result, lambda a, b: np.trunc(a / b).astype(a.dtype)),
    ("remsi", lambda v: arith.RemSIOp(v[0], v[1]).result, np.fmod),
    ("maxsi", lambda v: arith.MaxSIOp(v[0], v[1]).result, np.maximum),
    ("minsi", lambda v: arith.MinSIOp(v[0], v[1]).result, np.minimum),
    ("shrsi", lambda v: arith.ShRSIOp(v[0], arith.AndIOp(v[1], _c31()).result).result, lambda a, b: a >> (b & 31)),
    ("xori", lambda v: arith.XOrIOp(v[0], v[1]).result, np.bitwise_xor),
]


def _c31() -> SSAValue:
    return arith.ConstantOp(IntegerAttr(31, I32)).result


@pytest.mark.parametrize("name,build_fn,np_fn", INT_OPS, ids=[o[0] for o in INT_OPS])
def test_integer_ops(name: str, build_fn: Callable, np_fn: Callable) -> None:
    kernel = NativeKernel(map_module([I32, I32], I32, build_fn))
    a = RNG.integers(-50, 50, 200).astype(np.int32)
    b = RNG.integers(1, 7, 200).astype(np.int32) * RNG.choice([-1, 1], 200).astype(np.int32)
    (out,) = kernel([a, b])
    np.testing.assert_array_equal(out, np_fn(a, b))


def _casts(v: list[SSAValue]) -> SSAValue:
    """trunc(x) (via i32 and f32) + zero-extended u (an i8 holding 0..255)."""
    as_int = arith.FPToSIOp(v[0], I32).result  # truncates toward zero
    back = arith.SIToFPOp(as_int, F32).result
    wide = arith.ExtFOp(back, F64).result
    return arith.AddfOp(wide, arith.UIToFPOp(arith.ExtUIOp(v[1], I64).result, F64).result).result


def test_casts() -> None:
    fn = _casts
    kernel = NativeKernel(map_module([F64, I8], F64, fn))
    x = np.array([-2.7, -0.5, 0.0, 1.9, 1e6])
    u = np.array([255, 0, 1, 128, 7], dtype=np.uint8).view(np.int8)
    (out,) = kernel([x, u])
    np.testing.assert_array_equal(out, np.trunc(x) + u.view(np.uint8))


def test_lowered_text_round_trips() -> None:
    from xdsl.parser import Parser

    from fuse_mlir.dialects.llvmx import LLVMX
    from fuse_mlir.ir import make_context

    for m in (gemm_module(F32, True, True, True), topk_module(), gather_module(), map_module([F64, I8], F64, _casts)):
        lower_module(m)
        ctx = make_context()
        if ctx.get_optional_op("llvm.fptosi") is None:
            ctx.load_dialect(LLVMX)
        again = Parser(ctx, str(m)).parse_module()
        again.verify()
        assert emit_llvm_ir(again) == emit_llvm_ir(m)
