"""Frozen IR (fuse_mlir.frozen) and the freeze pass: interning, keys, constants, effects, pickling, depth."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import Float64Type, IndexType, MemRefType
from xdsl.ir import Block

from fuse_mlir import Program
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frozen import FrozenGraph, FrozenNode, freeze_block, module_key, thaw
from fuse_mlir.ir import make_context
from fuse_mlir.passes.freeze import Freeze
from fuse_mlir.passes.lower_te_to_ew import LowerTeToEw

F64 = Float64Type()


def ew_module(src: str):
    module = Program(src).lower().module.clone()
    LowerTeToEw().apply(make_context(), module)
    return module


def bodies(module) -> list[Block]:
    return [op.body.block for op in module.walk() if isinstance(op, ew.GenericOp)]


def test_equal_bodies_are_one_object_whatever_their_names():
    blocks = bodies(ew_module("A[i] = exp(X[i]) * 2\nB[j] = exp(Y[j]) * 2\nexport A, B"))
    a, b = blocks[0], blocks[len(blocks) // 2]
    ga, gb = freeze_block(a)[0], freeze_block(b)[0]
    assert ga is gb and hash(ga) == hash(gb) and ga == gb
    other = freeze_block(bodies(ew_module("A[i] = sqrt(X[i]) * 2\nexport A"))[0])[0]
    assert other is not ga and other != ga


def test_freezing_merges_equal_pure_ops():
    block = bodies(ew_module("Y[i] = exp(X[i]) * exp(X[i])"))[0]
    graph, free = freeze_block(block)
    names = [node.name for node, _ in graph.nodes]
    assert names.count("math.exp") <= 1


def test_freeze_twice_pickle_and_thaw_give_the_identical_object():
    block = bodies(ew_module("Y[i] = sqrt(exp(X[i]) + 1) * X[i]"))[0]
    graph, free = freeze_block(block)
    again, _ = freeze_block(block)
    assert again is graph
    assert pickle.loads(pickle.dumps(graph)) is graph
    node = graph.nodes[0][0]
    assert pickle.loads(pickle.dumps(node)) is node
    thawed = thaw(graph, free)
    assert freeze_block(thawed)[0] is graph
    assert freeze_block(thawed)[0].hexdigest == graph.hexdigest


def _const_graph(values: np.ndarray):
    block = Block()
    block.add_op(te.ConstantOp(values, ["i"]))
    return freeze_block(block)[0]


def test_constants_compare_by_dtype_shape_and_bytes():
    nan = _const_graph(np.array([np.nan, 1.0]))
    assert _const_graph(np.array([np.nan, 1.0])) is nan  # NaN equals NaN
    assert _const_graph(np.array([0.0])) is not _const_graph(np.array([-0.0]))  # 0.0 differs from -0.0
    assert _const_graph(np.array([1.0], np.float32)) is not _const_graph(np.array([1.0]))
    assert _const_graph(np.zeros((2, 2))) is not _const_graph(np.zeros(4))


def test_allocations_are_keyed_on_their_position():
    block = Block()
    n = arith.ConstantOp.from_int_and_width(5, IndexType())
    block.add_op(n)
    t = MemRefType(F64, [-1])
    a = loop.AllocOp([n.result], t)
    b = loop.AllocOp([n.result], t)
    block.add_op(a)
    block.add_op(b)
    graph, _ = freeze_block(block)
    assert len(graph) == 3  # two allocations stay two
    block2 = Block()
    n2 = arith.ConstantOp.from_int_and_width(5, IndexType())
    block2.add_op(n2)
    c = arith.ConstantOp.from_int_and_width(5, IndexType())
    block2.add_op(c)
    assert len(freeze_block(block2)[0]) == 1  # pure twins merge


def test_deep_bodies_hit_no_recursion_limit():
    block = Block(arg_types=[F64])
    v = block.args[0]
    for _ in range(sys.getrecursionlimit() * 3):
        op = arith.AddfOp(v, block.args[0])
        block.add_op(op)
        v = op.result
    graph, _ = freeze_block(block)
    assert len(graph) == sys.getrecursionlimit() * 3
    assert freeze_block(thaw(graph))[0] is graph


def test_keys_are_the_same_in_every_process():
    src = "E[i] = exp(X[i]) * Y[i]\nS = sum(E[i])\nexport S"
    here = module_key(ew_module(src))
    code = (
        "from tests.test_frozen import ew_module; from fuse_mlir.frozen import module_key;"
        f"print(module_key(ew_module({src!r})))"
    )
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        assert out.stdout.strip() == here


def test_freeze_pass_is_idempotent_and_stamps_keys():
    module = ew_module("A[i] = exp(X[i]) * exp(X[i])\nB[i] = exp(X[i]) * exp(X[i])\nexport A, B")
    Freeze().apply(make_context(), module)
    keys = [op.attributes["body_key"].data for op in module.walk() if isinstance(op, ew.GenericOp)]
    text = str(module)
    Freeze().apply(make_context(), module)
    assert str(module) == text
    assert len(set(keys)) < len(keys)


def test_frozen_objects_are_not_made_directly():
    with pytest.raises(TypeError):
        FrozenNode()
    with pytest.raises(TypeError):
        FrozenGraph()
