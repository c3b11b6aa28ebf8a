"""Typed IR attributes: te.access axes, ew.generic iterators and kinds, and source locations as MLIR locations."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp, UnknownLoc
from xdsl.utils.exceptions import VerifyException

from fuse_mlir.cli.fuse_opt import print_with_locations
from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.dialects.abi import (
    AbiError,
    ArgEntry,
    ErrorEntry,
    HostCallEntry,
    LoopAbi,
    ResultEntry,
    ReuseEntry,
)
from fuse_mlir.dialects.locations import FileLineColRange, decode_location, location_attr
from fuse_mlir.interp.reference import run_module
from fuse_mlir.ir import make_context, parse_mlir
from fuse_mlir.passes.conversions.lower_te_to_ew import LowerTeToEw
from fuse_mlir.program import Program, print_module

AXES = [
    (te.AccessAxisAttr.named("i"), "#te.axis<i>"),
    (te.AccessAxisAttr.named("i'"), '#te.axis<"i\'">'),
    (te.AccessAxisAttr.named("gather"), '#te.axis<"gather">'),
    (te.AccessAxisAttr.offset("i", 2), "#te.axis<i + 2>"),
    (te.AccessAxisAttr.offset("j", -1), "#te.axis<j - 1>"),
    (te.AccessAxisAttr.position(3), "#te.axis<3>"),
    (te.AccessAxisAttr.slice(None, -1, 2, ":-1:2"), '#te.axis<slice ?:-1:2 as ":-1:2">'),
    (te.AccessAxisAttr.gather(1), "#te.axis<gather 1>"),
]


@pytest.mark.parametrize(("axis", "text"), AXES)
def test_access_axis_prints_and_parses_back(axis: te.AccessAxisAttr, text: str) -> None:
    assert str(axis) == text
    n = 1 + (axis.axis_kind == te.AxisKind.GATHER and axis.value)
    gathers = "\n  ".join(f'%g{k} = te.input "G{k}" {{indices = []}} : tensor<i64>' for k in range(n))
    produced = [axis.index_name] if axis.axis_kind != te.AxisKind.POSITION and axis.index_name else []
    g_operands = ", ".join(f"%g{k}" for k in range(n)) if axis.axis_kind == te.AxisKind.GATHER else ""
    g_types = ", ".join("tensor<i64>" for _ in range(n)) if g_operands else ""
    g_indices = ", ".join("[]" for _ in range(n)) if g_operands else ""
    out = "tensor<?xf64>" if produced else "tensor<f64>"
    indices = ", ".join(f'"{p}"' for p in produced)
    module = parse_mlir(
        "builtin.module {\n"
        '  %x = te.input "X" {indices = ["d"]} : tensor<?xf64>\n'
        + (f"  {gathers}\n" if g_operands else "")
        + f"  %a = te.access %x[{g_operands}] () {{axes = [{text}], gather_indices = [{g_indices}], "
        f"indices = [{indices}]}} : tensor<?xf64>[{g_types}] -> {out}\n"
        "}\n"
    )
    access = next(op for op in module.walk() if isinstance(op, te.AccessOp))
    assert access.axis_list() == [axis]
    assert text in print_module(module)


def test_access_axis_accessors() -> None:
    s = te.AccessAxisAttr.slice(1, None, -2, "1::-2")
    assert (s.axis_kind, s.index_name, s.slice_bounds()) == (te.AxisKind.SLICE, "1::-2", (1, None, -2))
    o = te.AccessAxisAttr.offset("t", -3)
    assert (o.axis_kind, o.index_name, o.value) == (te.AxisKind.OFFSET, "t", -3)
    assert te.AccessAxisAttr.gather(2).value == 2 and te.AccessAxisAttr.position(0).value == 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: te.AccessAxisAttr(te.AxisKind.NAME, ""), "a name axis needs index name"),
        (lambda: te.AccessAxisAttr(te.AxisKind.POSITION, "i", 1), "a position axis takes no index name"),
        (lambda: te.AccessAxisAttr.position(-1), "non-negative"),
        (lambda: te.AccessAxisAttr.slice(0, 4, 0, "0:4:0"), "slice step cannot be zero"),
        (lambda: te.AccessAxisAttr(te.AxisKind.SLICE, "s", 0, (1, 2)), "three bounds"),
        (lambda: te.AccessAxisAttr(te.AxisKind.GATHER, "", 0, (1, 2, 3)), "only a slice axis has bounds"),
    ],
)
def test_access_axis_rejects_malformed(make, message: str) -> None:
    with pytest.raises(VerifyException, match=message):
        make()


def test_frontend_builds_typed_axes() -> None:
    prog = Program("Y[i] = X[i+1] + X[0] + X[P[i]]\nZ[1::2] = X[1::2]\nexport Y, Z", "t.fuse")
    text = prog.to_mlir()
    for shown in ("#te.axis<i + 1>", "#te.axis<0>", "#te.axis<gather 0>", '#te.axis<slice 1:?:2 as "1::2">'):
        assert shown in text
    assert print_module(parse_mlir(text)) == text


def test_generic_iterators_and_kinds_are_enums() -> None:
    prog = Program("S[i] = X[i,j]\nM[i] max= X[i,j]\nexport S, M", "k.fuse")
    module = prog.lower().module
    LowerTeToEw().apply(make_context(), module)
    kernels = [op for op in module.walk() if isinstance(op, ew.GenericOp) and "reduction" in op.iterator_list()]
    assert kernels
    for k in kernels:
        assert all(isinstance(i, ew.IteratorType) for i in k.iterator_list())
        assert all(isinstance(x, ew.ReductionKind) for x in k.kind_list())
    assert {x for k in kernels for x in k.kind_list()} == {ew.ReductionKind.SUM, ew.ReductionKind.MAX}
    text = print_module(module)
    assert "#ew.iterator<reduction>" in text and "#ew.kind<max>" in text


def test_reduce_kind_and_projection_are_enums() -> None:
    prog = Program("S[i] max= X[i,j]\nT[i] = X[i,j] W[j]\nL[i] = logsumexp(X[i,j])\nexport S, T, L", "r.fuse")
    module = prog.lower().module
    contracts = [op for op in module.walk() if isinstance(op, te.ContractOp)]
    reduces = [op for op in module.walk() if isinstance(op, te.ReduceOp)]
    assert contracts and reduces
    assert all(isinstance(op.projection.data, te.Projection) for op in contracts)
    assert all(isinstance(op.kind.data, te.Reduction) for op in reduces)
    text = print_module(module)
    assert "projection = #te.projection<max>" in text and "te.reduce <logsumexp> " in text
    assert print_module(parse_mlir(text)) == text


@pytest.mark.parametrize(
    ("old", "new", "valid"),
    [
        ("te.reduce <sum>", "te.reduce <total>", "`sum`, `max`, `min`, `mean`, `prod`, `any`, or `logsumexp`"),
        ("#te.projection<sum>", "#te.projection<any>", "`sum`, `max`, `min`, `mean`, or `prod`"),
    ],
)
def test_unknown_reduce_kind_or_projection_names_the_valid_ones(old: str, new: str, valid: str) -> None:
    text = (
        "builtin.module {\n"
        '  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>\n'
        '  %r = te.reduce <sum> %x {operand_indices = [["i"]], indices = []} : (tensor<?xf64>) -> tensor<f64>\n'
        '  %c = te.contract %x {operand_indices = [["i"]], indices = [], projection = #te.projection<sum>}'
        " : (tensor<?xf64>) -> tensor<f64>\n"
        "}\n"
    )
    parse_mlir(text)
    with pytest.raises(FuseError, match=re.escape(valid)):
        parse_mlir(text.replace(old, new))


def test_abi_tables_are_typed_attributes_that_print_and_parse_back() -> None:
    const = np.array([1.0, np.inf, np.nan])
    abi = LoopAbi(
        args=[ArgEntry("X", "input"), ArgEntry("W", "source"), ArgEntry.constant("C", te.dense_attr(const))],
        results=[ResultEntry("Y"), ResultEntry("out/a.npz", "sink", "Y", "p.fuse:4:1:9", 0)],
        errors=[ErrorEntry("j is {1} in X[j] but {0} in Y[j]", "p.fuse:2:3:1")],
        host_calls=[HostCallEntry("topk", te.params_attr({"k": 3}))],
        reuse=[ReuseEntry(2, "X")],
    )
    module = ModuleOp([])
    abi.write(module)
    text = print_module(module)
    for shown in (
        '#fuse.arg<"X", input>',
        '#fuse.arg<"W", source>',
        '#fuse.arg<"C", constant dense<',
        "> : tensor<3xi64> as f64>",
        '#fuse.result<"Y", export>',
        '#fuse.result<"out/a.npz", sink 0, "Y", "p.fuse:4:1:9">',
        '#fuse.error<"j is {1} in X[j] but {0} in Y[j]", "p.fuse:2:3:1">',
        '#fuse.host_call<"topk", {k = 3 : i64}>',
        '#fuse.reuse<2, "X">',
    ):
        assert shown in text
    back = parse_mlir(text)
    assert print_module(back) == text
    read = LoopAbi.read(back)
    assert read.args is not None and read.results is not None
    assert [(a.name, a.kind) for a in read.args] == [("X", "input"), ("W", "source"), ("C", "constant")]
    np.testing.assert_array_equal(read.args[2].value(), const)
    assert read.results[1].location() == Loc("p.fuse", 4, 1, 9) and read.results[1].tensor == "Y"
    assert read.errors == abi.errors and read.reuse == abi.reuse
    assert read.host_calls[0].param_values() == {"k": 3}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('#fuse.arg<"x", output>', "Expected `input`, `source`, or `constant`"),
        ('#fuse.arg<"x", input dense<1> : tensor<i64>>', "'>' expected"),
        ('#fuse.arg<"x", constant dense<1.0> : tensor<f64> as f32>', "follows an integer dense value"),
        ('#fuse.arg<"x", constant dense<1> : tensor<i32> as f64>', "i32 bits cannot hold f64"),
        ('#fuse.result<"y", sink 0, "v">', "','"),
        ('#fuse.reuse<-1, "x">', "a loop.alloc id"),
    ],
)
def test_malformed_abi_entries_are_located_errors(entry: str, message: str) -> None:
    with pytest.raises(FuseError, match=re.escape(message)):
        parse_mlir(f"builtin.module attributes {{fuse.t = [{entry}]}} {{\n}}\n")


def test_only_a_constant_slot_holds_a_value() -> None:
    with pytest.raises(VerifyException, match="only a constant slot holds a value, not a source slot"):
        ArgEntry("x", "source", te.dense_attr(np.ones(2))).to_attr()


def test_abi_reader_names_a_table_of_the_wrong_entries() -> None:
    module = parse_mlir('builtin.module attributes {fuse.args = [["x", "input"]]} {\n}\n')
    with pytest.raises(AbiError, match=r"fuse.args: expected #fuse.arg entries"):
        LoopAbi.read(module)


def test_location_attrs() -> None:
    assert isinstance(location_attr(""), UnknownLoc) and isinstance(location_attr(None), UnknownLoc)
    assert isinstance(location_attr(Loc("a.fuse", 2, 3)), FileLineColLoc)
    wide = location_attr(Loc("a.fuse", 2, 3, 4))
    assert isinstance(wide, FileLineColRange) and str(wide) == 'loc("a.fuse":2:3 to :7)'
    assert decode_location(wide) == Loc("a.fuse", 2, 3, 4)
    assert decode_location(location_attr("x:y.fuse:1:5:2")) == Loc("x:y.fuse", 1, 5, 2)


def test_locations_print_only_with_debuginfo_and_survive_mlir_text() -> None:
    """A gathered index out of range is reported at its .fuse place, also after a round trip through MLIR text."""
    prog = Program("Y[i] = X[P[i]]\nexport Y", "g.fuse")
    module = prog.lower().module
    assert "loc" not in print_module(module)
    text = print_with_locations(module, generic=False)
    assert 'loc("g.fuse":1:8' in text
    reparsed = parse_mlir(text, "g.mlir")
    inputs = {"X": np.arange(3.0), "P": np.array([0, 5], dtype=np.int64)}
    for m in (module, reparsed):
        with pytest.raises(FuseRuntimeError) as info:
            run_module(m, inputs, {})
        assert info.value.loc is not None and (info.value.loc.file, info.value.loc.line) == ("g.fuse", 1)
    again = print_with_locations(reparsed, generic=False)
    assert re.findall(r'loc\("g\.fuse"[^)]*\)', again) == re.findall(r'loc\("g\.fuse"[^)]*\)', text)


def test_bad_location_range_is_a_located_error() -> None:
    with pytest.raises(FuseError, match="must end after its start column 9") as info:
        parse_mlir('builtin.module {\n  %x = te.input "X" {indices = []} : tensor<f64> loc("p.fuse":3:9 to :4)\n}\n')
    assert info.value.loc is not None and info.value.loc.line == 2
