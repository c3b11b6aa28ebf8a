"""Demand queries: ``runner.query(name, {axis: int | slice})`` evaluates only what ``name`` depends on.

Two rewrites of the tensor_eq module make the query program:

1. :func:`prune`: keep the backward slice of the op that defines ``name``
   (plus the extent checks among the kept tensors) and export only ``name``.
2. :func:`select_axis`: restrict one axis of the result to a position (the
   axis goes) or a set of positions (a slice). The selection is pushed from
   the result towards the inputs through every op where that axis is a
   *parallel* axis of the op: elementwise maps, casts, group sums, the kept
   (non-projected) indices of contractions and reductions, axis builtins
   along another axis, broadcasts of an existing axis, and plain-name
   accesses. So ``query("Y", {"i": 3})`` of ``Y[i] = W[i,j] X[j]`` reads row
   3 of W only. It stops (the op runs whole and its result is gathered) at
   ops where the axis is not parallel: a softmax/normalisation along that
   axis, concat, flatten, place, model blocks, generators, a broadcast that
   creates the axis, and accesses that read it through an offset, a
   diagonal or a gather.

The selected positions are not compiled in: each selection is a gather by a
run-time index input (a 0-d position, or a 1-d vector of positions for a
slice, computed from the slice and the axis's extent, so negative positions
and steps follow Python). One query program therefore serves every
selection of the same axes and kinds, and the llvm backend compiles it once
per (name, selected axes, int-or-slice kinds); an out-of-range position is
the gather's run-time error.

Results are cached per (name, selection) until an input changes. An input
counts as unchanged when it is the *same object* as last time, with the same
buffer address, shape and dtype, and the same CRC-32 over up to 4096 of its
elements spread evenly over it (all of them in smaller arrays). The check
costs the same whatever the array's size (a full checksum would cost as
much as reading the array, i.e. as much as many evaluations). So a new array
object always invalidates, even with equal contents; an in-place change is
noticed in arrays of up to 4096 elements, and in larger ones when it touches
a sampled element: after changing a large array in place, pass a copy or
call ``runner.clear_query_cache()``.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from fuse_mlir.diagnostics import FuseRuntimeError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frontend.lower import InputSpec, Lowered
from fuse_mlir.interp.shapes import infer_shapes

if TYPE_CHECKING:
    from fuse_mlir.program import Runner

_EXTENT_OPS = (te.DimOp, te.SliceLenOp)
_NOWHERE = Loc("<query>", 1, 1)


def defining_value(module: ModuleOp, name: str) -> SSAValue | None:
    """The value tensor ``name`` has in the module: its (last) group, or the input or source of that name."""
    found = None
    for op in module.body.block.ops:
        if isinstance(op, te.GroupOp | te.InputOp | te.SourceOp) and op.tensor_name.data == name:
            found = op.results[0]
    return found


def _closure(roots: list[Operation]) -> set[Operation]:
    seen: set[Operation] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        for v in op.operands:
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
    """The index names a value's producer gives its axes."""
    op = v.owner
    assert isinstance(op, Operation)
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


@dataclass
class QueryProgram:
    """A compiled query: the lowered module, its selection inputs per axis, and the program inputs it reads."""

    lowered: Lowered
    select_inputs: list[tuple[int, str, bool]]  # (axis position in the unselected result, input name, drop)
    needs: list[str]
    full: ModuleOp  # the pruned module before selection (for the extents of the selected axes)


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


def build_query(lowered: Lowered, name: str, axes: list[tuple[int, bool]]) -> QueryProgram:
    """The query program for ``name`` with the given (axis position, is-int) selections."""
    module, names = query_module(lowered.module, name, axes)
    specs = {s.name: s for s in lowered.inputs}
    needs = [
        op.tensor_name.data
        for op in module.body.block.ops
        if isinstance(op, te.InputOp) and op.tensor_name.data in specs
    ]
    inputs = [specs[n] for n in needs]
    inputs += [InputSpec(n, 0 if drop else 1, np.dtype(np.int64), _NOWHERE) for n, (_, drop) in zip(names, axes)]
    select_inputs = [(pos, n, drop) for n, (pos, drop) in zip(names, axes)]
    full, _ = prune(lowered.module, name)
    return QueryProgram(Lowered(module, inputs, [name], [], lowered.sources), select_inputs, needs, full)


FINGERPRINT_SAMPLES = 4096


def fingerprint(value: Any) -> tuple[object, ...]:
    """What decides whether a cached query result is still valid for one input (the cache rule, module docstring).

    The object's identity, its buffer's address, shape and dtype, and a CRC-32
    of at most :data:`FINGERPRINT_SAMPLES` elements evenly spread over the
    buffer (all of them in smaller arrays): constant cost, whatever the size.
    """
    arr = np.asarray(value)
    flat = arr.reshape(-1)
    if flat.size > FINGERPRINT_SAMPLES:
        flat = flat[:: -(-flat.size // FINGERPRINT_SAMPLES)]
    sample = np.ascontiguousarray(flat)
    address = arr.__array_interface__["data"][0]
    return id(value), address, arr.shape, arr.dtype.str, zlib.crc32(sample.view(np.uint8) if sample.size else b"")


@dataclass
class _Entry:
    fingerprints: dict[str, tuple[object, ...]]
    keep_alive: list[Any]  # the input objects, so their ids stay theirs while cached
    result: np.ndarray


class DemandCache:
    """A runner's query programs (per dtype signature, name and selection kinds) and cached results."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.programs: dict[tuple, QueryProgram] = {}
        self.results: dict[tuple, _Entry] = {}
        self.needs: dict[str, set[str]] = {}
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        """Forget every cached result (query programs stay compiled)."""
        self.results.clear()

    def _needed(self, name: str) -> set[str]:
        """The program inputs ``name`` depends on (independent of dtypes, so found once on the default lowering)."""
        hit = self.needs.get(name)
        if hit is None:
            module = self.runner.program.lower().module
            if defining_value(module, name) is None:
                known = sorted(
                    {op.tensor_name.data for op in module.body.block.ops if isinstance(op, te.GroupOp | te.InputOp)}
                )
                raise FuseRuntimeError(
                    f"cannot query '{name}': the program has no tensor of that name ({', '.join(known)})"
                )
            pruned, _ = prune(module, name)
            hit = self.needs[name] = {op.tensor_name.data for op in pruned.body.block.ops if isinstance(op, te.InputOp)}
        return hit

    def query(self, name: str, select: Mapping[str | int, int | slice], inputs: dict[str, Any]) -> np.ndarray:
        from fuse_mlir.program import coerce_input

        runner = self.runner
        all_specs = {s.name: s for s in runner.program.lower().inputs}
        unknown = sorted(set(inputs) - set(all_specs))
        if unknown:
            raise FuseRuntimeError(
                f"unknown input{'s' * (len(unknown) > 1)} {', '.join(unknown)}; "
                f"the program's inputs are: {', '.join(all_specs) or 'none'}"
            )
        arrays = {k: coerce_input(k, v, all_specs[k]) for k, v in inputs.items()}
        needed = self._needed(name)
        # Specialise on the dtypes of what the query reads only, so other inputs never cause a recompile.
        lowered = runner.program.lower({k: v.dtype for k, v in arrays.items() if k in needed})
        root = defining_value(lowered.module, name)
        assert root is not None
        axes = _selection(name, own_names(root), select)
        pkey = (id(lowered), name, tuple((p, isinstance(s, int)) for p, s in axes))
        qp = self.programs.get(pkey)
        if qp is None:
            qp = self.programs[pkey] = build_query(lowered, name, [(p, isinstance(s, int)) for p, s in axes])
        missing = [n for n in qp.needs if n not in arrays]
        if missing:
            raise FuseRuntimeError(
                f"{name} needs input{'s' * (len(missing) > 1)} {', '.join(missing)}", all_specs[missing[0]].loc
            )
        rkey = (id(lowered), name, tuple((p, _sel_key(s)) for p, s in axes))
        prints = {n: fingerprint(inputs[n]) for n in qp.needs}
        hit = self.results.get(rkey)
        if hit is not None and hit.fingerprints == prints:
            self.hits += 1
            return hit.result.copy()
        self.misses += 1
        run_arrays = {n: arrays[n] for n in qp.needs}
        if axes:
            shapes = infer_shapes(qp.full, {n: a.shape for n, a in run_arrays.items()}, lowered.sources)
            full_root = defining_value(qp.full, name)
            assert full_root is not None
            extents = shapes[full_root]
            if not isinstance(extents, tuple):
                raise FuseRuntimeError(f"cannot select axes of {name}: its shape is not known before the run")
            for (pos, sel), (_, iname, _) in zip(axes, qp.select_inputs):
                run_arrays[iname] = _positions(name, own_names(root)[pos], sel, extents[pos])
        result = runner.execute(qp.lowered, run_arrays).exports[name]
        self.results[rkey] = _Entry(prints, [inputs[n] for n in qp.needs], result)
        return result.copy()


def _sel_key(s: int | slice) -> object:
    return s if isinstance(s, int) else ("slice", s.start, s.stop, s.step)


def _selection(
    name: str, names: tuple[str, ...], select: Mapping[str | int, int | slice]
) -> list[tuple[int, int | slice]]:
    """The selection as (axis position, int or slice) in axis order; axes by index name or position."""
    out: dict[int, int | slice] = {}
    for axis, sel in select.items():
        if isinstance(axis, str):
            if axis not in names:
                raise FuseRuntimeError(f"{name} has no axis '{axis}' (its axes: {', '.join(names) or 'none'})")
            pos = names.index(axis)
        elif isinstance(axis, int | np.integer) and not isinstance(axis, bool) and -len(names) <= axis < len(names):
            pos = int(axis) % len(names)
        else:
            raise FuseRuntimeError(f"{name} has no axis {axis!r} (rank {len(names)})")
        if pos in out:
            raise FuseRuntimeError(f"axis {names[pos]} of {name} is selected twice")
        if isinstance(sel, np.integer):
            sel = int(sel)
        if not isinstance(sel, int | slice) or isinstance(sel, bool):
            raise FuseRuntimeError(f"select an axis with an int or a slice, not {sel!r}")
        if isinstance(sel, slice) and sel.step == 0:
            raise FuseRuntimeError("slice step cannot be zero")
        out[pos] = sel
    return sorted(out.items())


def _positions(name: str, axis: str, sel: int | slice, extent: int) -> np.ndarray:
    """The positions a selection picks on an axis of ``extent`` (Python indexing rules; an int is range-checked)."""
    if isinstance(sel, int):
        if not -extent <= sel < extent:
            raise FuseRuntimeError(f"position {sel} is out of range for axis {axis} of {name} (extent {extent})")
        return np.array(sel % extent, dtype=np.int64)
    return np.arange(extent, dtype=np.int64)[sel]
