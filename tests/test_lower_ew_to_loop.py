"""lower-ew-to-loop: hand-built ew modules, lowered, round-tripped through text, run by loop_interp against NumPy."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.abi import ErrorEntry, LoopAbi
from fuse_mlir.interp import numpy_builtins as nb
from fuse_mlir.interp.loop_interp import LoopInterpreter, run_loop_module
from fuse_mlir.ir import make_context, parse_mlir, print_module
from fuse_mlir.passes.conversions.lower_ew_to_loop import TRANSPOSE_TILE, LowerEwToLoop, gemm_plan, transpose_tile_dim

D = te.DYNAMIC


# --------------------------------------------------------------------------
# Building ew modules by hand
# --------------------------------------------------------------------------


class B:
    """Appends scalar ops to a generic body."""

    def __init__(self, block: Block):
        self.block = block

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def f(self, value: float, dtype: str = "float64") -> SSAValue:
        return self.add(arith.ConstantOp(FloatAttr(value, te.element_type(dtype))))  # type: ignore[arg-type]

    def i(self, value: int, width: int = 64) -> SSAValue:
        return self.add(arith.ConstantOp(IntegerAttr(value, IntegerType(width))))


BodyFn = Callable[[B, list[SSAValue], list[SSAValue], Callable[[int], SSAValue]], SSAValue]


class M:
    """Collects the ops of an ew-level module."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self._dims: dict[tuple[SSAValue, int], SSAValue] = {}

    def add(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op

    def input(self, name: str, rank: int, dtype: str = "float64") -> SSAValue:
        return self.add(te.InputOp(name, [f"a{k}" for k in range(rank)], te.tensor_type(dtype, [D] * rank))).results[0]

    def constant(self, arr: np.ndarray) -> SSAValue:
        return self.add(te.ConstantOp(arr, [f"a{k}" for k in range(np.ndim(arr))])).results[0]

    def dim(self, v: SSAValue, axis: int) -> SSAValue:
        key = (v, axis)
        if key not in self._dims:
            self._dims[key] = self.add(te.DimOp(v, axis)).results[0]
        return self._dims[key]

    def index(self, n: int) -> SSAValue:
        return self.add(arith.ConstantOp(IntegerAttr(n, IndexType()))).results[0]

    def generic(
        self,
        inputs: Sequence[SSAValue],
        maps: Sequence[Sequence[int]],
        iterators: Sequence[str],
        kind: str,
        extents: Sequence[SSAValue],
        dtype: str,
        body: BodyFn,
        tables: Sequence[SSAValue] = (),
    ) -> SSAValue:
        region, block = ew.GenericOp.make_body(list(inputs), list(tables))
        n = len(inputs)

        def idx(d: int) -> SSAValue:
            return b.add(ew.IndexOp(d))

        b = B(block)
        out = body(b, list(block.args[:n]), list(block.args[n:]), idx)
        block.add_op(ew.YieldOp(out))
        rank = sum(it == "parallel" for it in iterators)
        op = ew.GenericOp(
            list(inputs), list(tables), list(extents), maps, iterators, kind, region, te.tensor_type(dtype, [D] * rank)
        )
        return self.add(op).results[0]

    def contract(
        self, a: SSAValue, b: SSAValue, extents: Sequence[SSAValue], maps: Sequence[Sequence[int]], out: Sequence[int]
    ) -> SSAValue:
        dtype = te.dtype_of(a)
        op = ew.ContractOp(a, b, list(extents), maps, out, te.tensor_type(dtype, [D] * len(out)))
        return self.add(op).results[0]

    def export(self, values: Sequence[SSAValue], names: Sequence[str]) -> None:
        self.add(te.ExportOp(list(values), list(names)))

    def module(self) -> ModuleOp:
        m = ModuleOp(self.ops)
        m.verify()
        return m


def lower(m: M) -> ModuleOp:
    """Lower, verify, and round-trip the loop module through text (the reparsed module is what runs)."""
    module = m.module()
    LowerEwToLoop().apply(make_context(), module)
    module.verify()
    text = print_module(module)
    again = parse_mlir(text, "loop.mlir")
    assert print_module(again) == text
    return again


def run(module: ModuleOp, **inputs: np.ndarray) -> dict[str, np.ndarray]:
    return run_loop_module(module, inputs).exports


def ops_of(module: ModuleOp, cls: type) -> list:
    return [op for op in module.walk() if isinstance(op, cls)]


def first(args: list[SSAValue]) -> SSAValue:
    return args[0]


RNG = np.random.default_rng(0)


# --------------------------------------------------------------------------
# Elementwise maps
# --------------------------------------------------------------------------


def test_map_with_broadcast_and_permuted_maps():
    m = M()
    x = m.input("x", 2)  # x[j, i]
    y = m.input("y", 1)  # y[j]
    i, j = m.dim(x, 1), m.dim(x, 0)

    def body(b, a, t, idx):
        return b.add(arith.AddfOp(b.add(arith.MulfOp(a[0], a[1])), b.f(1.0)))

    z = m.generic([x, y], [[1, 0], [1]], ["parallel", "parallel"], "none", [i, j], "float64", body)
    m.export([z], ["z"])
    mod = lower(m)
    xv, yv = RNG.normal(size=(3, 4)), RNG.normal(size=3)
    np.testing.assert_array_equal(run(mod, x=xv, y=yv)["z"], xv.T * yv[None, :] + 1)
    fors = ops_of(mod, loop.ForOp)
    # x is read transposed: two loops over tiles, two within a tile (test_transposing_nests_run_in_tiles)
    assert len(fors) == 4 and all(f.parallel is not None for f in fors)
    assert not ops_of(mod, loop.CheckOp)


@pytest.mark.parametrize(
    "maps,res,want",
    [
        ([[1, 0]], [0, 1], 0),  # Y[i, j] = X[j, i]
        ([[0, 1]], [0, 1], None),  # same order: contiguous already
        ([[0]], [0, 1], None),  # a broadcast row: read once either way
        ([[1, 0], [0, 1]], [0, 1], 0),  # X + Y^T: the transposed input decides
        ([[2, 0, 1]], [0, 1, 2], 1),  # a permuting copy before a batched GEMM
        ([[0, 1]], [0], None),  # one result dim
        ([[1], [0, 2, 1]], [0, 1, 2], 1),  # the largest input decides
    ],
)
def test_transpose_tile_dim(maps, res, want):
    assert transpose_tile_dim(maps, res) == want


def _permuted_copy(perm: Sequence[int], shape: Sequence[int]) -> tuple[ModuleOp, np.ndarray, np.ndarray]:
    """``Y[d0, d1, ...] = X[d_perm...]`` lowered, with a random X of ``shape`` (X's axes in perm order)."""
    m = M()
    x = m.input("x", len(shape))
    extents = [None] * len(shape)
    for axis, d in enumerate(perm):
        extents[d] = m.dim(x, axis)
    z = m.generic([x], [list(perm)], ["parallel"] * len(shape), "none", extents, "float64", lambda b, a, t, i: a[0])
    m.export([z], ["z"])
    xv = RNG.normal(size=shape)
    want = np.transpose(xv, np.argsort(perm))
    return lower(m), xv, want


@pytest.mark.parametrize("perm", [p for p in itertools.permutations(range(3)) if p != (0, 1, 2)])
@pytest.mark.parametrize("shape", [(9, 17, 8), (1, 3, 33), (8, 8, 8), (0, 5, 7), (16, 1, 2)])
def test_transposing_nests_run_in_tiles(perm, shape):
    """Every permutation of a 3-d copy, with extents below, at, above and not a multiple of the tile (and 0):
    the nest whose largest input is contiguous along another dim than the result's runs in tiles (loops over
    [s, s + min(T, n - s))), in the loop interpreter with the same values as NumPy."""
    mod, xv, want = _permuted_copy(perm, shape)
    np.testing.assert_array_equal(run(mod, x=xv)["z"], want)
    fors = ops_of(mod, loop.ForOp)
    tiled = transpose_tile_dim([list(perm)], [0, 1, 2]) is not None
    assert tiled == (perm[-1] != 2)
    assert len(fors) == (5 if tiled else 3) and all(f.parallel is not None for f in fors)
    if tiled:
        within = [f for f in fors if isinstance(f.upper.owner, arith.AddiOp)]
        assert len(within) == 2
        for f in within:
            assert f.lower in f.upper.owner.operands
            low = f.upper.owner.rhs if f.upper.owner.lhs is f.lower else f.upper.owner.lhs
            assert isinstance(low.owner, arith.MinSIOp)
            assert any(
                isinstance(v.owner, arith.ConstantOp) and v.owner.value.value.data == TRANSPOSE_TILE
                for v in low.owner.operands
            )


@pytest.mark.parametrize("backend", ["llvm", "numba"])
@pytest.mark.parametrize("threads", [1, 2])
def test_transposes_run_tiled_on_native_backends(backend, threads):
    """Transposes and a sum with a transposed operand, float64 and float32, on the native backends with one
    and two threads (every nest split: parallel_min=0): the same values as NumPy."""
    import importlib.util

    from fuse_mlir import Program

    if backend == "numba" and importlib.util.find_spec("numba") is None:
        pytest.skip("numba not installed")
    opts = {"threads": threads, "parallel_min": 0} if backend == "llvm" else {}
    rng = np.random.default_rng(5)
    for dtype in (np.float64, np.float32):
        x = rng.normal(size=(37, 70)).astype(dtype)
        y = rng.normal(size=(70, 37)).astype(dtype)
        a = rng.normal(size=(5, 19, 12)).astype(dtype)
        prog = Program("T[j, i] = X[i, j]\nS[i, j] = X[i, j] + Y[j, i]\nP[b, i, j] = A[i, j, b]\nexport T, S, P")
        got = prog.compile(backend, **opts)(X=x, Y=y, A=a)
        np.testing.assert_array_equal(got["T"], x.T)
        np.testing.assert_array_equal(got["S"], x + y.T)
        np.testing.assert_array_equal(got["P"], a.transpose(2, 0, 1))


def test_a_tiled_transpose_splits_over_threads_and_streams_its_stores():
    """``streaming-stores`` still marks the tiled nest's store (its position is the innermost loop's index),
    and the llvm lowering's work estimate counts a tile loop's trip: a 300 x 300 transpose (90,000 elements,
    above the default split threshold of 65,536) starts the pool's worker. Counting only the loops over
    tiles (38 x 38) it would run serially. In a fresh interpreter, so no earlier test started the worker."""
    from fuse_mlir import Program
    from fuse_mlir.passes.lowering import lower_to_loop
    from tests.fresh import fresh_python

    module = lower_to_loop(Program("T[j, i] = X[i, j]\nexport T").lower({"X": np.float64}).module)
    stores = ops_of(module, loop.StoreOp)
    assert len(stores) == 1 and "nontemporal" in stores[0].attributes
    code = (
        "import numpy as np\n"
        "from fuse_mlir import Program\n"
        "from fuse_mlir.backends.llvm.parallel import pool_workers\n"
        "run = Program('T[j, i] = X[i, j]\\nexport T').compile('llvm', threads=2)\n"
        "x = np.arange(300 * 300.0).reshape(300, 300)\n"
        "assert (run(X=x)['T'] == x.T).all()\n"
        "print(pool_workers())\n"
    )
    assert fresh_python(code, unset=("FUSE_PARALLEL_MIN",)).split()[-1] == "1"


def test_constants_are_argument_slots_with_their_values():
    m = M()
    x = m.input("x", 1)
    c = m.constant(np.array([1.0, np.inf, np.nan]))
    s = m.constant(np.array(2.5))
    z = m.generic(
        [x, c, s],
        [[0], [0], []],
        ["parallel"],
        "none",
        [m.dim(x, 0)],
        "float64",
        lambda b, a, t, idx: b.add(arith.MulfOp(b.add(arith.AddfOp(a[0], a[1])), a[2])),
    )
    m.export([z], ["z"])
    mod = lower(m)
    assert [(e.name, e.kind) for e in LoopAbi.read(mod).args or []] == [
        ("x", "input"),
        ("const0", "constant"),
        ("const1", "constant"),
    ]
    abi_args = LoopAbi.read(mod).args or []
    np.testing.assert_array_equal(abi_args[1].value(), [1.0, np.inf, np.nan])
    assert abi_args[2].value() == 2.5
    slots = {op.tensor_name.data: op.slot.value.data for op in ops_of(mod, loop.ArgOp)}
    assert slots == {"x": 0, "const0": 1, "const1": 2}
    np.testing.assert_array_equal(run(mod, x=np.array([1.0, 2.0, 3.0]))["z"], [5.0, np.inf, np.nan])


def test_rank0_map():
    m = M()
    x, y = m.input("x", 0), m.input("y", 0)
    z = m.generic([x, y], [[], []], [], "none", [], "float64", lambda b, a, t, idx: b.add(arith.SubfOp(a[0], a[1])))
    m.export([z], ["z"])
    mod = lower(m)
    assert not ops_of(mod, loop.ForOp)
    out = run(mod, x=np.array(3.0), y=np.array(0.5))["z"]
    assert out.shape == () and out == 2.5


def test_index_use():
    m = M()
    x = m.input("x", 2)

    def body(b, a, t, idx):
        i = b.add(arith.IndexCastOp(idx(0), IntegerType(64)))
        j = b.add(arith.IndexCastOp(idx(1), IntegerType(64)))
        v = b.add(arith.AddiOp(b.add(arith.MuliOp(i, b.i(10))), j))
        return b.add(arith.AddfOp(a[0], b.add(arith.SIToFPOp(v, te.element_type("float64")))))

    z = m.generic([x], [[0, 1]], ["parallel"] * 2, "none", [m.dim(x, 0), m.dim(x, 1)], "float64", body)
    m.export([z], ["z"])
    xv = RNG.normal(size=(3, 5))
    ii, jj = np.indices((3, 5))
    np.testing.assert_array_equal(run(lower(m), x=xv)["z"], xv + 10 * ii + jj)


def test_index_only_body_without_inputs():
    m = M()
    n = m.index(4)

    def body(b, a, t, idx):
        return b.add(arith.IndexCastOp(idx(0), IntegerType(64)))

    z = m.generic([], [], ["parallel"], "none", [n], "int64", body)
    m.export([z], ["z"])
    np.testing.assert_array_equal(run(lower(m))["z"], np.arange(4))


def test_booleans_live_in_i8_buffers():
    m = M()
    x = m.input("x", 1)
    flag = m.input("flag", 1, "bool")
    n = m.dim(x, 0)

    def body(b, a, t, idx):
        pos = b.add(arith.CmpfOp(a[0], b.f(0.0), "ogt"))
        return b.add(arith.XOrIOp(pos, a[1]))

    z = m.generic([x, flag], [[0], [0]], ["parallel"], "none", [n], "bool", body)
    m.export([z], ["z"])
    mod = lower(m)
    assert all(
        op.result.type.element_type == IntegerType(8) for op in ops_of(mod, loop.ArgOp) if op.slot.value.data == 1
    )
    xv = np.array([-1.0, 2.0, 3.0, -4.0])
    fv = np.array([True, True, False, False])
    out = run(mod, x=xv, flag=fv)["z"]
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, ((xv > 0) ^ fv).astype(np.int8))


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------

NP_REDUCE = {
    "sum": np.sum,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "any": lambda a, axis: np.any(a != 0, axis=axis).astype(np.int8),
}


def reduction_module(kind: str, dtype: str, red_axes: tuple[int, ...], rank: int = 2) -> ModuleOp:
    m = M()
    x = m.input("x", rank, dtype)
    its = ["reduction" if d in red_axes else "parallel" for d in range(rank)]
    out_dtype = "int8" if kind == "any" else dtype
    z = m.generic(
        [x], [list(range(rank))], its, kind, [m.dim(x, d) for d in range(rank)], out_dtype, lambda b, a, t, i: a[0]
    )
    m.export([z], ["z"])
    return lower(m)


def sample(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype.startswith("float"):
        return RNG.normal(size=shape).astype(dtype)
    if dtype == "int8":
        return RNG.integers(-1, 2, size=shape).astype(dtype) * RNG.integers(0, 2, size=shape).astype(dtype)
    return RNG.integers(-5, 6, size=shape).astype(dtype)


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min", "any"])
@pytest.mark.parametrize("red_axes", [(1,), (0,), (0, 1)], ids=["inner", "outer", "all"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int8"])
def test_reductions(kind, red_axes, dtype):
    if kind == "any" and dtype != "int8":
        pytest.skip("`any` reduces booleans (i8); see test_any_of_float_body")
    mod = reduction_module(kind, dtype, red_axes)
    for shape in [(3, 4), (1, 5), (4, 0), (0, 3)]:
        xv = sample(dtype, shape)
        got = run(mod, x=xv)["z"]
        out_shape = tuple(n for d, n in enumerate(shape) if d not in red_axes)
        if 0 not in [xv.shape[a] for a in red_axes]:
            want = NP_REDUCE[kind](xv, axis=red_axes)
        else:
            # an empty reduction gives the identity (NumPy raises for max/min)
            empty = {"sum": 0, "prod": 1, "any": 0}
            if kind in empty:
                want = np.full(out_shape, empty[kind])
            elif dtype.startswith("float"):
                want = np.full(out_shape, -np.inf if kind == "max" else np.inf)
            else:
                info = np.iinfo(dtype)
                want = np.full(out_shape, info.min if kind == "max" else info.max)
        assert got.shape == np.shape(want)
        assert got.dtype == (np.int8 if kind == "any" else np.dtype(dtype))
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_reduction_loop_orders():
    """Inner reduction: accumulator in iter_args. Outer reduction: the result's contiguous dim runs innermost."""
    inner = reduction_module("sum", "float64", (1,))
    fors = ops_of(inner, loop.ForOp)
    assert [f.parallel is not None for f in fors] == [True, False]
    assert len(fors[1].inits) == 1 and fors[1].parent_op() is fors[0]

    outer = reduction_module("sum", "float64", (0,))
    fors = ops_of(outer, loop.ForOp)
    # fill loop, then for i (reduction) { for j (parallel) }
    assert [(f.parallel is not None, len(f.inits)) for f in fors] == [(True, 0), (False, 0), (True, 0)]
    assert fors[2].parent_op() is fors[1]

    # sum over the middle axis of x[a, b, c]: order a, b, c with c innermost
    mid = reduction_module("sum", "float64", (1,), rank=3)
    fors = ops_of(mid, loop.ForOp)
    assert [(f.parallel is not None, len(f.inits)) for f in fors] == [(True, 0), (True, 0), (False, 0), (True, 0)]
    xv = RNG.normal(size=(2, 3, 4))
    np.testing.assert_allclose(run(mid, x=xv)["z"], xv.sum(axis=1))


def test_max_min_propagate_nan():
    for kind, fn in [("max", np.max), ("min", np.min)]:
        mod = reduction_module(kind, "float64", (1,))
        xv = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]])
        np.testing.assert_array_equal(run(mod, x=xv)["z"], fn(xv, axis=1))
        mod = reduction_module(kind, "float64", (0,))
        np.testing.assert_array_equal(run(mod, x=xv)["z"], fn(xv, axis=0))


def test_any_of_float_body():
    m = M()
    x = m.input("x", 2)

    def body(b, a, t, idx):
        gt = b.add(arith.CmpfOp(a[0], b.f(0.5), "ogt"))
        return b.add(arith.ExtUIOp(gt, IntegerType(8)))

    z = m.generic([x], [[0, 1]], ["parallel", "reduction"], "any", [m.dim(x, 0), m.dim(x, 1)], "int8", body)
    m.export([z], ["z"])
    xv = np.array([[0.1, 0.7], [0.2, 0.3], [np.nan, 0.0]])
    np.testing.assert_array_equal(run(lower(m), x=xv)["z"], [1, 0, 0])


def test_fused_map_reduce_with_two_inputs():
    """sum_j exp(x[i,j]) * y[j] — a body with math ops and a broadcast input."""
    m = M()
    x, y = m.input("x", 2), m.input("y", 1)

    def body(b, a, t, idx):
        return b.add(arith.MulfOp(b.add(math.ExpOp(a[0])), a[1]))

    z = m.generic([x, y], [[0, 1], [1]], ["parallel", "reduction"], "sum", [m.dim(x, 0), m.dim(x, 1)], "float64", body)
    m.export([z], ["z"])
    xv, yv = RNG.normal(size=(3, 4)), RNG.normal(size=4)
    np.testing.assert_allclose(run(lower(m), x=xv, y=yv)["z"], (np.exp(xv) * yv).sum(1), rtol=1e-12)


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def gather_module(check: bool) -> ModuleOp:
    m = M()
    tab = m.input("t", 2)
    idx = m.input("idx", 1, "int64")
    n = m.dim(idx, 0)
    cols = m.dim(tab, 1)

    def body(b, a, t, ix):
        p = b.add(arith.IndexCastOp(a[0], IndexType()))
        msg = "position {0} is out of range for extent {1}" if check else ""
        return b.add(ew.ExtractOp(t[0], [p, ix(1)], check=msg, loc="prog.fuse:3:7:5" if check else ""))

    z = m.generic([idx], [[0]], ["parallel", "parallel"], "none", [n, cols], "float64", body, tables=[tab])
    m.export([z], ["z"])
    return lower(m)


def test_table_gather_with_check():
    mod = gather_module(check=True)
    assert LoopAbi.read(mod).errors[0].message == "position {0} is out of range for extent {1}"
    assert len(ops_of(mod, loop.CheckOp)) == 2
    tv = RNG.normal(size=(4, 3))
    iv = np.array([3, 0, 0, 2])
    np.testing.assert_array_equal(run(mod, t=tv, idx=iv)["z"], tv[iv])
    for bad in (4, -1):
        with pytest.raises(FuseRuntimeError) as err:
            run(mod, t=tv, idx=np.array([0, bad]))
        assert err.value.message == f"position {bad} is out of range for extent 4"
        assert err.value.loc == Loc("prog.fuse", 3, 7, 5)


def test_table_gather_without_check():
    mod = gather_module(check=False)
    assert not ops_of(mod, loop.CheckOp)
    tv = RNG.normal(size=(4, 3))
    np.testing.assert_array_equal(run(mod, t=tv, idx=np.array([1, 1, 3]))["z"], tv[[1, 1, 3]])


def test_gather_sum():
    """sum_i x[idx[i]] without materialising x[idx]."""
    m = M()
    tab, idx = m.input("x", 1), m.input("idx", 1, "int64")

    def body(b, a, t, ix):
        p = b.add(arith.IndexCastOp(a[0], IndexType()))
        return b.add(ew.ExtractOp(t[0], [p], check="bad {0} for {1}"))

    z = m.generic([idx], [[0]], ["reduction"], "sum", [m.dim(idx, 0)], "float64", body, tables=[tab])
    m.export([z], ["z"])
    mod = lower(m)
    assert LoopAbi.read(mod).errors[0].loc == ""
    xv, iv = RNG.normal(size=5), np.array([4, 4, 0, 1])
    np.testing.assert_allclose(run(mod, x=xv, idx=iv)["z"], xv[iv].sum())
    with pytest.raises(FuseRuntimeError, match="bad 5 for 5") as err:
        run(mod, x=xv, idx=np.array([5]))
    assert err.value.loc is None


@pytest.mark.parametrize("check", [False, True])
def test_column_gather_sum_keeps_plain_order_when_checked(check):
    """z[j] = sum_i t[idx[i, j]]: reordered (reduction outside j) unless the read is checked."""
    m = M()
    tab, idx = m.input("t", 1), m.input("idx", 2, "int64")

    def body(b, a, t, ix):
        p = b.add(arith.IndexCastOp(a[0], IndexType()))
        return b.add(ew.ExtractOp(t[0], [p], check="bad {0} for {1}" if check else ""))

    z = m.generic(
        [idx], [[1, 0]], ["parallel", "reduction"], "sum", [m.dim(idx, 1), m.dim(idx, 0)], "float64", body, [tab]
    )
    m.export([z], ["z"])
    mod = lower(m)
    carried = [len(f.inits) for f in ops_of(mod, loop.ForOp)]
    assert carried == ([0, 1] if check else [0, 0, 0])
    tv, iv = RNG.normal(size=4), np.array([[0, 3, 1], [2, 2, 0]])
    np.testing.assert_allclose(run(mod, t=tv, idx=iv)["z"], tv[iv].sum(0))
    if check:
        with pytest.raises(FuseRuntimeError, match="bad 8 for 4"):
            run(mod, t=tv, idx=np.array([[0, 7, 9], [8, 0, 0]]))


# --------------------------------------------------------------------------
# Contractions
# --------------------------------------------------------------------------


def contract_module(shapes_maps: list[tuple[int, list[int]]], out: list[int], ndims: int) -> ModuleOp:
    """Operands given by (rank, map); extents taken from the operands' dims."""
    m = M()
    vals = [m.input(n, rank) for n, (rank, _) in zip("ab", shapes_maps)]
    ext: dict[int, SSAValue] = {}
    for v, (_, mp) in zip(vals, shapes_maps):
        for axis, d in enumerate(mp):
            ext.setdefault(d, m.dim(v, axis))
    z = m.contract(vals[0], vals[1], [ext[d] for d in range(ndims)], [shapes_maps[0][1], shapes_maps[1][1]], out)
    m.export([z], ["z"])
    return lower(m)


def einsum_spec(maps: list[list[int]], out: list[int]) -> str:
    letters = "ijklmnop"
    return ",".join("".join(letters[d] for d in mp) for mp in maps) + "->" + "".join(letters[d] for d in out)


GEMM_CASES = [
    # name, maps, out, ndims, shape per dim, (trans_a, trans_b, broadcast_a, broadcast_b)
    ("plain", [[0, 2], [2, 1]], [0, 1], 3, (3, 4, 5), (False, False, False, False)),
    ("trans_a", [[2, 0], [2, 1]], [0, 1], 3, (3, 4, 5), (True, False, False, False)),
    ("trans_b", [[0, 2], [1, 2]], [0, 1], 3, (3, 4, 5), (False, True, False, False)),
    ("trans_both", [[2, 0], [1, 2]], [0, 1], 3, (3, 4, 5), (True, True, False, False)),
    ("swapped", [[0, 2], [2, 1]], [1, 0], 3, (3, 4, 5), (True, True, False, False)),
    ("batched", [[0, 1, 3], [0, 3, 2]], [0, 1, 2], 4, (2, 3, 4, 5), (False, False, False, False)),
    ("broadcast_a", [[1, 3], [0, 3, 2]], [0, 1, 2], 4, (2, 3, 4, 5), (False, False, True, False)),
    ("broadcast_b", [[0, 3, 1], [3, 2]], [0, 1, 2], 4, (2, 3, 4, 5), (True, False, False, True)),
    # lhs's batch dim leads lhs and the result: merged into m (one GEMM, no batch)
    ("batch_merged_into_m", [[0, 1, 3], [2, 3]], [0, 1, 2], 4, (2, 3, 4, 5), (False, True, False, False)),
    ("merged_k", [[0, 1, 2], [1, 2, 3]], [0, 3], 4, (3, 4, 2, 5), (False, False, False, False)),
    ("matvec", [[0, 1], [1]], [0], 2, (3, 4), (False, False, False, False)),
    ("vecmat", [[1], [1, 0]], [0], 2, (3, 4), (False, False, False, False)),
    ("dot", [[0], [0]], [], 1, (4,), (False, False, False, False)),
    ("outer", [[0], [1]], [0, 1], 2, (3, 4), (False, False, False, False)),
]


@pytest.mark.parametrize("name,maps,out,ndims,sizes,flags", GEMM_CASES, ids=[c[0] for c in GEMM_CASES])
def test_contract_to_gemm(name, maps, out, ndims, sizes, flags):
    mod = contract_module([(len(mp), mp) for mp in maps], out, ndims)
    gemms = ops_of(mod, loop.GemmOp)
    assert len(gemms) == 1
    g = gemms[0]
    got_flags = tuple(bool(a.value.data) for a in (g.trans_a, g.trans_b, g.broadcast_a, g.broadcast_b))
    assert got_flags == flags, got_flags
    spec = einsum_spec(maps, out)
    for scale in (1, 0):
        dims = [s if scale else (0 if d == ndims - 1 else s) for d, s in enumerate(sizes)]
        a = RNG.normal(size=[dims[d] for d in maps[0]])
        b = RNG.normal(size=[dims[d] for d in maps[1]])
        got = run(mod, a=a, b=b)["z"]
        np.testing.assert_allclose(got, np.einsum(spec, a, b), rtol=1e-12, atol=1e-12)


def test_gemm_k_zero_is_zero_filled():
    mod = contract_module([(2, [0, 2]), (2, [2, 1])], [0, 1], 3)
    got = run(mod, a=np.zeros((3, 0)), b=np.zeros((0, 4)))["z"]
    np.testing.assert_array_equal(got, np.zeros((3, 4)))
    got = run(mod, a=np.zeros((0, 2)), b=np.ones((2, 4)))["z"]
    assert got.shape == (0, 4)
    dot = contract_module([(1, [0]), (1, [0])], [], 1)
    assert run(dot, a=np.zeros(0), b=np.zeros(0))["z"] == 0.0


def test_gemm_static_k_skips_zero_fill():
    m = M()
    a, b = m.input("a", 2), m.input("b", 2)
    k = m.index(3)
    z = m.contract(a, b, [m.dim(a, 0), m.dim(b, 1), k], [[0, 2], [2, 1]], [0, 1])
    m.export([z], ["z"])
    mod = lower(m)
    assert not ops_of(mod, loop.ForOp)
    av, bv = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 4))
    np.testing.assert_allclose(run(mod, a=av, b=bv)["z"], av @ bv, rtol=1e-12)


STRIDED_CASES = [
    # name, maps, out, shape per dim, (trans_a, trans_b, broadcast_a, broadcast_b): dim 0 is the batch
    ("a_inner", [[1, 0, 2], [0, 2, 3]], [0, 1, 3], (2, 3, 4, 5), (False, False, False, False)),
    ("all_inner", [[1, 0, 2], [2, 0, 3]], [1, 0, 3], (2, 3, 4, 5), (False, False, False, False)),
    ("inner_transposed", [[2, 0, 1], [3, 0, 2]], [1, 0, 3], (2, 3, 4, 5), (True, True, False, False)),
    ("c_inner_only", [[0, 1, 2], [0, 2, 3]], [1, 0, 3], (2, 3, 4, 5), (False, False, False, False)),
    ("inner_broadcast_b", [[1, 0, 2], [2, 3]], [0, 1, 3], (2, 3, 4, 5), (False, False, False, True)),
    ("two_batch_dims_inner", [[2, 0, 1, 3], [3, 0, 1, 4]], [2, 0, 1, 4], (2, 3, 4, 5, 6), (False, False, False, False)),
]


@pytest.mark.parametrize("name,maps,out,sizes,flags", STRIDED_CASES, ids=[c[0] for c in STRIDED_CASES])
def test_a_batch_between_rows_and_columns_is_a_strided_gemm(name, maps, out, sizes, flags):
    """A buffer holding its batch dims between its rows and its columns (``A[i, b, j]``) goes to BLAS in place:
    one ``loop.gemm`` with explicit strides, no copy nest, the values of ``np.einsum`` (also with an empty batch,
    rows, columns or sum)."""
    ndims = len(sizes)
    mod = contract_module([(len(mp), mp) for mp in maps], out, ndims)
    (g,) = ops_of(mod, loop.GemmOp)
    assert len(g.strides) == 6
    assert tuple(bool(a.value.data) for a in (g.trans_a, g.trans_b, g.broadcast_a, g.broadcast_b)) == flags
    spec = einsum_spec(maps, out)
    for zero in (None, *range(ndims)):
        dims = [0 if d == zero else s for d, s in enumerate(sizes)]
        a = RNG.normal(size=[dims[d] for d in maps[0]])
        b = RNG.normal(size=[dims[d] for d in maps[1]])
        got = run(mod, a=a, b=b)["z"]
        np.testing.assert_allclose(got, np.einsum(spec, a, b), rtol=1e-12, atol=1e-12)


FALLBACK_CASES = [
    ("hadamard_transposed", [[0, 1], [1, 0]], [0, 1], 2, (3, 4)),
    ("sum_in_one_operand", [[0, 1], [0]], [0], 2, (3, 4)),
    ("batch_innermost", [[1, 2, 0], [2, 3, 0]], [1, 3, 0], 4, (2, 3, 4, 5)),
    ("out_broadcast_dim", [[0, 2], [2]], [0, 1], 3, (2, 3, 4)),
    ("column_sum_of_products", [[0, 1], [0, 1]], [1], 2, (3, 4)),
]


@pytest.mark.parametrize("name,maps,out,ndims,sizes", FALLBACK_CASES, ids=[c[0] for c in FALLBACK_CASES])
def test_contract_fallback_nest(name, maps, out, ndims, sizes):
    assert gemm_plan(maps[0], maps[1], out) is None
    m = M()
    a, b = m.input("a", len(maps[0])), m.input("b", len(maps[1]))
    ext = {}
    for v, mp in ((a, maps[0]), (b, maps[1])):
        for axis, d in enumerate(mp):
            ext.setdefault(d, m.dim(v, axis))
    for d in range(ndims):
        ext.setdefault(d, m.index(sizes[d]))
    z = m.contract(a, b, [ext[d] for d in range(ndims)], maps, out)
    m.export([z], ["z"])
    mod = lower(m)
    assert not ops_of(mod, loop.GemmOp)
    av = RNG.normal(size=[sizes[d] for d in maps[0]])
    bv = RNG.normal(size=[sizes[d] for d in maps[1]])
    if name == "out_broadcast_dim":
        want = np.einsum("ik,k->i", av, bv)[:, None] * np.ones((1, sizes[1]))
    else:
        want = np.einsum(einsum_spec(maps, out), av, bv)
    np.testing.assert_allclose(run(mod, a=av, b=bv)["z"], want, rtol=1e-12)


# --------------------------------------------------------------------------
# Extents and checks
# --------------------------------------------------------------------------


def test_check_dim_failure():
    m = M()
    x, y = m.input("x", 1), m.input("y", 1)
    nx, ny = m.dim(x, 0), m.dim(y, 0)
    m.add(te.CheckDimOp(nx, ny, "index i is {0} in x but {1} in y", "p.fuse:2:1:4"))
    z = m.generic(
        [x, y], [[0], [0]], ["parallel"], "none", [nx], "float64", lambda b, a, t, i: b.add(arith.AddfOp(a[0], a[1]))
    )
    m.export([z], ["z"])
    mod = lower(m)
    assert LoopAbi.read(mod).errors == [ErrorEntry("index i is {0} in x but {1} in y", "p.fuse:2:1:4")]
    np.testing.assert_array_equal(run(mod, x=np.ones(3), y=np.ones(3))["z"], 2 * np.ones(3))
    with pytest.raises(FuseRuntimeError) as err:
        run(mod, x=np.ones(3), y=np.ones(4))
    assert err.value.message == "index i is 3 in x but 4 in y"
    assert err.value.loc == Loc("p.fuse", 2, 1, 4)


SLICE_PARTS = [None, 0, 1, 3, 9, -1, -3, -9]
SLICE_STEPS = [None, 1, 2, -1, -3]
SLICES = [s for s in itertools.product(SLICE_PARTS, SLICE_PARTS, SLICE_STEPS)]


def test_slice_len_matches_python():
    """Each te.slice_len sizes a rank-1 result; its exported extent must be len(range(n)[s])."""
    m = M()
    x = m.input("x", 1)
    n = m.dim(x, 0)
    names = []
    for k, (start, stop, step) in enumerate(SLICES):
        length = m.add(te.SliceLenOp(n, start, stop, step)).results[0]
        z = m.generic([], [], ["parallel"], "none", [length], "int8", lambda b, a, t, i: b.i(0, 8))
        names.append(f"s{k}")
        m.export([z], [names[-1]])
    mod = lower(m)
    interp = LoopInterpreter(mod)
    for nv in range(0, 8):
        results = interp.run([np.zeros(nv)])
        for (start, stop, step), r in zip(SLICES, results):
            assert r is not None
            assert r.shape == (len(range(nv)[start:stop:step]),), (nv, start, stop, step)


def test_index_arith_at_module_level():
    m = M()
    x = m.input("x", 1)
    n = m.dim(x, 0)
    two = m.index(2)
    nn = m.add(arith.MuliOp(n, two)).results[0]
    n3 = m.add(arith.AddiOp(nn, m.index(1))).results[0]
    z = m.generic([], [], ["parallel"], "none", [n3], "float64", lambda b, a, t, i: b.f(1.0))
    m.export([z], ["z"])
    assert run(lower(m), x=np.zeros(3))["z"].shape == (7,)


# --------------------------------------------------------------------------
# Results, sinks, host calls
# --------------------------------------------------------------------------


def test_export_and_sink_slots():
    m = M()
    x = m.input("x", 1)
    n = m.dim(x, 0)
    y = m.generic([x], [[0]], ["parallel"], "none", [n], "float64", lambda b, a, t, i: b.add(arith.NegfOp(a[0])))
    m.add(te.SinkOp("out/a.npz", [x, y], ["X", "Y"], "p.fuse:4:1:9"))
    m.add(te.SinkOp("out/b.npy", [y], ["Y"]))
    m.export([y, x], ["y", "x"])
    mod = lower(m)
    entries = LoopAbi.read(mod).results or []
    assert [(e.name, e.kind, e.tensor, e.sink) for e in entries] == [
        ("y", "export", "y", -1),
        ("x", "export", "x", -1),
        ("out/a.npz", "sink", "X", 0),
        ("out/a.npz", "sink", "Y", 0),
        ("out/b.npy", "sink", "Y", 1),
    ]
    assert '#fuse.result<"out/a.npz", sink 0, "X", "p.fuse:4:1:9">' in str(mod.attributes["fuse.results"])
    results = ops_of(mod, loop.ResultOp)
    assert [(r.slot.value.data, r.tensor_name.data) for r in results] == [
        (2, "out/a.npz"),
        (3, "out/a.npz"),
        (4, "out/b.npy"),
        (0, "y"),
        (1, "x"),
    ]
    xv = np.array([1.0, -2.0])
    res = run_loop_module(mod, {"x": xv})
    np.testing.assert_array_equal(res.exports["y"], -xv)
    np.testing.assert_array_equal(res.exports["x"], xv)
    assert [(p, loc) for p, _, loc in res.sinks] == [("out/a.npz", Loc("p.fuse", 4, 1, 9)), ("out/b.npy", None)]
    assert set(res.sinks[0][1]) == {"X", "Y"}
    np.testing.assert_array_equal(res.sinks[1][1], -xv)


def test_host_call_topk():
    m = M()
    x = m.input("x", 2)
    call = m.add(
        ew.HostCallOp(
            "topk", [x], [te.tensor_type("int64", [D, D]), te.tensor_type("float64", [D, D])], {"k": 2, "axis": 1}
        )
    )
    idx, vals = call.results
    z = m.generic(
        [vals],
        [[0, 1]],
        ["parallel", "reduction"],
        "sum",
        [m.dim(vals, 0), m.dim(vals, 1)],
        "float64",
        lambda b, a, t, i: a[0],
    )
    m.export([idx, z], ["idx", "z"])
    mod = lower(m)
    calls = LoopAbi.read(mod).host_calls
    assert len(calls) == 1 and calls[0].fn == "topk"
    assert calls[0].param_values() == {"axis": 1, "k": 2}
    assert ops_of(mod, loop.HostCallOp)[0].attributes["id"].value.data == 0
    xv = RNG.normal(size=(3, 5))
    out = run(mod, x=xv)
    want_idx, want_vals = nb.topk(xv, 2, axis=1)
    np.testing.assert_array_equal(out["idx"], want_idx)
    np.testing.assert_allclose(out["z"], want_vals.sum(1))


def test_unknown_op_is_a_located_error():
    m = M()
    x = m.input("x", 1)
    m.add(te.CastOp(x, ["a0"], te.tensor_type("float32", [D])))
    with pytest.raises(FuseError, match="cannot lower 'te.cast'"):
        lower(m)


def test_check_dim_lt_predicate():
    m = M()
    x = m.input("x", 1)
    m.add(te.CheckDimOp(m.index(2), m.dim(x, 0), "position {0} is past the extent {1}", predicate="lt"))
    m.export([x], ["x"])
    mod = lower(m)
    np.testing.assert_array_equal(run(mod, x=np.ones(3))["x"], np.ones(3))
    with pytest.raises(FuseRuntimeError, match="position 2 is past the extent 2"):
        run(mod, x=np.ones(2))


def test_dim_of_a_table_inside_a_body():
    """y[i] = t[n - 1 - i] with n = te.dim of the table read inside the body."""
    m = M()
    tab = m.input("t", 1)
    n = m.dim(tab, 0)

    def body(b, a, t, ix):
        size = b.add(te.DimOp(t[0], 0))
        last = b.add(arith.SubiOp(size, b.add(arith.ConstantOp(IntegerAttr(1, IndexType())))))
        return b.add(ew.ExtractOp(t[0], [b.add(arith.SubiOp(last, ix(0)))]))

    z = m.generic([], [], ["parallel"], "none", [n], "float64", body, tables=[tab])
    m.export([z], ["z"])
    tv = np.arange(5.0)
    np.testing.assert_array_equal(run(lower(m), t=tv)["z"], tv[::-1])


def test_static_extents_stay_static():
    m = M()
    x = m.add(te.InputOp("x", ["i"], te.tensor_type("float32", [4]))).results[0]
    z = m.generic([x], [[0]], ["reduction"], "max", [m.index(4)], "float32", lambda b, a, t, i: a[0])
    m.export([z], ["z"])
    mod = lower(m)
    assert ops_of(mod, loop.ArgOp)[0].result.type.get_shape() == (4,)
    xv = np.array([1, 5, -2, 3], dtype=np.float32)
    assert run(mod, x=xv)["z"] == np.float32(5)


def test_unsigned_buffers_hold_signless_scalars():
    m = M()
    x = m.input("x", 1, "uint8")
    z = m.generic([x], [[0]], ["reduction"], "max", [m.dim(x, 0)], "uint8", lambda b, a, t, i: a[0])
    m.export([z], ["z"])
    mod = lower(m)
    assert ops_of(mod, loop.ArgOp)[0].result.type.element_type == IntegerType(8, te.Signedness.UNSIGNED)
    out = run(mod, x=np.array([3, 250, 7], dtype=np.uint8))["z"]
    assert out.dtype == np.uint8 and out == 250


# --------------------------------------------------------------------------
# End to end: .fuse programs through te → ew (→ fused) → loop, against the reference interpreter
# --------------------------------------------------------------------------

SMALL = 2000  # elements per input: the loop interpreter runs every scalar op in Python


def check_program(src: str, inputs: dict) -> None:
    from fuse_mlir import Program
    from fuse_mlir.interp.reference import run_module
    from fuse_mlir.passes.conversions.lower_te_to_ew import LowerTeToEw
    from fuse_mlir.passes.transforms.fuse import Fuse

    arrays = {k: np.asarray(v) for k, v in inputs.items()}
    arrays = {k: (v.astype(np.int8) if v.dtype == bool else v) for k, v in arrays.items()}
    low = Program(src).lower({k: v.dtype for k, v in arrays.items()})
    try:
        ref = run_module(low.module, arrays, low.sources)
    except FuseRuntimeError as err:
        ref = err
    for fuse in (False, True):
        module = low.module.clone()
        LowerTeToEw().apply(make_context(), module)
        if fuse:
            Fuse().apply(make_context(), module)
        module.verify()
        LowerEwToLoop().apply(make_context(), module)
        module.verify()
        text = print_module(module)
        module = parse_mlir(text, "loop.mlir")
        assert print_module(module) == text
        try:
            got = run_loop_module(module, arrays, low.sources)
        except FuseRuntimeError as err:
            assert isinstance(ref, FuseRuntimeError), f"unexpected error: {err}"
            assert (err.message, err.loc) == (ref.message, ref.loc)
            continue
        assert not isinstance(ref, FuseRuntimeError), f"expected the error {ref}"
        assert list(got.exports) == list(ref.exports)
        for k, want in ref.exports.items():
            assert got.exports[k].dtype == want.dtype, k
            np.testing.assert_allclose(got.exports[k], want, rtol=1e-9, atol=1e-12, equal_nan=True)
        assert [(p, loc) for p, _, loc in got.sinks] == [(p, loc) for p, _, loc in ref.sinks]


def _small(inputs: dict) -> bool:
    return all(np.size(v) <= SMALL for v in inputs.values())


def _semantics_cases() -> list:
    from tests.test_semantics import CASES

    return [pytest.param(src, inputs, id=name) for name, src, inputs, _ in CASES if _small(inputs)]


@pytest.mark.parametrize("src,inputs", _semantics_cases())
def test_semantics_cases_end_to_end(src, inputs):
    check_program(src, inputs)


def _builtin_cases() -> list:
    from tests.test_builtins_lang import AXIS, ELEMENTWISE, P, X, softmax
    from tests.test_builtins_lang import M as MASK

    out = [pytest.param(f"Y[i,j] = {expr}", {"X": x}, id=name) for name, expr, x, _ in ELEMENTWISE]
    s = softmax(X, 1)
    for name, src, _ in AXIS:
        env = dict(X=X, M=MASK, P=P, S=s, G=np.ones_like(X))
        out.append(pytest.param(src, {k: v for k, v in env.items() if f"{k}[" in src}, id=name))
    return out


@pytest.mark.parametrize("src,inputs", _builtin_cases())
def test_builtins_end_to_end(src, inputs):
    check_program(src, inputs)


def test_blocks_and_host_calls_end_to_end():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((4, 6)), rng.standard_normal((4, 6)), rng.standard_normal((4, 2))
    check_program("Y[p,e] = attention(Q[p,d], K[p',d], V[p',e], causal=true)", {"Q": q, "K": k, "V": v})
    check_program("Y[p,d] = tucker_dense(Q[p,d], rank=1)", {"Q": q})
    check_program('"t.npz" = topk(X[i,j], k=2)\nY[i] = X[i,j]', {"X": q})


def test_random_programs_end_to_end():
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st

    from tests.strategies import GenProgram, programs

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(prog=programs(), seed=st.integers(0, 2**16))
    def check(prog: GenProgram, seed: int) -> None:
        arrays = prog.arrays(seed)
        assume(_small(arrays))
        check_program(prog.source(), arrays)

    check()


def test_transpose_benchmark_prints_its_rows(capsys):
    """``python -m benchmarks.transpose`` (docs/optimisation.md's table) checks fuse's values against NumPy's
    and prints one timed row per case and dtype."""
    from benchmarks import transpose

    assert transpose.main(["--cases", "ijb,bik", "--dtypes", "float32", "--quick"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "float32" in line and line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == ["ijb -> bij (128,128,32)", "bik -> ikb (32,128,128)"]
    for r in rows:
        assert float(r.split("|")[3]) > 0
    with pytest.raises(SystemExit):
        transpose.main(["--cases", "nothing-like-this"])
