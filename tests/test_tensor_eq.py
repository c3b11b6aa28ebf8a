"""The tensor_eq dialect: text round trips (custom and generic), verifiers, determinism across processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from fuse_mlir import FuseError, Program
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.reference import run_module
from fuse_mlir.ir import parse_mlir, print_module
from tests.test_semantics import CASES

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.fuse"))


def programs() -> list[tuple[str, Program, dict]]:
    out = [(name, Program(src), inputs) for name, src, inputs, _ in CASES]
    out += [(p.name, Program.from_file(p), {}) for p in EXAMPLES]
    return out


@pytest.mark.parametrize("name,prog,inputs", programs(), ids=lambda x: x if isinstance(x, str) else "")
def test_round_trip_custom_and_generic(name, prog, inputs):
    dtypes = {k: np.asarray(v).dtype for k, v in inputs.items()}
    module = prog.lower(dtypes).module
    custom = print_module(module)
    generic = print_module(module, generic=True)
    again = parse_mlir(custom, "custom.mlir")
    assert print_module(again) == custom
    from_generic = parse_mlir(generic, "generic.mlir")
    assert print_module(from_generic) == custom
    assert print_module(from_generic, generic=True) == generic


@pytest.mark.parametrize("name,src,inputs,expected", CASES[:40], ids=[c[0] for c in CASES[:40]])
def test_reparsed_module_runs_the_same(name, src, inputs, expected):
    prog = Program(src)
    dtypes = {k: np.asarray(v).dtype for k, v in inputs.items()}
    module = parse_mlir(print_module(prog.lower(dtypes).module), "m.mlir")
    arrays = {k: np.asarray(v) for k, v in inputs.items()}
    got = run_module(module, arrays, {}).exports
    np.testing.assert_allclose(got[list(got)[-1]], expected(), rtol=1e-12, atol=1e-12)


def test_constants_keep_their_values():
    arr = np.array([0.1 + 1e-17, np.nan, -0.0, 1e300, -np.inf])
    op = te.ConstantOp(arr, ["i"])
    back = te.dense_value(op.value)
    assert back.tobytes() == arr.tobytes()
    text = print_module(ModuleOp([op]))
    op2 = next(iter(parse_mlir(text, "c.mlir").body.block.ops))
    back = te.dense_value(op2.value)
    # Through text, values are exact and -0.0 keeps its sign; xDSL's parser does not keep NaN payloads.
    assert np.array_equal(back, arr, equal_nan=True) and np.signbit(back[2])


def test_ir_text_is_deterministic_across_processes():
    src = Path(EXAMPLES[0]) if EXAMPLES else None
    code = (
        "import sys; from fuse_mlir import Program; "
        "p = Program.from_file(sys.argv[1]) if sys.argv[1] != '-' else Program("
        "'fn d(a[x], b[x]) -> s { s = a[x] b[x] }\\nY[i] = d(X[i,k], B[k]) + relu(W[i,j] V[j])'); "
        "sys.stdout.write(p.to_mlir())"
    )
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        for arg in ("-", str(src) if src else "-"):
            r = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, env=env, check=True)
            outs.add((arg, r.stdout))
    assert len(outs) == (2 if src else 1)


class TestVerifiers:
    def f64(self, *shape):
        return te.tensor_type("float64", shape)

    def test_contract_rank_mismatch(self):
        x = te.InputOp("X", ["i", "j"], self.f64(te.DYNAMIC, te.DYNAMIC))
        bad = te.ContractOp([x.result], [["i"]], ["i"], "sum", self.f64(te.DYNAMIC))
        with pytest.raises(VerifyException, match="rank 2 but 1 index names"):
            ModuleOp([x, bad]).verify()

    def test_contract_unknown_projection(self):
        x = te.InputOp("X", ["i"], self.f64(te.DYNAMIC))
        with pytest.raises(ValueError, match="'median' is not a valid Projection"):
            te.ContractOp([x.result], [["i"]], [], "median", self.f64())

    def test_contract_result_index_on_no_operand(self):
        x = te.InputOp("X", ["i"], self.f64(te.DYNAMIC))
        bad = te.ContractOp([x.result], [["i"]], ["k"], "sum", self.f64(te.DYNAMIC))
        with pytest.raises(VerifyException, match="on no operand"):
            ModuleOp([x, bad]).verify()

    def test_map_indices_must_be_union(self):
        x = te.InputOp("X", ["i"], self.f64(te.DYNAMIC))
        bad = te.MapOp("exp", [x.result], [["i"]], ["i", "j"], self.f64(te.DYNAMIC, te.DYNAMIC))
        with pytest.raises(VerifyException, match="union"):
            ModuleOp([x, bad]).verify()

    def test_repeated_index_names(self):
        x = te.InputOp("X", ["i", "j"], self.f64(te.DYNAMIC, te.DYNAMIC))
        bad = te.MapOp("exp", [x.result], [["i", "i"]], ["i", "i"], self.f64(te.DYNAMIC, te.DYNAMIC))
        with pytest.raises(VerifyException, match="repeats"):
            ModuleOp([x, bad]).verify()

    def test_broadcast_needs_extents(self):
        x = te.InputOp("X", ["i"], self.f64(te.DYNAMIC))
        bad = te.BroadcastOp(x.result, [], ["i"], ["i", "j"], self.f64(te.DYNAMIC, te.DYNAMIC))
        with pytest.raises(VerifyException, match="extents"):
            ModuleOp([x, bad]).verify()

    def test_generate_arity(self):
        bad = te.GenerateOp("causal_mask", [], ["p"], self.f64(te.DYNAMIC))
        with pytest.raises(VerifyException, match="takes 2"):
            ModuleOp([bad]).verify()

    def test_generate_nonempty_is_0d_over_some_extents(self):
        x = te.InputOp("X", ["i"], self.f64(te.DYNAMIC))
        n = te.DimOp(x.result, 0)
        i8 = te.tensor_type(np.dtype("int8"), [])
        ModuleOp([x, n, te.GenerateOp("nonempty", [n.result], [], i8)]).verify()
        with pytest.raises(VerifyException, match="nonempty takes no indices and one or more extents"):
            ModuleOp([te.GenerateOp("nonempty", [], [], i8)]).verify()
        y = te.InputOp("Y", ["i"], self.f64(te.DYNAMIC))
        m = te.DimOp(y.result, 0)
        bad = te.GenerateOp("nonempty", [m.result], ["i"], te.tensor_type(np.dtype("int8"), [te.DYNAMIC]))
        with pytest.raises(VerifyException, match="nonempty takes no indices"):
            ModuleOp([y, m, bad]).verify()

    def test_verify_error_in_text_is_located(self):
        text = (
            'builtin.module {\n  %0 = te.input "X" {indices = ["i"]} : tensor<?xf64>\n'
            '  %1 = te.map "exp" %0 {operand_indices = [["i"]], indices = ["i", "j"]} '
            ": (tensor<?xf64>) -> tensor<?x?xf64>\n}\n"
        )
        with pytest.raises(FuseError) as e:
            parse_mlir(text, "bad.mlir")
        assert e.value.loc is not None and e.value.loc.line == 3
