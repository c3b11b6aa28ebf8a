"""``te.scatter_add`` (the adjoint of a gather) on every backend against ``np.add.at``, and the gradients that use it.

The op has no surface syntax, so the op-level cases run hand-written tensor_eq modules through the ordinary
runners (:class:`RawProgram` swaps the module of a program with the same inputs); the gradient cases go
through ``Program.grad``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError
from fuse_mlir.ir import parse_mlir
from fuse_mlir.lowered import Lowered
from fuse_mlir.program import Program
from fuse_mlir.testing.gradcheck import check_grad

BACKENDS = ["reference", "llvm", "numba", "jax", "torch"]
PARALLEL = {"llvm": {"threads": 4, "parallel_min": 0}}
"""The llvm runner's settings that run every parallel nest on threads, whatever its size."""

ONE_AXIS = (
    "U[b, d] Idx[b] Z[v]",
    """
  %u = te.input "U" {{indices = ["b", "d"]}} : tensor<?x?x{f}>
  %i = te.input "Idx" {{indices = ["b"]}} : tensor<?x{i}>
  %z = te.input "Z" {{indices = ["v"]}} : tensor<?x{f}>
  %n = te.dim %z, 0 : i64 : tensor<?x{f}>
  %s = te.scatter_add %u[%i] (%n) {{axes = [#te.axis<gather 0>, #te.axis<d>], operand_indices = [["b", "d"]], gather_indices = [["b"]], indices = ["v", "d"]}} : tensor<?x?x{f}>[tensor<?x{i}>] -> tensor<?x?x{f}> loc("emb.fuse":3:7)
  te.export %s {{names = ["S"]}} : tensor<?x?x{f}>
""",
)
"""``S[Idx[b], d] += U[b, d]``: an embedding gradient."""

TWO_AXES = (
    "U[b, t, d] I[t, b] J[b] Z[v] Y[w]",
    """
  %u = te.input "U" {{indices = ["b", "t", "d"]}} : tensor<?x?x?x{f}>
  %i = te.input "I" {{indices = ["t", "b"]}} : tensor<?x?xi64>
  %j = te.input "J" {{indices = ["b"]}} : tensor<?xi64>
  %z = te.input "Z" {{indices = ["v"]}} : tensor<?x{f}>
  %y = te.input "Y" {{indices = ["w"]}} : tensor<?x{f}>
  %n = te.dim %z, 0 : i64 : tensor<?x{f}>
  %m = te.dim %y, 0 : i64 : tensor<?x{f}>
  %s = te.scatter_add %u[%j, %i] (%n, %m) {{axes = [#te.axis<d>, #te.axis<gather 1>, #te.axis<gather 0>], operand_indices = [["b", "t", "d"]], gather_indices = [["b"], ["t", "b"]], indices = ["d", "v", "w"]}} : tensor<?x?x?x{f}>[tensor<?xi64>, tensor<?x?xi64>] -> tensor<?x?x?x{f}>
  te.export %s {{names = ["S"]}} : tensor<?x?x?x{f}>
""",
)
"""``S[d, I[t, b], J[b]] += U[b, t, d]``: two gathered axes, one index tensor of rank 2 in another axis order."""


class RawProgram(Program):
    """A program whose lowering is a hand-written module over the inputs of ``inputs_source``."""

    def __init__(self, case: tuple[str, str]):
        names = case[0].split()
        super().__init__("O = " + " ".join(names) + "\n")
        self.body = case[1]
        self._raw: dict[Any, Lowered] = {}

    def lower(self, input_dtypes: Mapping[str, Any] | None = None, options: Any = None, *, warm: bool = False):
        key = tuple(sorted((k, str(v)) for k, v in (input_dtypes or {}).items()))
        if key not in self._raw:
            base = super().lower(input_dtypes, options)
            dtypes = {i.name: i.dtype for i in base.inputs}
            f = "f32" if dtypes["U"] == np.float32 else "f64"
            i = {"int32": "i32", "uint8": "ui8", "uint64": "ui64"}.get(str(dtypes.get("Idx")), "i64")
            module = parse_mlir("builtin.module {" + self.body.format(f=f, i=i) + "}", "emb.fuse")
            module.verify()
            self._raw[key] = Lowered(module, base.inputs, ["S"], ["S"], base.sources, [])
        return self._raw[key]


def want_one_axis(u: np.ndarray, idx: np.ndarray, v: int) -> np.ndarray:
    out = np.zeros((v, u.shape[1]), u.dtype)
    np.add.at(out, idx, u)
    return out


def tolerance(dtype: np.dtype) -> dict[str, float]:
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_duplicates_accumulate(backend: str, dtype: type) -> None:
    rng = np.random.default_rng(0)
    u = rng.standard_normal((40, 37)).astype(dtype)  # 37 columns: a chunk boundary inside the row
    idx = np.array([3, 0, 3, 3, 5, 1] * 6 + [0, 0, 2, 3])
    got = RawProgram(ONE_AXIS).compile(backend)(U=u, Idx=idx, Z=np.zeros(6, dtype))["S"]
    assert got.dtype == dtype and got.shape == (6, 37)
    np.testing.assert_allclose(got, want_one_axis(u, idx, 6), **tolerance(np.dtype(dtype)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_gathered_axes(backend: str) -> None:
    rng = np.random.default_rng(1)
    u = rng.standard_normal((5, 4, 3))
    i = rng.integers(0, 3, (4, 5))
    j = rng.integers(0, 2, 5)
    got = RawProgram(TWO_AXES).compile(backend)(U=u, I=i, J=j, Z=np.zeros(3), Y=np.zeros(2))["S"]
    want = np.zeros((3, 3, 2))
    for b in range(5):
        for t in range(4):
            want[:, i[t, b], j[b]] += u[b, t]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_updates_give_zeros(backend: str) -> None:
    run = RawProgram(ONE_AXIS).compile(backend)
    got = run(U=np.zeros((0, 3)), Idx=np.zeros(0, np.int64), Z=np.zeros(4))["S"]
    np.testing.assert_array_equal(got, np.zeros((4, 3)))
    got = run(U=np.ones((2, 0)), Idx=np.array([1, 1]), Z=np.zeros(4))["S"]
    assert got.shape == (4, 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [6, -1])
def test_out_of_range_index_is_a_located_error(backend: str, bad: int) -> None:
    u = np.ones((300, 40))  # big enough to run in parallel on llvm
    idx = np.zeros(300, np.int64)
    idx[150] = bad
    with pytest.raises(FuseRuntimeError, match=rf"scattered index {bad} is out of range") as e:
        RawProgram(ONE_AXIS).compile(backend, **PARALLEL.get(backend, {}))(U=u, Idx=idx, Z=np.zeros(6))
    assert e.value.loc is not None and (e.value.loc.file, e.value.loc.line, e.value.loc.col) == ("emb.fuse", 3, 7)


def test_index_extent_mismatch_is_an_error() -> None:
    for backend in ("reference", "llvm"):
        with pytest.raises(FuseRuntimeError, match="index b is"):
            RawProgram(ONE_AXIS).compile(backend)(U=np.ones((3, 2)), Idx=np.zeros(4, np.int64), Z=np.zeros(2))


def test_threads_agree_with_serial() -> None:
    """The parallel nest (chunks of the named axis) gives the serial sums exactly: no lost updates."""
    rng = np.random.default_rng(2)
    u = rng.standard_normal((2000, 300))
    idx = rng.integers(0, 7, 2000)  # heavy duplication: every row hit ~300 times
    prog = RawProgram(ONE_AXIS)
    one = prog.compile("llvm", threads=1, parallel_min=0)(U=u, Idx=idx, Z=np.zeros(7))["S"]
    many = prog.compile("llvm", threads=4, parallel_min=0)(U=u, Idx=idx, Z=np.zeros(7))["S"]
    np.testing.assert_array_equal(one, many)
    np.testing.assert_allclose(one, want_one_axis(u, idx, 7), rtol=1e-12, atol=1e-9)


EMBEDDING = "E[b, d] = Table[Idx[b], d]\nH[b] = tanh(E[b, d] W[d])\nL = avg((H[b] - Y[b]) ** 2)\n"


def embedding_inputs(v: int = 6, b: int = 9, d: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return dict(
        Table=rng.standard_normal((v, d)),
        Idx=rng.integers(0, v - 1, b),  # the last row is never read: its gradient is 0
        W=rng.standard_normal(d),
        Y=rng.standard_normal(b),
    )


def test_embedding_gradient_uses_scatter_add() -> None:
    g = Program(EMBEDDING).grad("L", ["Table", "W"])
    names = [op.name for op in g.lower().module.body.block.ops]
    assert "te.scatter_add" in names
    assert "te.generate" not in names  # no one-hot iota


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_embedding_gradient_matches_finite_differences(backend: str) -> None:
    inputs = embedding_inputs()
    got = check_grad(EMBEDDING, "L", ["Table", "W"], inputs, backend=backend)
    assert np.all(got["dL_dTable"][-1] == 0)


def test_embedding_gradient_matches_jax_grad() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    inputs = embedding_inputs()

    def loss(table, w):
        h = jnp.tanh(table[inputs["Idx"]] @ w)
        return jnp.mean((h - inputs["Y"]) ** 2)

    dt, dw = jax.grad(loss, argnums=(0, 1))(inputs["Table"], inputs["W"])
    got = Program(EMBEDDING).grad("L", ["Table", "W"]).compile("llvm")(**inputs)
    np.testing.assert_allclose(got["dL_dTable"], np.asarray(dt), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["dL_dW"], np.asarray(dw), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", ["llvm", "numba", "jax", "torch"])
def test_embedding_gradient_equal_on_backends(backend: str) -> None:
    inputs = embedding_inputs(v=50, b=400, d=33)
    g = Program(EMBEDDING).grad("L", ["Table", "W"])
    want = g.compile("reference")(**inputs)
    got = g.compile(backend)(**inputs)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-9, atol=1e-12, err_msg=k)


def test_fuse_text_round_trip_of_a_scatter() -> None:
    inputs = embedding_inputs()
    g = Program(EMBEDDING).grad("L", ["Table"])
    text = g.to_fuse()
    assert "iota(" in text  # printed as its one-hot sum: the language has no left-hand gather
    want = g.compile("reference")(**inputs)
    got = Program(text).compile("reference")(**inputs)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12, err_msg=k)


def test_scatter_add_ir_round_trips() -> None:
    module = RawProgram(ONE_AXIS).lower().module
    text = str(module)
    again = parse_mlir(text)
    again.verify()
    assert str(again) == text
    assert "#te.axis<gather 0>" in text


@pytest.mark.parametrize("options", [{}, PARALLEL["llvm"]])
def test_checked_build_stays_clean(options: dict[str, int]) -> None:
    """Under ``check_bounds`` every load and store of the scatter nest is range-checked: none fires on valid
    indices, and an invalid one still stops at the scatter's own check (before any store)."""
    rng = np.random.default_rng(4)
    u, idx = rng.standard_normal((500, 70)), rng.integers(0, 9, 500)
    got = RawProgram(ONE_AXIS).compile("llvm", check_bounds=True, **options)(U=u, Idx=idx, Z=np.zeros(9))["S"]
    np.testing.assert_allclose(got, want_one_axis(u, idx, 9), rtol=1e-12, atol=1e-9)
    g = Program(EMBEDDING).grad("L", ["Table"])
    inputs = embedding_inputs(v=20, b=300, d=17)
    np.testing.assert_allclose(
        g.compile("llvm", check_bounds=True, **options)(**inputs)["dL_dTable"],
        g.compile("reference")(**inputs)["dL_dTable"],
        rtol=1e-10,
        atol=1e-12,
    )
    idx[7] = 9
    with pytest.raises(FuseRuntimeError, match="scattered index 9 is out of range"):
        RawProgram(ONE_AXIS).compile("llvm", check_bounds=True, **options)(U=u, Idx=idx, Z=np.zeros(9))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_dtype", [np.uint8, np.int32, np.uint64])
def test_index_dtypes(backend: str, index_dtype: type) -> None:
    """Narrow unsigned indices are zero-extended (200 is row 200, not -56); a huge uint64 is out of range."""
    u = np.arange(6.0).reshape(3, 2)
    idx = np.array([200, 1, 200], index_dtype) if index_dtype == np.uint8 else np.array([2, 1, 2], index_dtype)
    rows = int(idx.max()) + 1
    got = RawProgram(ONE_AXIS).compile(backend)
    out = got(U=u, Idx=idx, Z=np.zeros(rows))["S"]
    np.testing.assert_array_equal(out, want_one_axis(u, idx.astype(np.int64), rows))
    if index_dtype == np.uint64:
        with pytest.raises(FuseRuntimeError, match="scattered index 18446744073709551615 is out of range"):
            got(U=u, Idx=np.array([0, 2**64 - 1, 0], np.uint64), Z=np.zeros(rows))


OFFSETS = "Y[i, j] = X[i+2, j] X[i, j-1] + X[i-1, j+3]\nL = Y[i, j] Y[i, j] W[i, j]\n"


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_offset_adjoint_is_a_shifted_read(backend: str) -> None:
    """Offsets through distinct names send the adjoint back as the opposite offset read: O(n), no one-hot."""
    rng = np.random.default_rng(5)
    inputs = dict(X=rng.standard_normal((6, 5)), W=rng.standard_normal((6, 5)))
    g = Program(OFFSETS).grad("L", ["X"])
    names = [op.name for op in g.lower().module.body.block.ops]
    assert "te.generate" not in names and "te.contract" in names
    check_grad(OFFSETS, "L", ["X"], inputs, backend=backend)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (("#te.axis<d>]", "#te.axis<3>]"), "an axis is an index name or a gather, not a position"),
        (("#te.axis<gather 0>", "#te.axis<gather 1>"), "names gather operand 1"),
        (('operand_indices = [["b", "d"]]', 'operand_indices = [["b", "e"]]'), "must be exactly those"),
        (("(%n)", "()"), "one extent per gathered axis"),
    ],
)
def test_verifier_names_the_problem(change: tuple[str, str], needle: str) -> None:
    body = ONE_AXIS[1].format(f="f64", i="i64").replace(*change)
    with pytest.raises(FuseError, match=needle):
        parse_mlir("builtin.module {" + body + "}", "bad.mlir")


GATHER = "Y[i] = X[Idx[i]]\n"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "index_dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
)
def test_gather_index_dtypes(backend: str, index_dtype: type) -> None:
    """A gather reads the same rows whatever the index tensor's integer dtype, and an index past the axis is a
    located error naming its value, on every backend (torch has no uint64 comparisons: it once failed internally)."""
    x = np.arange(300.0)
    idx = np.array([0, 255 if np.iinfo(index_dtype).max >= 255 else 127, 3], index_dtype)
    run = Program(GATHER).compile(backend)
    np.testing.assert_array_equal(run(X=x, Idx=idx)["Y"], x[idx.astype(np.int64)])
    big = np.iinfo(index_dtype).max
    if big >= 300:
        with pytest.raises(FuseRuntimeError, match=f"index {big} is out of range"):
            run(X=x, Idx=np.array([1, big], index_dtype))
