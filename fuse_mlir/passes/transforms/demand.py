"""The ``demand`` pass: keep only what one tensor needs, and push axis selections into its producers.

This is the rewrite behind ``runner.query`` (docs/modes.md, demand), exposed
to ``fuse-opt`` to inspect: the module becomes the backward slice of
``tensor``'s definition, exporting only it; each axis listed in ``select``
is restricted by a run-time int64 input ``select:k`` (``axis=int``: a 0-d
position, the axis goes; ``axis=slice``: a vector of positions), pushed
through maps, contractions over other indices, group sums and plain reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.passes.analysis import AnalysisManager
from fuse_mlir.passes.base import FusePass, option
from fuse_mlir.passes.registry import register_pass

_EXTENT_OPS = (te.DimOp, te.SliceLenOp)


def defining_value(module: ModuleOp, name: str) -> SSAValue | None:
    """The value tensor ``name`` has in the module: its (last) group, the result of the ``te.fixpoint`` that
    carries it (fixpoint mode: a recursive tensor's group is inside the loop's body), or the input or source of
    that name."""
    found: SSAValue | None = None
    for op in module.body.block.ops:
        if isinstance(op, te.GroupOp | te.InputOp | te.SourceOp) and op.tensor_name.data == name:
            found = op.results[0]
        elif isinstance(op, te.FixpointOp) and name in (names := te.names_of(op.names)):
            found = op.carried[names.index(name)]
    return found


def _closure(roots: list[Operation]) -> set[Operation]:
    """The ops ``roots`` depend on, through their operands and the operands of the ops in their regions (a
    ``te.fixpoint`` body reads values defined outside it)."""
    seen: set[Operation] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        for inner in op.walk():
            for v in inner.operands:
                if isinstance(v.owner, Operation):
                    stack.append(v.owner)
    return seen


def prune(module: ModuleOp, name: str) -> tuple[ModuleOp, SSAValue]:
    """A new module with only what ``name`` depends on (and the extent checks among it); returns it and its value."""
    root = defining_value(module, name)
    if root is None:
        raise KeyError(name)
    assert isinstance(root.owner, Operation)
    keep = _closure([root.owner])
    tensors = {op for op in keep if not isinstance(op, _EXTENT_OPS) and op.results and _is_tensor(op.results[0])}
    for op in module.body.block.ops:
        if isinstance(op, te.CheckDimOp):
            deps = _closure([op])
            if all(d in tensors or not (d.results and _is_tensor(d.results[0])) for d in deps):
                keep |= deps
    mapper: dict[SSAValue, SSAValue] = {}
    ops = [op.clone(value_mapper=mapper) for op in module.body.block.ops if op in keep]
    return ModuleOp(ops), mapper[root]


def _is_tensor(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType)


def own_names(v: SSAValue) -> tuple[str, ...]:
    """The index names a value's producer gives its axes (a ``te.fixpoint`` result: its initial value's)."""
    op = v.owner
    assert isinstance(op, Operation)
    if isinstance(op, te.FixpointOp):
        return own_names(op.inits[list(op.carried).index(v)])
    return te.names_of(op.attributes["indices"])


@dataclass
class _Selector:
    """Pushes one axis selection from a value towards the inputs (see the module docstring)."""

    block: Any
    index: SSAValue  # 0-d (drop the axis) or 1-d (keep it, restricted) int64 positions
    drop: bool
    memo: dict[tuple[SSAValue, int], SSAValue] = field(default_factory=dict)

    def select(self, v: SSAValue, pos: int) -> SSAValue:
        key = (v, pos)
        if key not in self.memo:
            self.memo[key] = self._push(v, pos) or self._gather(v, pos)
        return self.memo[key]

    def _type(self, v: SSAValue, pos: int) -> TensorType:
        shape = list(v.type.get_shape())  # type: ignore[attr-defined]
        if self.drop:
            del shape[pos]
        else:
            shape[pos] = te.DYNAMIC
        return te.tensor_type(te.dtype_of(v), shape)

    def _names(self, names: tuple[str, ...], a: str) -> list[str]:
        return [n for n in names if n != a] if self.drop else list(names)

    def _insert(self, new: Operation, old: Operation) -> SSAValue:
        for k, val in old.attributes.items():
            new.attributes.setdefault(k, val)
        self.block.insert_op_after(new, old)
        return new.results[0]

    def _gather(self, v: SSAValue, pos: int) -> SSAValue:
        # A value's own names may be place positions (#0) or slice texts: typed axes keep them plain names.
        names = own_names(v)
        a = names[pos]
        axes = [te.AccessAxisAttr.gather(0) if k == pos else te.AccessAxisAttr.named(n) for k, n in enumerate(names)]
        op = te.AccessOp(
            v,
            axes,
            self._names(names, a),
            self._type(v, pos),
            gathers=[self.index],
            gather_indices=[[] if self.drop else [a]],
        )
        owner = v.owner
        assert isinstance(owner, Operation)
        self.block.insert_op_after(op, owner)
        return op.result

    def _operands(self, op: Operation, each: tuple[tuple[str, ...], ...], a: str) -> list[SSAValue]:
        return [self.select(v, ns.index(a)) if a in ns else v for v, ns in zip(op.operands, each)]

    def _each(self, each: tuple[tuple[str, ...], ...], a: str) -> list[list[str]]:
        return [self._names(ns, a) for ns in each]

    def _push(self, v: SSAValue, pos: int) -> SSAValue | None:
        op = v.owner
        if not isinstance(op, Operation) or len(op.results) != 1:
            return None
        names = own_names(v)
        a = names[pos]
        out = self._names(names, a)
        rt = self._type(v, pos)
        new: Operation
        match op:
            case te.MapOp():
                each = te.names_of_each(op.operand_indices)
                new = te.MapOp(op.fn.data, self._operands(op, each, a), self._each(each, a), out, rt)
            case te.ContractOp():
                each = te.names_of_each(op.operand_indices)
                new = te.ContractOp(self._operands(op, each, a), self._each(each, a), out, op.projection.data, rt)
            case te.ReduceOp():
                each = te.names_of_each(op.operand_indices)
                new = te.ReduceOp(op.kind.data, self._operands(op, each, a)[0], self._each(each, a)[0], out, rt)
            case te.AxisOp() if op.axis.data != a:
                each = te.names_of_each(op.operand_indices)
                new = te.AxisOp(op.fn.data, op.axis.data, self._operands(op, each, a), self._each(each, a), out, rt)
            case te.BroadcastOp() if a in te.names_of_each(op.operand_indices)[0]:
                each = te.names_of_each(op.operand_indices)
                new = te.BroadcastOp(self._operands(op, each, a)[0], list(op.extents), self._each(each, a)[0], out, rt)
            case te.GroupOp():
                inputs = [self.select(x, pos) for x in op.inputs]
                new = te.GroupOp(op.tensor_name.data, inputs, out, op.boolean.value.data, rt)
            case te.CastOp():
                new = te.CastOp(self.select(op.input, pos), out, rt)
            case te.AccessOp():
                axes = op.axis_list()
                gathered = {n for ns in te.names_of_each(op.gather_indices) for n in ns}
                plain = [k for k, x in enumerate(axes) if x == te.AccessAxisAttr.named(a)]
                shifted = any(x.axis_kind == te.AxisKind.OFFSET and x.index_name == a for x in axes)
                if len(plain) != 1 or a in gathered or shifted:
                    return None
                src = self.select(op.source, plain[0])
                new_axes = [x for k, x in enumerate(axes) if not (self.drop and k == plain[0])]
                new = te.AccessOp(
                    src,
                    new_axes,
                    out,
                    rt,
                    gathers=list(op.gathers),
                    gather_indices=te.names_of_each(op.gather_indices),
                    extents=list(op.extents),
                )
            case _:
                return None
        return self._insert(new, op)


def select_axis(module: ModuleOp, root: SSAValue, pos: int, index: SSAValue, drop: bool) -> SSAValue:
    """Restrict axis ``pos`` of ``root`` to the positions in ``index`` (0-d: drop the axis), pushed towards inputs."""
    return _Selector(module.body.block, index, drop).select(root, pos)


def remove_dead(module: ModuleOp) -> None:
    """Erase pure ops whose results nobody uses (inputs and sources stay: they are the program's arguments)."""
    for op in reversed(list(module.body.block.ops)):
        if isinstance(op, te.InputOp | te.SourceOp | te.CheckDimOp | te.ExportOp | te.SinkOp):
            continue
        if op.results and all(not r.uses for r in op.results):
            op.detach()
            op.erase()


def query_module(module: ModuleOp, name: str, axes: list[tuple[int, bool]]) -> tuple[ModuleOp, list[str]]:
    """The query module for ``name`` with (axis position, is-int) selections, and its selection input names.

    Selection k reads the run-time input ``select:k``: a 0-d int64 position
    for an int (the axis goes), a 1-d int64 vector of positions for a slice.
    """
    pruned, root = prune(module, name)
    block = pruned.body.block
    first = block.first_op
    names = []
    current = list(range(len(own_names(root))))  # original axis positions still in the result, in order
    for k, (pos, drop) in enumerate(axes):
        iname = f"select:{k}"
        inp = te.InputOp(iname, [] if drop else [f"select{k}"], te.tensor_type(np.int64, [] if drop else [te.DYNAMIC]))
        block.insert_op_before(inp, first)
        root = select_axis(pruned, root, current.index(pos), inp.result, drop)
        if drop:
            current.remove(pos)
        names.append(iname)
    block.add_op(te.ExportOp([root], [name]))
    remove_dead(pruned)
    pruned.verify()
    return pruned, names


@register_pass
@dataclass(frozen=True)
class Demand(FusePass):
    """Prune the module to what ``tensor`` depends on and push the ``select``ed axes of it into its producers.

    ``select`` lists ``axis=int`` or ``axis=slice`` (axis: an index name of
    the tensor), comma-separated; each becomes a run-time gather input
    ``select:k``. Ops where the axis is not parallel (a softmax along it,
    concat, blocks, offsets, ...) run whole and their result is gathered.
    """

    name = "demand"
    level: ClassVar[str] = "tensor_eq"
    example: ClassVar[str | None] = """\
builtin.module {
  %w = te.input "W" {indices = ["i", "j"]} : tensor<?x?xf64>
  %x = te.input "X" {indices = ["j"]} : tensor<?xf64>
  %v = te.input "V" {indices = ["k"]} : tensor<?xf64>
  %y = te.contract %w, %x {operand_indices = [["i", "j"], ["j"]], indices = ["i"], projection = #te.projection<sum>} : (tensor<?x?xf64>, tensor<?xf64>) -> tensor<?xf64>
  %r = te.map "relu" %y {operand_indices = [["i"]], indices = ["i"]} : (tensor<?xf64>) -> tensor<?xf64>
  %g = te.group "Y" %r {indices = ["i"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  %z = te.map "exp" %v {operand_indices = [["k"]], indices = ["k"]} : (tensor<?xf64>) -> tensor<?xf64>
  %h = te.group "Z" %z {indices = ["k"], boolean = false} : (tensor<?xf64>) -> tensor<?xf64>
  te.export %g, %h {names = ["Y", "Z"]} : tensor<?xf64>, tensor<?xf64>
}
"""
    example_pipeline: ClassVar[str | None] = 'demand{tensor=Y select="i=int"}'

    tensor: str = option("", help="the tensor to compute (a group, input or source name)")
    select: str = option("", help="comma-separated axis=int|slice selections of the tensor's axes")

    def run(self, ctx: Context, module: ModuleOp, analyses: AnalysisManager) -> bool:
        root = defining_value(module, self.tensor)
        if root is None:
            raise FuseError(f"demand: the module defines no tensor '{self.tensor}'")
        names = own_names(root)
        axes: list[tuple[int, bool]] = []
        for part in filter(None, (p.strip() for p in self.select.split(","))):
            axis, _, kind = part.partition("=")
            if axis not in names or kind not in ("int", "slice"):
                raise FuseError(
                    f"demand: bad selection '{part}': expected axis=int or axis=slice with axis one of "
                    f"{', '.join(names) or '(none: the tensor is 0-d)'}"
                )
            if any(names[p] == axis for p, _ in axes):
                raise FuseError(f"demand: axis {axis} is selected twice")
            axes.append((names.index(axis), kind == "int"))
        new, _ = query_module(module, self.tensor, axes)
        block = module.body.block
        for op in list(block.ops):
            op.detach()
        for op in list(new.body.block.ops):
            op.detach()
            block.add_op(op)
        for op in reversed(list(new.body.block.ops)):
            op.erase()
        return True
