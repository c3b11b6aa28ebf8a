"""Frozen IR (fuse_mlir.frozen) and the freeze pass: interning, keys, constants, effects, pickling, depth."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float64Type, IndexType, MemRefType
from xdsl.ir import Block

from fuse_mlir import Program
from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frozen import FrozenGraph, FrozenNode, freeze_block, module_key, thaw
from fuse_mlir.ir import make_context
from fuse_mlir.passes.conversions.lower_te_to_ew import LowerTeToEw
from fuse_mlir.passes.transforms.freeze import Freeze

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


def _two_kernels(first: str, second: str) -> str:
    """A module with two kernels over X whose bodies list the ops ``first`` and ``second`` (each a list of lines)."""
    head = (
        'builtin.module {\n  %x = te.input "X" {indices = ["i"]} : tensor<?xf64>\n'
        "  %n = te.dim %x, 0 : i64 : tensor<?xf64>\n"
    )
    kernel = (
        "  %{out} = ew.generic ins(%x : tensor<?xf64>) tables(:) extents(%n) attributes {{maps = [[0]], "
        "iterators = [#ew.iterator<parallel>], kind = [#ew.kind<none>]}} -> tensor<?xf64> {{\n  ^bb0(%v: f64):\n{body}  }}\n"
    )
    tail = '  te.export %a, %b {names = ["A", "B"]} : tensor<?xf64>, tensor<?xf64>\n}\n'
    return head + kernel.format(out="a", body=first) + kernel.format(out="b", body=second) + tail


EXP_SIN = "    %e = math.exp %v : f64\n    %s = math.sin %v : f64\n"
SIN_EXP = "    %s = math.sin %v : f64\n    %e = math.exp %v : f64\n"
ADD_YIELD = "    %p = arith.addf %e, %s : f64\n    ew.yield %p : f64\n"


def test_order_of_independent_ops_does_not_change_the_key():
    from fuse_mlir.ir import parse_mlir

    module = parse_mlir(_two_kernels(EXP_SIN + ADD_YIELD, SIN_EXP + ADD_YIELD))
    a, b = bodies(module)
    assert freeze_block(a)[0] is freeze_block(b)[0]
    # operand order is semantic: e + s and s + e are different bodies
    swapped = parse_mlir(_two_kernels(EXP_SIN + ADD_YIELD, EXP_SIN + ADD_YIELD.replace("%e, %s", "%s, %e")))
    a, b = bodies(swapped)
    assert freeze_block(a)[0] is not freeze_block(b)[0]


def test_dedup_merges_kernels_that_differ_only_in_op_order():
    from fuse_mlir.ir import parse_mlir
    from fuse_mlir.passes.transforms.dedup import Dedup

    for second in (SIN_EXP + ADD_YIELD, EXP_SIN + ADD_YIELD):
        module = parse_mlir(_two_kernels(EXP_SIN + ADD_YIELD, second))
        Dedup().apply(make_context(), module)
        assert len(bodies(module)) == 1
    Freeze().apply(make_context(), module := parse_mlir(_two_kernels(EXP_SIN + ADD_YIELD, SIN_EXP + ADD_YIELD)))
    keys = {op.attributes["body_key"].data for op in module.walk() if isinstance(op, ew.GenericOp)}
    assert len(keys) == 1


def test_outside_values_are_numbered_by_dataflow_not_listing_order():
    def block(order: list[str]) -> tuple[FrozenGraph, list]:
        outer = Block(arg_types=[F64, F64])
        p, q = outer.args
        inner = Block(arg_types=[F64])
        ops = {"p": arith.MulfOp(p, inner.args[0]), "q": arith.SubfOp(q, inner.args[0])}
        for k in order:
            inner.add_op(ops[k])
        inner.add_op(add := arith.AddfOp(ops["p"].result, ops["q"].result))
        inner.add_op(ew.YieldOp(add.result))
        graph, free = freeze_block(inner)
        return graph, [outer.args.index(v) for v in free]

    g1, f1 = block(["p", "q"])
    g2, f2 = block(["q", "p"])
    assert g1 is g2 and f1 == f2 == [0, 1]


def test_dead_pure_ops_do_not_make_the_key_depend_on_order():
    def block(order: list[str]) -> FrozenGraph:
        b = Block(arg_types=[F64])
        ops = {"exp": math.ExpOp(b.args[0]), "sin": math.SinOp(b.args[0]), "cos": math.CosOp(b.args[0])}
        for k in order:
            b.add_op(ops[k])
        b.add_op(ew.YieldOp(ops["cos"].result))
        return freeze_block(b)[0]

    assert block(["exp", "sin", "cos"]) is block(["cos", "sin", "exp"]) is block(["sin", "cos", "exp"])


def test_effectful_ops_keep_their_order():
    def block(swap: bool) -> FrozenGraph:
        b = Block()
        n = arith.ConstantOp.from_int_and_width(5, IndexType())
        m = arith.ConstantOp.from_int_and_width(6, IndexType())
        b.add_op(n)
        b.add_op(m)
        t = MemRefType(F64, [-1])
        allocs = [loop.AllocOp([n.result], t), loop.AllocOp([m.result], t)]
        for op in reversed(allocs) if swap else allocs:
            b.add_op(op)
        return freeze_block(b)[0]

    assert block(False) is not block(True)
    assert [n.name for n, _ in block(False).nodes].count("loop.alloc") == 2


def test_frozen_nodes_and_graphs_are_immutable():
    graph, _ = freeze_block(bodies(ew_module("Y[i] = exp(X[i]) * 2"))[0])
    node = graph.nodes[0][0]
    before = (graph.nodes, graph.digest, node.key)
    for obj, field in ((graph, "nodes"), (graph, "digest"), (graph, "key"), (node, "regions"), (node, "key")):
        with pytest.raises(AttributeError):
            setattr(obj, field, ())
        with pytest.raises(AttributeError):
            delattr(obj, field)
    with pytest.raises(AttributeError):
        graph.extra = 1  # no new attributes either
    assert (graph.nodes, graph.digest, node.key) == before
    assert freeze_block(bodies(ew_module("Y[i] = exp(X[i]) * 2"))[0])[0] is graph


def test_threads_freezing_equal_bodies_get_one_object():
    import threading

    fns = ("exp", "sin", "cos")
    blocks = [bodies(ew_module(f"Y[i] = {fns[k % 3]}(X[i]) + sqrt(X[i])"))[0] for k in range(12)]
    out: list = [None] * len(blocks)
    barrier = threading.Barrier(len(blocks))

    def work(k: int) -> None:
        barrier.wait()
        out[k] = freeze_block(blocks[k])[0]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(blocks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(g) for g in out}) == 3


def test_order_independent_keys_are_the_same_in_every_process():
    from fuse_mlir.ir import parse_mlir

    text = _two_kernels(EXP_SIN + ADD_YIELD, SIN_EXP + ADD_YIELD)
    here = {freeze_block(b)[0].hexdigest for b in bodies(parse_mlir(text))}
    assert len(here) == 1
    code = (
        "import sys; from tests.test_frozen import bodies; from fuse_mlir.ir import parse_mlir;"
        "from fuse_mlir.frozen import freeze_block;"
        "print(sorted({freeze_block(b)[0].hexdigest for b in bodies(parse_mlir(sys.stdin.read()))}))"
    )
    for seed in ("0", "1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", code], input=text, capture_output=True, text=True, env=env, check=True
        )
        assert out.stdout.strip() == str(sorted(here))
