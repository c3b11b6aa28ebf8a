"""Streaming mode: virtual time ``*t`` (LANGUAGE.md §5); each runner call computes one time step.

``H[i,*t+1] = relu(W[i,j] H[j,*t] + U[i,k] X[k,*t+1])`` defines H one step at
a time. Within an equation, a reference's *lag* is the left-hand side's time
offset minus its own (``H[j,*t]`` above has lag 1: the previous step's H;
``X[k,*t+1]`` lag 0: this step's X). The program is rewritten once into an
ordinary per-step program: the time axis is dropped from every reference, a
lag-0 reference names the tensor itself, and a reference with lag d > 0
names the extra input ``H[t-d]``, which the runner fills from a ring buffer
holding the last ``window = max lag`` values of each tensor. Because the step
program is an ordinary tensor_eq module, every backend runs it unchanged.

A call passes the per-step inputs: tensors indexed by ``*t`` but defined by
no equation are given one step at a time (without their time axis), the
others whole. The first steps' history comes from ``runner.reset(H=...)``
(or ``H=...`` in a call): one value of the per-step shape for window 1, or
a stack of ``window`` values (oldest first) with a leading axis. History never
given is zero (the zero-fill of offsets at the start of an axis), of the
tensor's own dtype (found as fixpoint mode finds a recursive tensor's); for a
computed tensor its per-step shape must then follow from the other inputs
through the program's extent checks, else the call says which initial value
is missing. A call returns the exports of this step.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.frontend import ast as A
from fuse_mlir.frontend.lower import tensor_refs
from fuse_mlir.frontend.resolve import Resolved
from fuse_mlir.lowered import InputSpec, coerce_input
from fuse_mlir.modes.runner import ProgramLowering, ResolvedProgram, Runner


def state_name(name: str, lag: int) -> str:
    """The step program's input holding ``name`` from ``lag`` steps back."""
    return f"{name}[t-{lag}]"


def _time_item(ref: A.TensorRef) -> tuple[int, A.IndexName | A.IndexOffset] | None:
    found = None
    for k, item in enumerate(ref.indices or ()):
        if isinstance(item, A.IndexName | A.IndexOffset) and item.time:
            if found is not None:
                raise FuseError(f"{ref.name} has two virtual-time indices; one is allowed", item.loc)
            found = (k, item)
    return found


def _offset(item: A.IndexName | A.IndexOffset) -> int:
    return item.offset if isinstance(item, A.IndexOffset) else 0


@dataclass
class StreamPlan:
    """The per-step program and what the runner must keep between steps."""

    resolved: Resolved
    time_axis: dict[str, int]  # tensor -> position of its time axis in the source program
    window: dict[str, int]  # tensor -> how many past values the step program reads
    defined: set[str]  # time tensors computed by equations (others are per-step inputs)
    user_exports: list[str] | None  # the program's own export list (None: every group)
    reads: dict[str, frozenset[str]] = field(default_factory=dict)  # tensor -> what its step equations read now
    boolean: frozenset[str] = frozenset()  # tensors defined in the parenthesised (boolean) form


def plan(resolved: Resolved) -> StreamPlan:
    """Rewrite a resolved program with ``*t`` indices into its per-step program (FuseError if it is not one)."""
    time_axis: dict[str, tuple[int, Loc]] = {}
    uses: dict[str, Loc] = {}
    window: dict[str, int] = {}
    defined = {eq.lhs.name for eq in resolved.equations}

    def note_axis(ref: A.TensorRef, k: int) -> None:
        if ref.name in time_axis and time_axis[ref.name][0] != k:
            raise FuseError(
                f"{ref.name} has its virtual-time index at position {k} here but {time_axis[ref.name][0]} elsewhere",
                ref.loc,
                [("first here", time_axis[ref.name][1])],
            )
        time_axis.setdefault(ref.name, (k, ref.loc))

    lhs_offsets: dict[str, tuple[int, Loc]] = {}
    rewritten: list[A.Equation] = []
    reads: dict[str, set[str]] = {}
    for eq in resolved.equations:
        lt = _time_item(eq.lhs)
        refs = tensor_refs(eq.rhs) + (tensor_refs(eq.guard) if eq.guard is not None else [])
        timed = [(r, _time_item(r)) for r in refs]
        if lt is None:
            for r, t in timed:
                if t is not None:
                    raise FuseError(
                        f"{eq.lhs.name} reads virtual time ({r.name}[..*{t[1].name}..]) but its left-hand side has no "
                        f"time index; write {eq.lhs.name}[..., *{t[1].name}]",
                        t[1].loc,
                    )
                uses.setdefault(r.name, r.loc)
            rewritten.append(eq)
            continue
        k, litem = lt
        note_axis(eq.lhs, k)
        off = _offset(litem)
        prev = lhs_offsets.setdefault(eq.lhs.name, (off, eq.loc))
        if prev[0] != off:
            raise FuseError(
                f"the equations of {eq.lhs.name} define different time steps (*{litem.name}{off:+d} here)",
                eq.loc,
                [("and here", prev[1])],
            )
        lags: dict[int, int] = {}
        for r, t in timed:
            if t is None:
                uses.setdefault(r.name, r.loc)
                continue
            rk, item = t
            if item.name != litem.name:
                raise FuseError(
                    f"virtual time *{item.name} differs from the left-hand side's *{litem.name}; one clock per equation",
                    item.loc,
                )
            note_axis(r, rk)
            lag = off - _offset(item)
            if lag < 0:
                raise FuseError(
                    f"{r.name} is read {-lag} step{'s' * (-lag > 1)} ahead of the step {eq.lhs.name} defines; "
                    "streaming reads only the present and the past",
                    item.loc,
                )
            lags[id(r)] = lag
            if lag:
                window[r.name] = max(window.get(r.name, 0), lag)
        reads.setdefault(eq.lhs.name, set()).update(r.name for r in refs if not lags.get(id(r)))
        rewritten.append(
            dataclasses.replace(
                eq,
                lhs=_drop_time(eq.lhs, None),
                rhs=_rewrite(eq.rhs, lags),
                guard=_rewrite(eq.guard, lags) if eq.guard is not None else None,
            )
        )
    for name, loc in uses.items():
        if name in time_axis:
            raise FuseError(f"{name} is indexed by virtual time elsewhere but used without it here", loc)
    for sink in resolved.sinks:
        for r in tensor_refs(sink.rhs):
            if _time_item(r) is not None:
                raise FuseError("a sink writes the current step: drop the virtual-time index from it", r.loc)
    exports = list(resolved.exports)
    user_exports = [n for n, _ in exports] if exports else None
    if exports:
        have = {n for n, _ in exports}
        exports += [(n, resolved.equations[0].loc) for n in window if n in defined and n not in have]
    step = dataclasses.replace(resolved, equations=rewritten, exports=exports)
    return StreamPlan(
        step,
        {n: k for n, (k, _) in time_axis.items()},
        window,
        defined & set(time_axis),
        user_exports,
        {n: frozenset(r) for n, r in reads.items()},
        frozenset(eq.lhs.name for eq in resolved.equations if eq.lhs.boolean),
    )


def _drop_time(ref: A.TensorRef, lag: int | None) -> A.TensorRef:
    items = tuple(i for i in ref.indices or () if not (isinstance(i, A.IndexName | A.IndexOffset) and i.time))
    name = state_name(ref.name, lag) if lag else ref.name
    return dataclasses.replace(ref, name=name, indices=items)


def _rewrite(x: Any, lags: Mapping[int, int]) -> Any:
    """A copy of an expression with time indices dropped and lagged references renamed to their state inputs."""
    if isinstance(x, A.TensorRef):
        out = _drop_time(x, lags.get(id(x))) if id(x) in lags else x
        items = tuple(
            dataclasses.replace(i, expr=_rewrite(i.expr, lags)) if isinstance(i, A.IndexTensor) else i
            for i in out.indices or ()
        )
        return dataclasses.replace(out, indices=items) if out.indices is not None else out
    if isinstance(x, tuple):
        return tuple(_rewrite(y, lags) for y in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        changes = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            if isinstance(v, tuple) or (dataclasses.is_dataclass(v) and not isinstance(v, type)):
                nv = _rewrite(v, lags)
                if nv is not v:
                    changes[f.name] = nv
        return dataclasses.replace(x, **changes) if changes else x
    return x


def _export_dtypes(lowered: Any) -> dict[str, np.dtype]:
    """Each export's dtype in a lowered step program."""
    op = next(op for op in lowered.module.body.block.ops if isinstance(op, te.ExportOp))
    return {n.data: te.dtype_of(v) for n, v in zip(op.names.data, op.values)}


def _state_shapes(lowered: Any, arrays: Mapping[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    """The per-step shape of every state input (not given in ``arrays``) that the extent checks tie to the
    given inputs (:func:`~fuse_mlir.interp.shapes.tied_extents`, one walk of the lowered step program).

    The checks tie extents together (``k`` of a state to the left-hand side's ``k``, that to an input's):
    each class of tied extents that holds a given input's extent gives it to every state axis in it.
    """
    from fuse_mlir.interp.shapes import tied_extents

    tied = tied_extents(lowered.module, {k: v.shape for k, v in arrays.items()}, lowered.sources)
    found: dict[str, tuple[int, ...]] = {}
    for spec in lowered.inputs:
        if spec.name in arrays:
            continue
        roots = [tied.get(("axis", spec.name, k), ("axis",)) for k in range(spec.rank)]
        if all(r[0] == "int" for r in roots):
            found[spec.name] = tuple(r[1] for r in roots)
    return found


def _zero_history_shapes(
    step: ProgramLowering, arrays: Mapping[str, np.ndarray], window: Mapping[str, int]
) -> dict[str, tuple[int, ...]]:
    """The shape of every state input a call does not give, where the given ``arrays`` decide it.

    First the states the extent checks tie to the given inputs (:func:`_state_shapes`); then each tensor
    computed this step gives its value's shape to its own states, until nothing changes: ``T4[k, *t] =
    T3[k, *t-1]`` reads T3's history in an equation that ties it to no input, while T3's own ``T3[k, *t] =
    X[k, *t]`` gives it the shape of X. A group's shape comes from the contributions whose shapes are known
    (every contribution has the group's indices), so a term reading the unknown history itself does not hide
    it; contributions whose shapes disagree decide nothing (the step's own checks report them).
    """
    from fuse_mlir.interp.contraction import broadcast_shape
    from fuse_mlir.interp.shapes import infer_shapes

    lowered = step.lower({k: v.dtype for k, v in arrays.items()})
    base = {state_name(n, d): n for n, w in window.items() for d in range(1, w + 1)}
    shapes: dict[str, tuple[int, ...]] = {k: v.shape for k, v in arrays.items()}
    shapes.update(_state_shapes(lowered, arrays))
    for _ in range(len(lowered.inputs) + 1):
        unknown = [s.name for s in lowered.inputs if s.name not in shapes and s.name in base]
        if not unknown:
            break
        env = infer_shapes(lowered.module, shapes, lowered.sources)
        groups: dict[str, tuple[int, ...]] = {}
        for op in lowered.module.body.block.ops:
            if isinstance(op, te.GroupOp):  # a contribution that reads the unknown history is unknown: the others
                known: list[tuple[int, ...]] = [t for v in op.inputs if isinstance(t := env.get(v), tuple)]
                try:
                    if known:
                        groups[op.tensor_name.data] = tuple(broadcast_shape(*known))
                except ValueError:
                    continue
        new = {n: groups[base[n]] for n in unknown if base[n] in groups}
        if not new:
            break
        shapes.update(new)
    return {n: v for n, v in shapes.items() if n in base and n not in arrays}


@dataclass
class StreamingRunner(Runner):
    """A runner whose calls advance virtual time one step, keeping each tensor's window of past values."""

    plan: StreamPlan | None = field(default=None, repr=False)
    step_runner: Runner | None = field(default=None, repr=False)
    history: dict[str, deque] = field(default_factory=dict, repr=False)
    time: int = 0

    @classmethod
    def create(
        cls, program: ResolvedProgram, backend: str, out_root: Path, executor: Any, *, rewrite: Any, profile: bool
    ) -> StreamingRunner:
        p = plan(program.resolved)
        step = program.with_resolved(p.resolved)
        inner = Runner(step, backend, out_root, executor, mode="streaming", profile=profile, rewrite=rewrite)
        runner = cls(program, backend, out_root, executor, mode="streaming", profile=profile, plan=p)
        runner.step_runner = inner
        runner.reset()
        return runner

    @property
    def compile_stats(self) -> dict[str, float]:
        """The compile stages of the step program (it is what compiles), as :attr:`Runner.compile_stats`."""
        return self.step_runner.compile_stats if self.step_runner is not None else super().compile_stats

    def input_specs(self) -> dict[str, InputSpec]:
        """Each input one step takes (a stream input's slice at the step, so its rank is one less than the
        program's tensor), without the history the runner keeps itself."""
        assert self.plan is not None and self.step_runner is not None
        if self._specs is not None:
            return self._specs
        step = self.step_runner.input_specs()
        state = {state_name(n, d) for n, w in self.plan.window.items() for d in range(1, w + 1)}
        specs = {n: s for n, s in step.items() if n not in state}
        # An input read only from earlier steps (Y[*t] = X[*t-1]) is still given at every step, to be kept.
        for name, w in self.plan.window.items():
            if name in self.plan.defined or name in specs:
                continue
            lag = next((step[state_name(name, d)] for d in range(1, w + 1) if state_name(name, d) in step), None)
            if lag is not None:
                specs[name] = dataclasses.replace(lag, name=name)
        self._specs = specs
        return specs

    def query(self, name: str, select: Mapping[str | int, int | slice] | None = None, /, **inputs: Any) -> np.ndarray:
        """Demand queries evaluate a whole program once; a step depends on the runner's history, so none here."""
        raise FuseRuntimeError("query() is not available in streaming mode: call the runner to advance a step")

    def reset(self, /, **initial: Any) -> None:
        """Restart at time 0; ``initial`` gives the history (window) of tensors read from earlier steps."""
        assert self.plan is not None
        self.time = 0
        self.history = {n: deque(maxlen=w) for n, w in self.plan.window.items()}
        self._set_history(initial)

    def _set_history(self, initial: Mapping[str, Any]) -> None:
        assert self.plan is not None
        for name, value in initial.items():
            w = self.plan.window.get(name)
            if w is None:
                raise FuseRuntimeError(
                    f"{name} is not read from an earlier step, so it takes no initial value "
                    f"(tensors with history: {', '.join(sorted(self.plan.window)) or 'none'})"
                )
            arr = np.asarray(value)
            rank = self._step_rank(name)
            if rank is not None and arr.ndim == rank + 1:
                if arr.shape[0] != w:
                    raise FuseRuntimeError(f"initial {name} stacks {arr.shape[0]} steps but its window is {w}")
                values = list(arr)
            elif rank is None or arr.ndim == rank:
                values = [arr] * w if w == 1 else [np.zeros_like(arr)] * (w - 1) + [arr]
            else:
                raise FuseRuntimeError(
                    f"initial {name} must have rank {rank} (one step) or {rank + 1} (a stack of {w}) "
                    f"but has shape {arr.shape}"
                )
            self.history[name] = deque(values, maxlen=w)

    def _step_rank(self, name: str) -> int | None:
        assert self.step_runner is not None and self.plan is not None
        states = {state_name(name, d) for d in range(1, self.plan.window[name] + 1)}
        spec = next((s for s in self.step_runner.program.lower().inputs if s.name in states), None)
        return spec.rank if spec is not None else None

    def run(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        write_sinks: bool = True,
        out: Mapping[str, Any] | None = None,
    ) -> dict[str, np.ndarray]:
        """Compute the next time step from this step's inputs and the kept history; returns its exports.

        ``out`` (export name → caller array) receives this step's exports, as for any runner.
        """
        assert self.plan is not None and self.step_runner is not None
        given = dict(inputs or {})
        initial = {k: given.pop(k) for k in list(given) if k in self.plan.defined}
        # A time input read only from earlier steps is history, not an input of this step's program: it is
        # checked here (the step checks its own inputs), and then kept.
        step_inputs = set(self.step_runner.input_names())
        specs = self.input_specs()
        for name in self.plan.window:
            if name in self.plan.defined or name in step_inputs or name not in specs:
                continue
            if name not in given:
                raise FuseRuntimeError(f"missing input {name}", specs[name].loc)
            given[name] = coerce_input(name, given[name], specs[name])
        if initial:
            self._set_history(initial)
        arrays = {k: v for k, v in given.items() if k in step_inputs or k not in self.plan.window}
        missing: list[tuple[str, int]] = []
        for name, w in self.plan.window.items():
            past = self.history[name]
            for d in range(1, w + 1):
                if state_name(name, d) not in step_inputs:  # a lag the program does not read (w = the largest)
                    continue
                if len(past) >= d:
                    arrays[state_name(name, d)] = past[-d]
                else:
                    missing.append((name, d))
        if missing:  # zero history before the steps that compute it: shapes and dtypes decided once per call
            computed = any(name in self.plan.defined for name, _ in missing)
            dtypes = self._history_dtypes(given, step_inputs) if computed else {}
            step_specs = self.step_runner.input_specs()  # (an input of the wrong rank is named before any history)
            known = {k: coerce_input(k, v, step_specs[k]) for k, v in arrays.items() if k in step_specs}
            shapes = _zero_history_shapes(self.step_runner.program, known, self.plan.window) if computed else {}
            for name, d in missing:
                arrays[state_name(name, d)] = self._zeros(name, d, given, dtypes, shapes)
        result = self.step_runner.run(arrays, write_sinks=write_sinks, out=out)
        self._last = self.step_runner._last_run()
        for name in self.plan.window:
            value = given[name] if name not in self.plan.defined else result[name]
            self.history[name].append(np.array(value))
        self.time += 1
        if self.plan.user_exports is not None:
            return {n: result[n] for n in self.plan.user_exports}
        return result

    def _zeros(
        self,
        name: str,
        lag: int,
        given: Mapping[str, Any],
        dtypes: Mapping[str, np.dtype],
        shapes: Mapping[str, tuple[int, ...]],
    ) -> np.ndarray:
        """Zero history for ``name`` read ``lag`` steps back before that step was computed: shaped like this
        step's value (``shapes``, from :func:`_zero_history_shapes`), of the dtype the tensor itself has
        (``dtypes``, from :meth:`_history_dtypes`)."""
        assert self.step_runner is not None and self.plan is not None
        if name not in self.plan.defined:
            return np.zeros_like(np.asarray(given[name]))  # given: run() checked it
        shape = shapes.get(state_name(name, lag))
        if shape is None:
            state = self.step_runner.input_specs().get(state_name(name, lag))
            raise FuseRuntimeError(
                f"{name} is read from step t-{lag} before any step computed it: give its initial value with "
                f"runner.reset({name}=...) or {name}=... in the first call",
                state.loc if state is not None else None,
            )
        return np.zeros(shape, dtype=dtypes[name])

    def _history_dtypes(self, given: Mapping[str, Any], step_inputs: set[str]) -> dict[str, np.dtype]:
        """The dtype of each computed tensor's zero history: the dtype the tensor has itself, so that a step
        computed from zeros keeps it (a float32 recurrence stays float32, an int32 counter int32).

        As fixpoint mode carries a recursive tensor: start from the promoted dtype of the given inputs its
        step equations read (literals are weak; float64 when it reads none; int8 for a boolean tensor) and
        widen while a step computed from that history promotes further.
        """
        assert self.step_runner is not None and self.plan is not None
        plan = self.plan
        input_dtypes = {k: np.asarray(v).dtype for k, v in given.items() if k in step_inputs}
        names = sorted(n for n in plan.window if n in plan.defined)
        dtypes: dict[str, np.dtype] = {}
        for n in names:
            read = [input_dtypes[r] for r in sorted(plan.reads.get(n, ())) if r in input_dtypes]
            base = np.result_type(*read) if read else np.dtype(np.float64)
            dtypes[n] = np.dtype(np.int8) if n in plan.boolean else base
        # a time input's history has its own dtype (it is given every step)
        known = {n: np.asarray(given[n]).dtype for n in plan.window if n not in plan.defined and n in given}
        for _ in range(8):
            carried = {**known, **dtypes}
            states = {
                state_name(n, d): dt
                for n, dt in carried.items()
                for d in range(1, plan.window[n] + 1)
                if state_name(n, d) in step_inputs
            }
            got = _export_dtypes(self.step_runner.program.lower({**input_dtypes, **states}))
            new = {n: dtypes[n] if n in plan.boolean else np.result_type(dtypes[n], got[n]) for n in names}
            if new == dtypes:
                return dtypes
            dtypes = new
        raise FuseRuntimeError(f"cannot settle the dtypes of the streamed tensors {', '.join(names)}")
