"""benchmarks/compile_scaling.py runs both of its families and its programs compute what they say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import compile_scaling
from fuse_mlir import Program


def test_the_wide_program_is_a_sum_of_its_inputs() -> None:
    src, inputs = compile_scaling.wide_program(30)
    assert len(inputs) == 30 and src.count("\n") == 1
    got = Program(src).compile("llvm")(**inputs)["S"]
    np.testing.assert_allclose(got, sum(inputs.values()), rtol=1e-12)


@pytest.mark.parametrize("wide", [False, True])
def test_the_benchmark_prints_a_row_per_size_and_the_growth(
    wide: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FUSE_CACHE_DIR", str(tmp_path))  # main() points it at a fresh folder; restored after
    args = ["--sizes", "20,40", "--levels", "O2", "--no-jax"] + (["--wide"] if wide else [])
    assert compile_scaling.main(args) == 0
    out = capsys.readouterr().out
    assert ("terms of one equation" in out) == wide
    rows = [line for line in out.splitlines() if line.startswith(("| 20 |", "| 40 |"))]
    assert len(rows) == 2 and all("| O2 |" in r for r in rows)
    assert "growth t(N=40) / t(N=20) (linear would be 2.0)" in out
