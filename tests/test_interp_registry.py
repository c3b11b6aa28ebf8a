"""The walkers' one registration shape (interp/registry.py) and the per-op plans they share (interp/plans.py)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir import Program
from fuse_mlir.backends.array_walk import WALK
from fuse_mlir.diagnostics import FuseRuntimeError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.ew_interp import EW
from fuse_mlir.interp.plans import clear_plans, contract_plan, einsum_spec, map_plan
from fuse_mlir.interp.reference import REFERENCE, Interpreter, run_module
from fuse_mlir.interp.registry import OpTable

SRC = """
C[i,k] = A[i,j] B[j,k]
S[i] = exp(C[i,k])
export C, S
"""


def _module() -> ModuleOp:
    return Program(SRC).lower().module


def _first(module: ModuleOp, kind: type) -> Any:
    return next(op for op in module.body.block.ops if isinstance(op, kind))


def test_the_array_walker_runs_every_op_the_reference_runs():
    """Both walkers register handlers per op class the same way; the walker covers the reference's ops except the
    fixpoint (a fixpoint group is iterated by the runner around the walker, not inside it)."""
    assert set(REFERENCE) - set(WALK) == {te.FixpointOp}
    assert set(WALK) <= set(REFERENCE)
    assert set(REFERENCE) < set(EW)  # the elemwise interpreter extends the reference's table, which is left alone
    for op in _module().body.block.ops:
        assert EW.get(op) is REFERENCE.get(op) is not None


def test_an_op_no_handler_covers_is_a_located_run_time_error():
    module = _module()
    table = OpTable("test walker")
    with pytest.raises(FuseRuntimeError, match="the test walker cannot run 'te.input'"):
        table.lookup(next(iter(module.body.block.ops)))

    class Narrow(Interpreter):
        handlers = OpTable("narrow interpreter")

    with pytest.raises(FuseRuntimeError, match="the narrow interpreter cannot run"):
        Narrow(module, {"A": np.ones((2, 3)), "B": np.ones((3, 4))}, {}).run()


def test_plans_are_decoded_once_per_op_and_rebuilt_when_an_attribute_is_replaced():
    module = _module()
    op = _first(module, te.ContractOp)
    plan = contract_plan(op)
    assert contract_plan(op) is plan  # cached
    clear_plans()
    assert contract_plan(op) is not plan and contract_plan(op) == plan  # rebuilt, equal
    plan = contract_plan(op)
    assert (plan.names, plan.out, plan.projection, plan.projected) == (
        (("i", "j"), ("j", "k")),
        ("i", "k"),
        "sum",
        ("j",),
    )
    op.attributes["indices"] = te.str_array(["k", "i"])  # a pass rewriting the op in place
    again = contract_plan(op)
    assert again is not plan and again.out == ("k", "i")
    exp = map_plan(_first(module, te.MapOp))
    assert (exp.fn, exp.names, exp.out, exp.dtype) == ("exp", (("i",),), ("i",), np.dtype(np.float64))


def test_plans_do_not_keep_a_module_alive():
    module = _module()
    op = _first(module, te.ContractOp)
    contract_plan(op)
    dead = weakref.ref(op)
    del module, op
    gc.collect()
    assert dead() is None


def test_einsum_subscripts_name_letters_in_order_of_first_appearance():
    assert einsum_spec((("i", "j"), ("j", "k")), ("i", "k")) == "ab,bc->ac"
    assert einsum_spec((("k",), ("j", "k")), ()) == "a,ba->"
    assert einsum_spec((((0, "x"), "y"),), ("y", (0, "x"))) == "ab->ba"  # split names are hashable, not strings


def test_cached_plans_give_the_same_values_run_after_run():
    """The reference interpreter reading cached plans computes what a fresh module computes."""
    module = _module()
    rng = np.random.default_rng(0)
    arrays = {"A": rng.normal(size=(3, 4)), "B": rng.normal(size=(4, 5))}
    first = run_module(module, arrays, {}).exports
    second = run_module(module, arrays, {}).exports
    fresh = run_module(_module(), arrays, {}).exports
    for name in ("C", "S"):
        np.testing.assert_array_equal(first[name], second[name])
        np.testing.assert_array_equal(first[name], fresh[name])
    np.testing.assert_allclose(first["C"], arrays["A"] @ arrays["B"])
    np.testing.assert_allclose(first["S"], np.exp((arrays["A"] @ arrays["B"]).sum(axis=1)))
