"""Tests of fuse_mlir.ir: the shared xDSL context and located MLIR parsing."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.ir import make_context, parse_mlir, print_module
from fuse_mlir.program import Program

TEXT = """\
builtin.module {
  %0 = te.input "X" {indices = ["i"]} : tensor<?xf64>
  %1 = arith.constant 2 : index
  te.export %0 {names = ["X"]} : tensor<?xf64>
}
"""


def test_make_context_loads_builtin_arith_te() -> None:
    ctx = make_context()
    for name in ("builtin.module", "arith.constant", "te.contract", "te.input"):
        assert ctx.get_optional_op(name) is not None, name
    assert make_context() is not ctx  # a fresh context each time


def test_parse_mlir_round_trip() -> None:
    module = parse_mlir(TEXT, "t.mlir")
    assert isinstance(module, ModuleOp)
    assert print_module(module) == TEXT


def test_parse_mlir_implicit_module() -> None:
    body = '%0 = "te.input"() {name = "X", indices = ["i"]} : () -> tensor<?xf64>\n'
    assert isinstance(parse_mlir(body), ModuleOp)


def test_parse_error_has_location_and_caret() -> None:
    with pytest.raises(FuseError) as info:
        parse_mlir(TEXT.replace("arith.constant 2", "arith.constant @"), "t.mlir")
    err = info.value
    assert err.loc is not None and (err.loc.file, err.loc.line) == ("t.mlir", 3)
    text = str(err).splitlines()
    assert text[0].startswith("t.mlir:3:")
    assert "arith.constant @" in text[1] and "^" in text[2]


def test_verify_error_points_at_op() -> None:
    bad = TEXT.replace('indices = ["i"]}', "indices = []}", 1)
    with pytest.raises(FuseError) as info:
        parse_mlir(bad, "t.mlir")
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (2, 3)
    assert "te.input" in info.value.message
    # verify=False hands back the module unverified
    assert isinstance(parse_mlir(bad, "t.mlir", verify=False), ModuleOp)


def test_lowered_program_parses_back() -> None:
    text = Program("C[i,k] = A[i,j] B[j,k]\nexport C\n", "mm.fuse").to_mlir()
    assert print_module(parse_mlir(text, "mm.mlir")) == text
