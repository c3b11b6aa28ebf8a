"""``block-checks``: gathers checked a block at a time agree with the reference and report the first bad index.

The checked blocks, the unchecked fast path and the tail loop are all
exercised: sizes around the block length, bad indices in the first block, a
later block and the tail, several bad indices (the first is reported), one
and two threads, and the checked build (``check_bounds=True``).
"""

from __future__ import annotations

import numpy as np
import pytest

from fuse_mlir import FuseRuntimeError, Program
from fuse_mlir.dialects import loop
from fuse_mlir.ir import parse_mlir
from fuse_mlir.passes.lowering import lower_to_loop
from fuse_mlir.targets import get_target

BASE = get_target("llvm").pipeline("O2").replace(",block-checks", "")
SMALL_BLOCKS = BASE + ",block-checks{block=4}"

PROGRAMS = {
    "gather_sum": "S = X[Idx[n]]\nexport S",
    "gather_map": "Y[n] = X[Idx[n]] * 2\nexport Y",
    "gather_max_and_sum": "S = X[Idx[n]]\nM max= X[Idx[n]]\nexport S, M",
    "row_gather": "Y[r] = X[Idx[r, k]]\nexport Y",
}


def _inputs(name: str, n: int, m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    x = rng.standard_normal(m)
    if name == "row_gather":
        return {"X": x, "Idx": rng.integers(0, m, (3, n))}
    return {"X": x, "Idx": rng.integers(0, m, n)}


def _runs(prog: Program, check_bounds: bool = False):
    return [
        prog.compile("llvm", check_bounds=check_bounds),
        prog.compile("llvm", pipeline=SMALL_BLOCKS, check_bounds=check_bounds),
        prog.compile("llvm", pipeline=SMALL_BLOCKS, threads=2, parallel_min=0, check_bounds=check_bounds),
    ]


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17, 1023, 1024, 1025, 3000])
def test_blocked_gathers_agree_with_the_reference(name, n):
    prog = Program(PROGRAMS[name])
    inputs = _inputs(name, n, 50, np.random.default_rng(n))
    ref = prog.compile("reference")(**inputs)
    for run in _runs(prog):
        got = run(**inputs)
        for k in ref:
            np.testing.assert_allclose(got[k], ref[k], rtol=1e-12, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("check_bounds", [False, True], ids=["default", "checked"])
@pytest.mark.parametrize("where", [0, 2, 9, 1030, 2047, 2049], ids=lambda w: f"at{w}")
def test_the_first_bad_index_is_the_located_error(where, check_bounds):
    prog = Program(PROGRAMS["gather_sum"])
    rng = np.random.default_rng(where)
    idx = rng.integers(0, 10, 2050)
    idx[where] = 10 + where  # the first bad one, named in the message
    if where + 7 < idx.size:
        idx[where + 7] = -3  # a later bad one is not reported
    for run in _runs(prog, check_bounds):
        with pytest.raises(
            FuseRuntimeError,
            match=rf":1:5: error: gathered index {10 + where} is out of range for axis 0 \(extent 10\)",
        ) as e:
            run(X=np.arange(10.0), Idx=idx)
        assert "S = X[Idx[n]]" in str(e.value)


def test_the_gather_loop_is_split_into_checked_blocks():
    te = parse_mlir(Program(PROGRAMS["gather_sum"]).to_mlir({"X": "float64", "Idx": "int64"}))
    module = lower_to_loop(te)
    func = next(iter(module.body.block.ops))
    top = [op for op in func.regions[0].block.ops if isinstance(op, loop.ForOp)]
    assert len(top) == 2  # the blocks, then the tail
    blocks = top[0]
    inner = [op for op in blocks.body.block.ops if isinstance(op, loop.ForOp)]
    assert len(inner) == 3  # check the block's indices, the checked body (bad blocks only), the fast body
    assert not any(isinstance(op, loop.CheckOp) for op in inner[0].walk())
    assert any(isinstance(op, loop.CheckOp) for op in inner[1].walk())
    assert not any(isinstance(op, loop.CheckOp) for op in inner[2].walk())
