"""``pipeline-rows``: a row nest's first phase run one row ahead agrees with the reference interpreter.

Each row program runs with the pass forced onto every eligible nest
(``min-ops=1``), with blocks of 1, 3 and 16 rows and 1 or 64 least blocks, on
odd sizes, empty rows, no rows and rows holding NaN and infinities, with one
and two threads, and in place (a donated input). The structural tests pin what
the pass leaves alone: a light second phase at the default ``min-ops``, a store
to another row, a first phase whose bounds depend on the row.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith

from fuse_mlir import Program
from fuse_mlir.dialects import loop
from fuse_mlir.ir import parse_mlir
from fuse_mlir.passes.pipeline import Pipeline
from fuse_mlir.passes.transforms.pipeline_rows import PipelineRows
from fuse_mlir.targets import get_target
from tests.rows import row_matrix, same_results, top_level_loops

PROGRAMS = {
    "logsumexp": "L[r] = logsumexp(X[r, c])\nexport L",
    "softmax": "Y[r, c.] = softmax(X[r, c])\nexport Y",
    "log_softmax": "Y[r, c.] = log(softmax(X[r, c]))\nexport Y",
    "variance": "M[r] avg= X[r, c]\nV[r] avg= (X[r, c] - M[r]) ** 2\nexport V",
    "layernorm": "Y[r, c.] = lnorm(X[r, c])\nexport Y",
    "mean_and_var": "M[r] avg= X[r, c]\nV[r] avg= (X[r, c] - M[r]) ** 2\nexport M, V",
}

O2 = get_target("llvm").pipeline("O2")
BASE = O2.replace(",fuse-rows,pipeline-rows", ",fuse-rows{row-cache-bytes=-1}")
FORCED = {
    f"rows{r}_blocks{b}": BASE + f",pipeline-rows{{min-ops=1 rows-per-block={r} min-blocks={b}}}"
    for r, b in ((1, 1), (3, 1), (16, 64), (16, 1))
}
SHAPES = [(7, 13), (1, 1), (5, 0), (0, 5), (40, 9), (130, 3)]


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf"])
def test_pipelined_row_programs_agree_with_the_reference(name, shape, special):
    prog = Program(PROGRAMS[name])
    for dtype, rtol in ((np.float64, 1e-10), (np.float32, 3e-5)):
        inputs = {"X": row_matrix(*shape, special, dtype)}
        ref = prog.compile("reference")(**inputs)
        for spec in FORCED.values():
            same_results(prog.compile("llvm", pipeline=spec)(**inputs), ref, rtol)
            same_results(prog.compile("llvm", pipeline=spec, threads=2, parallel_min=0)(**inputs), ref, rtol)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layernorm"])
def test_a_donated_input_written_in_place_row_by_row(name):
    """The output overwrites X row by row while the next row is read ahead: row iv + 1 must still be X's."""
    prog = Program(PROGRAMS[name])
    x = np.random.default_rng(3).standard_normal((37, 11))
    ref = prog.compile("reference")(X=x.copy())
    for spec in FORCED.values():
        for threads in (1, 2):
            run = prog.compile("llvm", pipeline=spec, donate=["X"], threads=threads, parallel_min=0)
            same_results(run(X=x.copy()), ref, 1e-10)


def _pipelined(nest: loop.ForOp) -> bool:
    """Whether ``nest`` is a parallel loop over row blocks whose row loop carries the next row's phase."""
    rows = [op for op in nest.body.block.ops if isinstance(op, loop.ForOp)]
    blocks = isinstance(nest.upper.owner, arith.CeilDivSIOp)
    return blocks and nest.parallel is not None and len(rows) == 2 and bool(rows[0].inits) and bool(rows[1].inits)


def test_the_default_pipeline_runs_the_row_max_one_row_ahead():
    nests = top_level_loops(PROGRAMS["logsumexp"])
    assert _pipelined(nests[0])
    rows = [op for op in nests[0].body.block.ops if isinstance(op, loop.ForOp)][1]
    merged = [op for op in rows.body.block.ops if isinstance(op, loop.ForOp)]
    assert len(merged) == 1 and len(merged[0].inits) == 2  # the exp-sum of this row and the max of the next


def test_a_light_second_phase_is_left_alone_at_the_default():
    """Variance's squared deviations are memory-bound: reading two rows at once would only cost."""
    assert not any(_pipelined(n) for n in top_level_loops(PROGRAMS["variance"]))
    forced = top_level_loops(PROGRAMS["variance"], FORCED["rows16_blocks64"])
    assert _pipelined(forced[0])


def _run_example(text: str, spec: str | None = "pipeline-rows{min-ops=1}") -> str:
    module = parse_mlir(text, "<test>")
    if spec is not None:
        Pipeline.parse(spec).run(module)
    return str(module)


def test_a_store_to_another_row_keeps_the_nest_as_it_is():
    example = PipelineRows.example
    assert example is not None
    assert "ceildivsi" in _run_example(example)
    other_row = example.replace(
        "loop.store %22, %7[%8] : f64, memref<?xf64>",
        "loop.store %22, %7[%8] : f64, memref<?xf64>\n      loop.store %22, %7[%0] : f64, memref<?xf64>",
    )
    assert other_row != example
    assert "ceildivsi" not in _run_example(other_row)


def test_a_first_phase_reading_a_value_computed_in_the_row_keeps_the_nest():
    example = PipelineRows.example
    assert example is not None
    # The first phase's bound now depends on the row: it could not be cloned one row ahead.
    text = example.replace(
        "%9 = loop.for %0 to %6 step %1 iter_args(%2 : f64) -> f64 {",
        "%90 = arith.addi %8, %1 : index\n      %9 = loop.for %0 to %90 step %1 iter_args(%2 : f64) -> f64 {",
    ).replace("%14 = loop.for %0 to %6 step", "%14 = loop.for %0 to %90 step")
    assert "ceildivsi" not in _run_example(text)


def test_off_and_disabled_leave_the_module_unchanged():
    example = PipelineRows.example
    assert example is not None
    plain = _run_example(example, None)
    assert _run_example(example, "pipeline-rows{rows-per-block=0 min-ops=1}") == plain
    assert _run_example(example) != plain
