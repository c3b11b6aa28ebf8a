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


def test_use_before_definition_is_a_located_error() -> None:
    """xDSL's verifier leaves SSA dominance unchecked (its parser accepts this forward reference)."""
    text = "builtin.module {\n  %1 = arith.addi %0, %0 : index\n  %0 = arith.constant 1 : index\n}\n"
    with pytest.raises(FuseError) as info:
        parse_mlir(text, "fwd.mlir")
    assert "arith.addi: operand 0 is used where its definition is not visible" in info.value.message
    assert info.value.loc is not None and (info.value.loc.file, info.value.loc.line) == ("fwd.mlir", 2)


def test_check_dominance_regions() -> None:
    """A value defined inside a region is not visible after the op that holds it (the fixpoint lowering's
    ``loop.dim`` of a buffer computed in a ``loop.while``); one from an enclosing block is visible inside."""
    import numpy as np

    from fuse_mlir.dialects import loop
    from fuse_mlir.ir import check_dominance, verify_module
    from fuse_mlir.passes.lowering import lower_to_loop

    module = lower_to_loop(Program("Y[i] = X[i] 2\nexport Y").lower({"X": np.float64}).module, opt_level=0)
    assert check_dominance(module) is None  # loop bodies read the function's values
    for_op = next(op for op in module.walk() if isinstance(op, loop.ForOp))
    dim = for_op.operands[1].owner  # the loop's upper bound: a loop.dim in the function body
    assert isinstance(dim, loop.DimOp)
    first_user = next(op for op in module.walk() if dim.results[0] in op.operands)  # the output's loop.alloc
    dim.detach()
    body = for_op.body.block
    assert body.first_op is not None
    body.insert_op_before(dim, body.first_op)  # now defined inside the loop that uses it as its bound
    assert check_dominance(module) == (first_user, 0)
    with pytest.raises(FuseError, match="after x: loop.alloc: operand 0 is used where its definition is not visible"):
        verify_module(module, "after x: ")
