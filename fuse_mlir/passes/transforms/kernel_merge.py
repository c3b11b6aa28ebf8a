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
from xdsl.ir import Block, Operation, Region, SSAValue

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
    before: Operation | None = None,
) -> list[SSAValue]:
    """Move ``src``'s ops (not its yield) to the end of ``dst`` (or before ``before``) with its arguments bound
    to ``args`` and its dim d renamed ``dims[d]``; return the yielded values.

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
        if before is None:
            dst.add_op(op)
        else:
            dst.insert_op_before(op, before)
    raise ValueError("kernel body without ew.yield")


def _smaller(a: Block, b: Block) -> bool:
    """Whether ``a`` has fewer ops than ``b``, in time proportional to the smaller of the two."""
    ia, ib = iter(a.ops), iter(b.ops)
    while True:
        if next(ia, None) is None:
            return next(ib, None) is not None
        if next(ib, None) is None:
            return False


def _at_least(block: Block, n: int) -> bool:
    """Whether ``block`` has ``n`` ops or more (counting at most ``n``)."""
    return sum(1 for _ in zip(range(n), block.ops)) == n


HOST_PRODUCER_OPS = 64
"""A producer body this large hosts a consumer of at most a quarter of its size (smaller ones move as before, so
the fused kernel's operand order is the usual one: the consumer's inputs first)."""


def _unique(inputs: Sequence[SSAValue], maps: Sequence[tuple[int, ...]], tables: Sequence[SSAValue]) -> bool:
    return len(set(zip(inputs, maps))) == len(inputs) and len(set(tables)) == len(tables)


def _add_args(block: Block, at: int, inputs: Sequence[SSAValue], tables: Sequence[SSAValue]) -> None:
    """Give a host body arguments for the operands it gains: ``inputs`` from position ``at`` (after its own
    inputs), ``tables`` at the end (after its own tables)."""
    for k, v in enumerate(inputs):
        block.insert_arg(ew.signless(v.type.element_type), at + k)  # type: ignore[attr-defined]
    for v in tables:
        block.insert_arg(v.type, len(block.args))


def _hosted_by_consumer(
    producer: ew.GenericOp, consumer: ew.GenericOp, slots: dict[int, int], keep: Sequence[int], into: Sequence[int]
) -> tuple[_Operands, Region] | None:
    """The fused body built in the consumer's block: the producer's ops move in front of the consumer's. The
    operands come in the order :func:`_moving_both` gives them (the consumer's first), so the IR is the same."""
    c_block, n_c = consumer.body.block, len(consumer.inputs)
    rest = [k for k in range(n_c) if k not in slots]
    ops = _Operands()
    c_maps = consumer.map_list()
    ops.inputs, ops.maps, ops.tables = (
        [consumer.inputs[k] for k in rest],
        [c_maps[k] for k in rest],
        list(consumer.tables),
    )
    if not _unique(ops.inputs, ops.maps, ops.tables):
        return None
    slot_args = {k: c_block.args[k] for k in slots}
    p_in = [ops.input(v, tuple(into[d] for d in m)) for v, m in zip(producer.inputs, producer.map_list())]
    p_tab = [ops.table(v) for v in producer.tables]
    new_in = ops.inputs[len(rest) :]
    _add_args(c_block, n_c, new_in, ops.tables[len(consumer.tables) :])  # slot arguments stay until erased below
    args = list(c_block.args)  # [consumer inputs, new inputs, consumer tables, new tables]
    in_args = [args[k] for k in rest] + args[n_c : n_c + len(new_in)]
    tab_args = args[n_c + len(new_in) :]
    first = c_block.first_op
    assert first is not None
    produced = _copy_body(
        producer.body.block, c_block, [in_args[i] for i in p_in] + [tab_args[t] for t in p_tab], into, before=first
    )
    for k, arg in slot_args.items():
        arg.replace_all_uses_with(produced[slots[k]])
        c_block.erase_arg(arg)
    if keep:
        old = c_block.last_op
        assert isinstance(old, ew.YieldOp)
        c_block.add_op(ew.YieldOp([*old.values, *(produced[k] for k in keep)]))
        old.detach()
        old.erase()
    return ops, consumer.detach_region(consumer.body)


def _hosted_by_producer(
    producer: ew.GenericOp, consumer: ew.GenericOp, slots: dict[int, int], keep: Sequence[int]
) -> tuple[_Operands, Region] | None:
    """The fused body built in the producer's block (the producer's dims are the consumer's): the consumer's
    ops move after the producer's. The producer's operands come first."""
    p_block = producer.body.block
    ops = _Operands()
    ops.inputs, ops.maps, ops.tables = list(producer.inputs), producer.map_list(), list(producer.tables)
    if not _unique(ops.inputs, ops.maps, ops.tables):
        return None
    c_maps = consumer.map_list()
    c_in = {k: ops.input(v, c_maps[k]) for k, v in enumerate(consumer.inputs) if k not in slots}
    c_tab = [ops.table(v) for v in consumer.tables]
    n_p = len(producer.inputs)
    _add_args(p_block, n_p, ops.inputs[n_p:], ops.tables[len(producer.tables) :])
    args = list(p_block.args)
    in_args, tab_args = args[: len(ops.inputs)], args[len(ops.inputs) :]
    old = p_block.last_op
    assert isinstance(old, ew.YieldOp)
    produced = list(old.values)
    old.detach()
    old.erase()
    c_args = [produced[slots[k]] if k in slots else in_args[c_in[k]] for k in range(len(consumer.inputs))]
    yielded = _copy_body(
        consumer.body.block, p_block, c_args + [tab_args[t] for t in c_tab], range(len(consumer.extents))
    )
    p_block.add_op(ew.YieldOp([*yielded, *(produced[k] for k in keep)]))
    return ops, producer.detach_region(producer.body)


def _inline_in_place(
    producer: ew.GenericOp, consumer: ew.GenericOp, slots: dict[int, int], keep: Sequence[int], into: Sequence[int]
) -> tuple[_Operands, Region] | None:
    """:func:`inline_producer`'s body built in the larger kernel's own block, which keeps its ops where they
    are: only the smaller body's ops move. Fusing a chain of n kernels into one moved the growing body at
    every step, O(n^2) ops (a sum of 1500 terms: 34 s in this step); now each step costs the smaller body.
    None where the in-place form does not apply (then :func:`_moving_both` builds it)."""
    p_block, c_block = producer.body.block, consumer.body.block
    if not _smaller(c_block, p_block):
        return _hosted_by_consumer(producer, consumer, slots, keep, into)
    # The producer hosts only a much smaller consumer, and only where its dims are the consumer's (no renaming
    # inside the large body).
    if not _at_least(p_block, HOST_PRODUCER_OPS) or _at_least(c_block, HOST_PRODUCER_OPS // 4 + 1):
        return None
    if tuple(into) != tuple(range(len(consumer.extents))) or len(producer.extents) != len(consumer.extents):
        return None
    return _hosted_by_producer(producer, consumer, slots, keep)


def _moving_both(
    producer: ew.GenericOp, consumer: ew.GenericOp, slots: dict[int, int], keep: Sequence[int], into: Sequence[int]
) -> tuple[_Operands, Region]:
    """The fused body built in a new block that both bodies move into (the producer's ops first)."""
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
    return ops, region


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
    types = [r.type for r in consumer.outputs] + [producer.outputs[k].type for k in keep]
    kinds = consumer.kind_list() + ["none"] * len(keep)
    ops, region = _inline_in_place(producer, consumer, slots, keep, into) or _moving_both(
        producer, consumer, slots, keep, into
    )
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
