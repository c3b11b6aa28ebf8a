"""``fuse-rows``: row kernels fused into one nest of per-row phases agree with the reference interpreter.

Each program runs on llvm O0 and O2, and at O2 with the cache threshold
forced both ways (``row-cache-bytes=-1``: only the fused nest; ``1``: every
row "too big", so the unfused fallback nests run), on odd sizes, empty rows,
no rows, and rows holding NaN and infinities, with one and two threads.
"""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir import Program
from fuse_mlir.dialects import loop
from fuse_mlir.targets import get_target
from tests.fresh import fresh_python
from tests.rows import row_matrix, same_results, top_level_loops

PROGRAMS = {
    "softmax": "Y[r, c.] = softmax(X[r, c])\nexport Y",
    "log_softmax": "Y[r, c.] = log(softmax(X[r, c]))\nexport Y",
    "logsumexp": "L[r] = logsumexp(X[r, c])\nexport L",
    "variance": "M[r] avg= X[r, c]\nV[r] avg= (X[r, c] - M[r]) ** 2\nexport V",
    "layernorm": "Y[r, c.] = lnorm(X[r, c])\nexport Y",
    "mean_and_var": "M[r] avg= X[r, c]\nV[r] avg= (X[r, c] - M[r]) ** 2\nexport M, V",
    "attention": "S[q, k] = Q[q, d] K[k, d]\nP[q, k.] = softmax(S[q, k])\nO[q, d] = P[q, k] V[k, d]\nexport O",
    # An output wider than the phases' values (float32 X: float32 exp, float64 Y), which the exp cannot be stored in.
    "softmax_plus_int": "Y[r, c.] = softmax(X[r, c]) + N[r, c]\nexport Y",
}

# Without pipeline-rows too (tests/test_pipeline_rows.py), so the fused nest's structure is fuse-rows' own.
BASE = get_target("llvm").pipeline("O2").replace(",fuse-rows,pipeline-rows", "")
FORCED = {"fused": BASE + ",fuse-rows{row-cache-bytes=-1}", "fallback": BASE + ",fuse-rows{row-cache-bytes=1}"}


def _inputs(name: str, rows: int, cols: int, special: bool, dtype: type) -> dict[str, np.ndarray]:
    if name == "attention":
        rng = np.random.default_rng(rows * 31 + cols)
        d = 3
        return {
            k: rng.standard_normal(s).astype(dtype) for k, s in (("Q", (rows, d)), ("K", (cols, d)), ("V", (cols, d)))
        }
    if name == "softmax_plus_int":
        n = np.random.default_rng(rows * 7 + cols).integers(-3, 4, (rows, cols)).astype(np.int32)
        return {"X": row_matrix(rows, cols, special, dtype), "N": n}
    return {"X": row_matrix(rows, cols, special, dtype)}


SHAPES = [(7, 13), (1, 1), (5, 0), (0, 5), (3, 64)]


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf"])
def test_row_programs_agree_with_the_reference(name, shape, special):
    if special and name == "attention":
        pytest.skip("attention's scores come from a product; NaN inputs are covered by the row programs")
    prog = Program(PROGRAMS[name])
    for dtype, rtol in ((np.float64, 1e-10), (np.float32, 3e-5)):
        inputs = _inputs(name, *shape, special, dtype)
        ref = prog.compile("reference")(**inputs)
        runs = [
            prog.compile("llvm", opt_level=0),
            prog.compile("llvm"),
            *(prog.compile("llvm", pipeline=p) for p in FORCED.values()),
            *(prog.compile("llvm", pipeline=p, threads=2, parallel_min=0) for p in FORCED.values()),
        ]
        for run in runs:
            same_results(run(**inputs), ref, rtol)


def test_softmax_phases_become_one_nest_with_forwarded_row_values():
    fused = top_level_loops(PROGRAMS["softmax"], FORCED["fused"])
    assert len(fused) == 1
    inner = [op for op in fused[0].body.block.ops if isinstance(op, loop.ForOp)]
    assert len(inner) == 3  # max, exp-sum, normalise: sequential phases of one row
    # The row max and sum reach the later phases as values, not as loads of their per-row buffers.
    loads = [op for op in fused[0].walk() if isinstance(op, loop.LoadOp)]
    assert all(len(op.positions) == 2 for op in loads)
    # exp(x - max) is computed once: the sum phase stores it in the output row, the normalise phase reloads it.
    normalise = inner[2]
    assert not any(isinstance(op, loop.LoadOp) and isinstance(op.buffer.owner, loop.ArgOp) for op in normalise.walk())
    assert any(isinstance(op, loop.StoreOp) and len(op.positions) == 2 for op in inner[1].walk())


def test_default_keeps_the_unfused_nests_as_the_fallback_for_big_rows():
    loops = top_level_loops(PROGRAMS["softmax"], BASE + ",fuse-rows")
    assert len(loops) == 4  # the fused nest, then the three phase nests over the rows it leaves
    assert all(op.lower is loops[0].upper for op in loops[1:])
    assert len(top_level_loops(PROGRAMS["softmax"], BASE + ",fuse-rows{row-cache-bytes=0}")) == 3


def test_a_row_that_does_not_fit_the_threshold_takes_the_fallback():
    prog = Program(PROGRAMS["softmax"])
    x = np.random.default_rng(0).standard_normal((4, 300))
    ref = prog.compile("reference")(X=x)
    small = BASE + ",fuse-rows{row-cache-bytes=4096}"  # a row of X and of Y is 4800 bytes: too big
    same_results(prog.compile("llvm", pipeline=small)(X=x), ref, 1e-10)
    narrow = x[:, :100]  # 1600 bytes per row: fits, the fused nest runs
    same_results(prog.compile("llvm", pipeline=small)(X=narrow), prog.compile("reference")(X=narrow), 1e-10)


def test_a_reduction_read_at_another_row_is_not_fused():
    src = "M[r] max= X[r, c]\nY[r, c] = X[r, c] - M[0]\nexport Y"
    loops = top_level_loops(src, FORCED["fused"])
    assert len(loops) == 2
    x = np.random.default_rng(1).standard_normal((5, 7))
    same_results(
        Program(src).compile("llvm", pipeline=FORCED["fused"])(X=x), Program(src).compile("reference")(X=x), 1e-12
    )


REDUCE_AND_STORE = {
    "sum_max_and_value": "F[i] = exp(X[i]) * 2 - 1\nS = F[i]\nM max= F[i]\nexport S, M, F",
    "mean_of_exported": "F[i] = X[i] * X[i]\nA avg= F[i]\nexport F, A",
    "gathered_value": "F[n] = X[Idx[n]] + 1\nS = F[n]\nexport F, S",
}


def _reduce_inputs(name: str, n: int, special: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n)
    if special and n > 2:
        x[1], x[2] = np.nan, np.inf
    if name == "gathered_value":
        return {"X": x, "Idx": rng.integers(0, max(n, 1), n) if n else np.zeros(0, np.int64)}
    return {"X": x}


@pytest.mark.parametrize("name", REDUCE_AND_STORE)
@pytest.mark.parametrize("n", [0, 1, 13, 4099])
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf"])
def test_a_reduction_also_stores_the_value_it_reduces(name, n, special):
    prog = Program(REDUCE_AND_STORE[name])
    inputs = _reduce_inputs(name, n, special)
    ref = prog.compile("reference")(**inputs)
    for run in (
        prog.compile("llvm", opt_level=0),
        prog.compile("llvm"),
        prog.compile("llvm", threads=2, parallel_min=0),
    ):
        same_results(run(**inputs), ref, 1e-10)


def test_the_map_and_the_reduction_are_one_loop_nest():
    loops = top_level_loops(REDUCE_AND_STORE["sum_max_and_value"])
    assert len(loops) == 1 and len(loops[0].inits) == 2 and loops[0].parallel is not None
    assert not [
        op
        for op in loops[0].walk()
        if isinstance(op, loop.LoadOp) and op.buffer.owner is not None and isinstance(op.buffer.owner, loop.AllocOp)
    ]  # the stored value is reduced without reloading it


@pytest.mark.parametrize("check_bounds", [False, True])
def test_a_bad_index_in_a_fused_gather_is_still_the_located_error(check_bounds):
    from fuse_mlir import FuseRuntimeError

    prog = Program(REDUCE_AND_STORE["gathered_value"])
    x = np.arange(5.0)
    for bad in (5, -1):
        idx = np.array([0, 1, 2, bad, 4, 1])
        with pytest.raises(
            FuseRuntimeError, match=r":1:8: error: gathered index (5|-1) is out of range for axis 0 \(extent 5\)"
        ):
            prog.compile("llvm", check_bounds=check_bounds, threads=2, parallel_min=0)(X=x, Idx=idx)


def test_phase_value_keys_are_interned_flat_tuples():
    """The keys matching a later phase's values with an earlier phase's are small integers, one per distinct
    structure, interned in one table for the loops compared: a key does not grow with the expression's depth."""
    from fuse_mlir.passes.transforms.fuse_rows import _keys

    src = "Y[r, c.] = log(exp(tanh(lnorm(X[r, c]))))\nexport Y"
    unfused = top_level_loops(src, BASE)
    inner = [x for nest in unfused for x in nest.walk() if isinstance(x, loop.ForOp) and x is not nest]
    table: dict[tuple, int] = {}
    ops = 0
    for phase in inner:
        keys = _keys(phase, table)
        if keys is None:
            continue
        ops += len(list(phase.body.block.ops))
        assert all(isinstance(k, int) for k in keys.values())
    assert 0 < len(table) <= ops + len(inner) + 64  # one entry per op at most (plus iv and outside values)
    for entry in table:
        assert all(not isinstance(part, tuple) for part in entry), entry


def test_deep_shared_math_in_row_phases_compiles_quickly_and_right():
    """``log(exp(tanh(layernorm(x))))``: its expanded math shares subexpressions at every level. Keys that nested
    their operands' keys were hashed as whole trees, exponential in that depth (fuzzer seed 914251 hung: 0.9 s
    for tanh(layernorm), 9 s with exp, minutes with log). Compiled in a fresh interpreter, under its time
    limit, so a regression fails rather than hangs the suite; the values agree with the reference."""
    code = """
import numpy as np
from fuse_mlir import Program
p = Program("Y[m, k] = log(exp(tanh(layernorm(X[m, k]))))\\nexport Y")
X = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
got = p.compile("llvm", cache=False)(X=X)["Y"]
want = p.compile("reference")(X=X)["Y"]
np.testing.assert_allclose(got, want, rtol=3e-5, atol=3e-5)
print("ok")
"""
    assert fresh_python(code).strip() == "ok"


def test_a_group_reads_at_most_max_buffers():
    # A wide sum comes out of `fuse` as kernels of at most 32 operands; fusing their row nests back into one
    # gave LLVM a body of a thousand loads (13 s to compile for 2,000 inputs). A group stops at max-buffers.
    terms = " + ".join(f"X{k}[r, c]" for k in range(40))
    src = f"Y[r, c] = {terms}\nexport Y"
    fused = FORCED["fused"]
    assert len(top_level_loops(src, fused)) == 2  # two kernels (fuse's own limit), not joined
    assert len(top_level_loops(src, fused.replace("{row-cache-bytes=-1}", "{row-cache-bytes=-1 max-buffers=100}"))) == 1
    xs = {f"X{k}": np.random.default_rng(k).standard_normal((3, 4)) for k in range(40)}
    prog = Program(src)
    same_results(prog.compile("llvm", pipeline=fused)(**xs), prog.compile("reference")(**xs), 1e-12)
