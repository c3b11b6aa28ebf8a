"""Every optimisation pipeline gives the reference's results: O0, O2, and each pass alone; plus donation,
opt_level plumbing and what the passes save on the examples and workloads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workloads import WORKLOADS
from fuse_mlir import FuseError, Program
from fuse_mlir.dialects import loop
from fuse_mlir.passes.lowering import lower_to_loop
from fuse_mlir.passes.statistics import Statistics
from fuse_mlir.passes.transforms.block_checks import BLOCKED
from fuse_mlir.passes.transforms.fuse_rows import FALLBACK
from tests.strategies import GenProgram, programs

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.fuse"))

PIPELINES = {
    "O0": {"opt_level": 0},
    "O2": {"opt_level": 2},
    "contract-order": {"pipeline": "contract-order"},
    "dedup": {"pipeline": "dedup"},
    "freeze": {"pipeline": "freeze"},
    "fuse": {"pipeline": "fuse"},
    "inplace": {"pipeline": "inplace"},
    "expand-math": {"pipeline": "expand-math"},
    "fuse-numba": {"pipeline": "dedup,fuse{target=numba},dedup"},
    "all": {"pipeline": "contract-order,dedup,freeze,fuse{max-operands=3},dedup,inplace,expand-math"},
}


def agree(prog: Program, inputs: dict, options: dict, rtol: float = 1e-9, out_root=None) -> None:
    ref = prog.compile("reference", out_root=out_root)(**{k: v.copy() for k, v in inputs.items()})
    before = {k: v.copy() for k, v in inputs.items()}
    got = prog.compile("llvm", out_root=out_root, **options)(**inputs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"input {k} was overwritten without being donated")
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape, k
        np.testing.assert_allclose(got[k], ref[k], rtol=rtol, atol=rtol, err_msg=k)


@pytest.mark.parametrize("pipeline", PIPELINES, ids=list(PIPELINES))
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples(path, pipeline, tmp_path):
    agree(Program.from_file(path), {}, PIPELINES[pipeline], out_root=tmp_path)


@pytest.mark.parametrize("pipeline", ["O0", "O2", "all"])
@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workloads(w, pipeline):
    agree(Program(w.source), w.inputs(np.random.default_rng(1), np.dtype(np.float64), True), PIPELINES[pipeline])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16), pipeline=st.sampled_from(sorted(PIPELINES)))
def test_random_programs(prog: GenProgram, seed: int, pipeline: str):
    agree(Program(prog.source()), prog.arrays(seed), PIPELINES[pipeline])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(allow_empty=False), seed=st.integers(0, 2**16))
def test_random_programs_with_every_input_donated(prog: GenProgram, seed: int):
    p = Program(prog.source())
    arrays = prog.arrays(seed)
    ref = p.compile("reference")(**{k: v.copy() for k, v in arrays.items()})
    got = p.compile(donate=list(arrays))(**arrays)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-9, atol=1e-9)


CHAIN = "T[i] = exp(X[i]) * 2\nU[i] = T[i] + Y[i]\nexport U"


def test_donated_input_is_overwritten_and_others_are_not():
    x, y = np.linspace(0, 1, 1000), np.linspace(1, 2, 1000)
    want = np.exp(x) * 2 + y
    xd, yd = x.copy(), y.copy()
    got = Program(CHAIN).compile(donate=["X"])(X=xd, Y=yd)["U"]
    np.testing.assert_allclose(got, want)
    assert np.array_equal(yd, y)
    assert not np.array_equal(xd, x)  # the kernel wrote into the donated buffer


def test_donation_is_refused_for_read_only_or_aliased_arrays():
    x = np.linspace(0, 1, 100)
    ro = x.copy()
    ro.flags.writeable = False
    got = Program(CHAIN).compile(donate=["X"])(X=ro, Y=np.ones(100))["U"]
    np.testing.assert_allclose(got, np.exp(x) * 2 + 1)
    same = x.copy()
    got = Program(CHAIN).compile(donate=["X"])(X=same, Y=same)["U"]
    np.testing.assert_allclose(got, np.exp(x) * 2 + x)
    np.testing.assert_array_equal(same, x)


def test_donating_an_unknown_input_is_an_error():
    with pytest.raises(FuseError, match="donate names Z"):
        Program(CHAIN).compile(donate=["Z"])(X=np.ones(3), Y=np.ones(3))


@pytest.mark.parametrize("level", [0, 1, 2, 3, "O0", "O2", "o2"])
def test_opt_levels(level):
    x = np.linspace(0, 1, 10)
    np.testing.assert_allclose(Program(CHAIN).compile(opt_level=level)(X=x, Y=x)["U"], np.exp(x) * 2 + x)


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_bad_opt_level(backend):
    with pytest.raises(FuseError, match="unknown optimisation level"):
        Program(CHAIN).compile(backend, opt_level=7)


def _count(module, kind) -> int:
    """Ops of ``kind``, leaving out fuse-rows' fallback nests (they run only the rows the fused nest leaves) and
    block-checks' block loops (the original loop is still there, for the iterations past the last block)."""
    fallback = {x for op in module.walk() if FALLBACK in op.attributes or BLOCKED in op.attributes for x in op.walk()}
    return sum(isinstance(op, kind) and op not in fallback for op in module.walk())


@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_o2_never_has_more_loops_or_allocations_than_o0(w):
    te_module = Program(w.source).lower().module
    o0, o2 = lower_to_loop(te_module, opt_level=0), lower_to_loop(te_module, opt_level=2)
    assert _count(o2, loop.AllocOp) <= _count(o0, loop.AllocOp)
    assert _count(o2, loop.ForOp) <= _count(o0, loop.ForOp)


def test_mlp_saves_allocations_and_kernels():
    te_module = Program.from_file(Path(__file__).parent.parent / "examples" / "mlp.fuse").lower().module
    with Statistics() as stats:
        o2 = lower_to_loop(te_module, opt_level=2)
    o0 = lower_to_loop(te_module, opt_level=0)
    assert stats.get("inplace", "allocations-saved") >= 1
    assert stats.get("fuse", "producers-inlined") >= 1
    assert _count(o2, loop.AllocOp) < _count(o0, loop.AllocOp)


def test_fuse_run_takes_an_optimisation_level(tmp_path):
    from fuse_mlir.cli.fuse import main

    example = Path(__file__).parent.parent / "examples" / "mlp.fuse"
    for flag in ("-O0", "-O2"):
        assert main(["run", str(example), flag, "--out-root", str(tmp_path)]) == 0
