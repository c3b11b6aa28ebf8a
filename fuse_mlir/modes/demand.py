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
   creates the axis, accesses that read it through an offset, a
   diagonal or a gather, and the results of a fixpoint loop (fixpoint
   mode: the loop runs whole; queries lower the program with the runner's
   own options, so its mode, limits and temperature schedules apply).

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

import weakref
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.diagnostics import FuseRuntimeError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frontend.parser import recursion_room
from fuse_mlir.interp.shapes import infer_shapes
from fuse_mlir.lowered import InputSpec, Lowered, LowerOptions, ProgramLowering, RunResult, coerce_input
from fuse_mlir.passes.transforms.demand import defining_value, own_names, prune, query_module


class QueryRunner(Protocol):
    """What demand queries need of a runner (:class:`~fuse_mlir.modes.runner.Runner`): its program's lowering
    and the call that runs one lowered module on validated arrays."""

    program: ProgramLowering
    options: LowerOptions | None  # the runner's mode and its settings: queries lower the program the same way

    def execute(self, lowered: Lowered, arrays: dict[str, np.ndarray]) -> RunResult:
        """Run ``lowered`` on ``arrays`` (after the runner's rewrite), recording it for explain()."""
        ...


_NOWHERE = Loc("<query>", 1, 1)


@dataclass
class QueryProgram:
    """A compiled query: the lowered module, its selection inputs per axis, and the program inputs it reads."""

    lowered: Lowered
    select_inputs: list[tuple[int, str, bool]]  # (axis position in the unselected result, input name, drop)
    needs: list[str]
    full: ModuleOp  # the pruned module before selection (for the extents of the selected axes)


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

    def __init__(self, runner: QueryRunner) -> None:
        self.runner = runner
        # Per lowering, held weakly (never by id(): a freed lowering's id is reused by the next one).
        self.programs: weakref.WeakKeyDictionary[Lowered, dict[tuple, QueryProgram]] = weakref.WeakKeyDictionary()
        self.results: weakref.WeakKeyDictionary[Lowered, dict[tuple, _Entry]] = weakref.WeakKeyDictionary()
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
            module = self.runner.program.lower(None, self.runner.options).module
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
        """``name`` restricted to ``select``, computed from ``inputs`` by a query program (cached, with its
        result, as the module docstring says). The query's passes walk the program's IR recursively (a long sum
        is a chain of ops as deep as it is long), so they run with the parser's recursion room."""
        with recursion_room():
            return self._query(name, select, inputs)

    def _query(self, name: str, select: Mapping[str | int, int | slice], inputs: dict[str, Any]) -> np.ndarray:

        runner = self.runner
        all_specs = {s.name: s for s in runner.program.lower(None, runner.options).inputs}
        unknown = sorted(set(inputs) - set(all_specs))
        if unknown:
            raise FuseRuntimeError(
                f"unknown input{'s' * (len(unknown) > 1)} {', '.join(unknown)}; "
                f"the program's inputs are: {', '.join(all_specs) or 'none'}"
            )
        arrays = {k: coerce_input(k, v, all_specs[k]) for k, v in inputs.items()}
        needed = self._needed(name)
        # Specialise on the dtypes of what the query reads only, so other inputs never cause a recompile.
        lowered = runner.program.lower({k: v.dtype for k, v in arrays.items() if k in needed}, runner.options)
        root = defining_value(lowered.module, name)
        assert root is not None
        axes = _selection(name, own_names(root), select)
        programs = self.programs.setdefault(lowered, {})
        pkey = (name, tuple((p, isinstance(s, int)) for p, s in axes))
        qp = programs.get(pkey)
        if qp is None:
            qp = programs[pkey] = build_query(lowered, name, [(p, isinstance(s, int)) for p, s in axes])
        missing = [n for n in qp.needs if n not in arrays]
        if missing:
            raise FuseRuntimeError(
                f"{name} needs input{'s' * (len(missing) > 1)} {', '.join(missing)}", all_specs[missing[0]].loc
            )
        results = self.results.setdefault(lowered, {})
        rkey = (name, tuple((p, _sel_key(s)) for p, s in axes))
        prints = {n: fingerprint(inputs[n]) for n in qp.needs}
        hit = results.get(rkey)
        if hit is not None and hit.fingerprints == prints:
            self.hits += 1
            return hit.result.copy()
        self.misses += 1
        run_arrays = {n: arrays[n] for n in qp.needs}
        if axes:
            shapes = infer_shapes(qp.full, {n: a.shape for n, a in run_arrays.items()}, lowered.sources, checks=True)
            full_root = defining_value(qp.full, name)
            assert full_root is not None
            extents = shapes[full_root]
            if not isinstance(extents, tuple):
                raise FuseRuntimeError(f"cannot select axes of {name}: its shape is not known before the run")
            for (pos, sel), (_, iname, _) in zip(axes, qp.select_inputs):
                run_arrays[iname] = _positions(name, own_names(root)[pos], sel, extents[pos])
        result = runner.execute(qp.lowered, run_arrays).exports[name]
        results[rkey] = _Entry(prints, [inputs[n] for n in qp.needs], result)
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
    """The positions a selection picks on an axis of ``extent`` (Python indexing rules; an int is range-checked),
    as a new contiguous array: a negative step's view has a negative stride, which backends that take arrays
    without copying (torch.from_numpy) refuse, and the selection inputs do not pass through ``coerce_input``."""
    if isinstance(sel, int):
        if not -extent <= sel < extent:
            raise FuseRuntimeError(f"position {sel} is out of range for axis {axis} of {name} (extent {extent})")
        return np.array(sel % extent, dtype=np.int64)
    return np.arange(extent, dtype=np.int64)[sel].copy()
