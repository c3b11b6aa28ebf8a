"""Building fused ``ew.generic`` kernels: inline a producer into a consumer, merge two sibling kernels.

These are the two body-surgery steps the ``fuse`` pass decides between; they
check nothing about legality (the pass does) and return a new kernel that the
caller places and wires. They move the bodies of the kernels they are given
(which the caller then erases) rather than copy them. Inputs with the same value and map, and tables with
the same value, are shared in the merged kernel, so a value read by both
halves is loaded once per iteration point.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, SSAValue

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.dialects.locations import loc_text


class _Operands:
    """The inputs (with maps) and tables of a kernel under construction, shared when equal."""

    def __init__(self) -> None:
        self.inputs: list[SSAValue] = []
        self.maps: list[tuple[int, ...]] = []
        self.tables: list[SSAValue] = []

    def input(self, v: SSAValue, m: tuple[int, ...]) -> int:
        for k, (w, mm) in enumerate(zip(self.inputs, self.maps)):
            if w == v and mm == m:
                return k
        self.inputs.append(v)
        self.maps.append(m)
        return len(self.inputs) - 1

    def table(self, v: SSAValue) -> int:
        if v in self.tables:
            return self.tables.index(v)
        self.tables.append(v)
        return len(self.tables) - 1


def _copy_body(
    src: Block,
    dst: Block,
    args: Sequence[SSAValue],
    dims: Sequence[int],
) -> list[SSAValue]:
    """Move ``src``'s ops (not its yield) to the end of ``dst`` with its arguments bound to ``args`` and its
    dim d renamed ``dims[d]``; return the yielded values.

    The ops are moved, not cloned: both callers erase the source kernels right
    after, and cloning made fusing a chain of n kernels copy O(n^2) ops (a sum
    of a thousand terms took half a minute). ``src`` is left without a yield.
    """
    for old, new in zip(src.args, args):
        old.replace_all_uses_with(new)  # nested regions included
    for op in list(src.ops):
        if isinstance(op, ew.YieldOp):
            return list(op.values)
        op.detach()
        if isinstance(op, ew.IndexOp):
            renamed = ew.IndexOp(dims[op.dim.value.data])
            op.result.replace_all_uses_with(renamed.result)
            op.erase()
            op = renamed
        dst.add_op(op)
    raise ValueError("kernel body without ew.yield")


def inline_producer(
    producer: ew.GenericOp,
    consumer: ew.GenericOp,
    slots: dict[int, int],
    keep: Sequence[int] = (),
) -> ew.GenericOp:
    """``consumer`` with ``producer``'s computation inlined: input slot s of the consumer reads producer
    result ``slots[s]``, all through one map.

    ``keep`` lists producer results that stay results of the fused kernel
    (after the consumer's own), for values used outside the group; that needs
    the consumer to be a pure map reading the producer through the identity
    map, which the caller checks.
    """
    into = consumer.map_list()[next(iter(slots))]  # producer dim d -> consumer dim into[d]
    ops = _Operands()
    c_maps, p_maps = consumer.map_list(), producer.map_list()
    c_in = {k: ops.input(v, c_maps[k]) for k, v in enumerate(consumer.inputs) if k not in slots}
    p_in = [ops.input(v, tuple(into[d] for d in p_maps[k])) for k, v in enumerate(producer.inputs)]
    c_tab = [ops.table(v) for v in consumer.tables]
    p_tab = [ops.table(v) for v in producer.tables]
    region, block = ew.GenericOp.make_body(ops.inputs, ops.tables)
    nin = len(ops.inputs)
    produced = _copy_body(
        producer.body.block,
        block,
        [block.args[i] for i in p_in] + [block.args[nin + t] for t in p_tab],
        into,
    )
    c_args = [produced[slots[k]] if k in slots else block.args[c_in[k]] for k in range(len(consumer.inputs))]
    c_args += [block.args[nin + t] for t in c_tab]
    yielded = _copy_body(consumer.body.block, block, c_args, range(len(consumer.extents)))
    block.add_op(ew.YieldOp([*yielded, *(produced[k] for k in keep)]))
    types = [r.type for r in consumer.outputs] + [producer.outputs[k].type for k in keep]
    kinds = consumer.kind_list() + ["none"] * len(keep)
    return ew.GenericOp(
        ops.inputs,
        ops.tables,
        list(consumer.extents),
        ops.maps,
        consumer.iterator_list(),
        kinds,
        region,
        types,
        loc_text(consumer),
    )


def merge_siblings(first: ew.GenericOp, second: ew.GenericOp) -> ew.GenericOp:
    """One kernel computing the results of ``first`` then ``second`` (same extents and iterators)."""
    ops = _Operands()
    ins = [[ops.input(v, m) for v, m in zip(k.inputs, k.map_list())] for k in (first, second)]
    tabs = [[ops.table(v) for v in k.tables] for k in (first, second)]
    region, block = ew.GenericOp.make_body(ops.inputs, ops.tables)
    nin = len(ops.inputs)
    dims = range(len(first.extents))
    yielded: list[SSAValue] = []
    for kernel, i, t in zip((first, second), ins, tabs):
        args = [block.args[p] for p in i] + [block.args[nin + p] for p in t]
        yielded += _copy_body(kernel.body.block, block, args, dims)
    block.add_op(ew.YieldOp(yielded))
    types: list[TensorType] = [r.type for k in (first, second) for r in k.outputs]
    return ew.GenericOp(
        ops.inputs,
        ops.tables,
        list(first.extents),
        ops.maps,
        first.iterator_list(),
        first.kind_list() + second.kind_list(),
        region,
        types,
        loc_text(first) or loc_text(second),
    )
