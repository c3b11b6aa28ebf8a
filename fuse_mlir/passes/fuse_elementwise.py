"""Producer-consumer fusion of elemwise kernels: a map feeding one kernel is inlined into that kernel's body.

A pure map (an ``ew.generic`` with no reduction dims) whose result has
exactly one use, as a *mapped* input of another ``ew.generic``, disappears:
its body is cloned into the consumer's body (its iteration dims renamed to
the consumer's through the consumer's map of that input), its inputs and
tables join the consumer's (identical input/map pairs are merged), and its
``ew.yield`` value replaces the consumer's block argument. Repeated to a
fixed point this turns chains of maps and a final reduction into one loop
nest with no temporaries: ``sum(exp(x) * y + z)`` becomes one kernel, and so
do softmax's exp-shift-divide stages that feed one consumer.

The single-use rule keeps every group convex (the producer's inputs are all
defined before it, hence before the consumer) and never duplicates work.
Values used more than once, or by a contraction, stay materialised. The
``max-operands`` option bounds a fused kernel's inputs plus tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from fuse_mlir.dialects import elemwise as ew
from fuse_mlir.passes.registry import register_pass


def _mapped_uses(value: SSAValue) -> list[tuple[ew.GenericOp, int]]:
    """(consumer, input position) for each use of ``value`` as a mapped generic input; [] if any other use."""
    out = []
    for use in value.uses:
        op = use.operation
        if not isinstance(op, ew.GenericOp):
            return []
        n_in = len(op.inputs)
        if use.index >= n_in:
            return []  # used as a table or an extent
        out.append((op, use.index))
    return out


def fuse_pair(producer: ew.GenericOp, consumer: ew.GenericOp, slot: int) -> ew.GenericOp:
    """The consumer with the producer's computation inlined for its input ``slot``."""
    c_maps = consumer.map_list()
    into = c_maps[slot]  # producer dim d -> consumer dim into[d]
    p_block = producer.body.block
    c_block = consumer.body.block

    inputs: list[SSAValue] = []
    maps: list[tuple[int, ...]] = []
    tables: list[SSAValue] = []

    def add_input(v: SSAValue, m: tuple[int, ...]) -> int:
        for k, (w, mm) in enumerate(zip(inputs, maps)):
            if w == v and mm == m:
                return k
        inputs.append(v)
        maps.append(m)
        return len(inputs) - 1

    def add_table(v: SSAValue) -> int:
        if v in tables:
            return tables.index(v)
        tables.append(v)
        return len(tables) - 1

    c_in_pos = {k: add_input(v, c_maps[k]) for k, v in enumerate(consumer.inputs) if k != slot}
    p_in_pos = {
        k: add_input(v, tuple(into[d] for d in m))
        for k, v in enumerate(producer.inputs)
        for m in [producer.map_list()[k]]
    }
    c_tab_pos = {k: add_table(v) for k, v in enumerate(consumer.tables)}
    p_tab_pos = {k: add_table(v) for k, v in enumerate(producer.tables)}

    region, block = ew.GenericOp.make_body(inputs, tables)
    nin = len(inputs)
    vmap: dict[SSAValue, SSAValue] = {}
    for k, arg in enumerate(p_block.args):
        if k < len(producer.inputs):
            vmap[arg] = block.args[p_in_pos[k]]
        else:
            vmap[arg] = block.args[nin + p_tab_pos[k - len(producer.inputs)]]
    produced: SSAValue | None = None
    for op in p_block.ops:
        if isinstance(op, ew.YieldOp):
            produced = vmap.get(op.value, op.value)
            break
        if isinstance(op, ew.IndexOp):
            new: Operation = ew.IndexOp(into[op.dim.value.data])
        else:
            new = op.clone(value_mapper=vmap)
        block.add_op(new)
        for a, b in zip(op.results, new.results):
            vmap[a] = b
    assert produced is not None
    cmap: dict[SSAValue, SSAValue] = {}
    for k, arg in enumerate(c_block.args):
        if k == slot:
            cmap[arg] = produced
        elif k < len(consumer.inputs):
            cmap[arg] = block.args[c_in_pos[k]]
        else:
            cmap[arg] = block.args[nin + c_tab_pos[k - len(consumer.inputs)]]
    for op in c_block.ops:
        new = op.clone(value_mapper=cmap)
        block.add_op(new)
        for a, b in zip(op.results, new.results):
            cmap[a] = b
    return ew.GenericOp(
        inputs,
        tables,
        list(consumer.extents),
        maps,
        consumer.iterator_list(),
        consumer.kind.data,
        region,
        consumer.result.type,  # type: ignore[arg-type]
        consumer.loc.data if consumer.loc else "",
    )


@register_pass
@dataclass(frozen=True)
class FuseElementwise(ModulePass):
    """Fuse single-use elementwise maps into their consuming kernels (maps and reductions)."""

    name = "fuse-elementwise"
    level: ClassVar[str] = "elemwise"

    max_operands: int = 32

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        changed = True
        while changed:
            changed = False
            for producer in list(op.walk()):
                if not isinstance(producer, ew.GenericOp) or producer.parent is None or len(producer.outputs) != 1:
                    continue
                if "reduction" in producer.iterator_list():
                    continue
                uses = _mapped_uses(producer.result)
                if len(uses) != 1:
                    continue
                consumer, slot = uses[0]
                if len(consumer.outputs) != 1:
                    continue
                if consumer.parent_block() is not producer.parent_block():
                    continue
                width = len(consumer.inputs) + len(consumer.tables) + len(producer.inputs) + len(producer.tables) - 1
                if width > self.max_operands:
                    continue
                fused = fuse_pair(producer, consumer, slot)
                block = consumer.parent_block()
                assert block is not None
                block.insert_op_before(fused, consumer)
                consumer.result.replace_all_uses_with(fused.result)
                consumer.detach()
                consumer.erase()
                producer.detach()
                producer.erase()
                changed = True
