"""The run trace behind ``runner.explain()``: per group (one left-hand side), iterations, time, kernels, FLOPs, bytes.

A tensor_eq module is emitted group by group: the ops computing a group's
contributions come right before its ``te.group`` op. :func:`segments` cuts
the module there, so every compute op belongs to exactly one group (ops
after the last group, such as sink expressions, form ``(sinks)``).

FLOPs and bytes are *static estimates* from the shapes of the run (inferred
from the input shapes, :mod:`fuse_mlir.interp.shapes`): a contraction costs
one multiply-add per point of its iteration space and operand (an n-way sum
contraction: per point of each pairwise step, in the order a shape plan
wrote on it or else the cheapest one, as the backends run it), an
elementwise map one op per result element, a reduction one per input
element; bytes are operand plus result bytes of each op (what an unfused
evaluation would move). Time per group is measured where the backend runs
op by op (the reference interpreter with ``compile(profile=True)``); a
native kernel is one function, so the llvm backend reports the whole call's
time and per-group estimates only. ``kernels`` counts the te ops of the
group. ``iterations`` is 1 per single-mode run; modes that iterate a group
(fixpoint) set it per group.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp.reference import Interpreter
from fuse_mlir.interp.shapes import infer_shapes, op_index_extents
from fuse_mlir.lowered import RunResult
from fuse_mlir.passes.transforms.contract_plan import is_nway, optimal_path, path_flops, path_of
from fuse_mlir.passes.transforms.monte_carlo import SAMPLES_ATTR

_BOOKKEEPING = te.STRUCTURAL_OPS
SINKS = "(sinks)"


@dataclass
class GroupTrace:
    """One group's share of a run; ``seconds`` is None where the backend cannot time groups separately."""

    name: str
    iterations: int = 1
    seconds: float | None = None
    kernels: int = 0
    flops: int = 0
    bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunTrace:
    """What one run did: backend, mode, total seconds, and a :class:`GroupTrace` per group in run order."""

    backend: str
    mode: str
    seconds: float
    groups: list[GroupTrace]
    notes: list[str] = field(default_factory=list)
    compile_seconds: float = 0.0
    """Time the call spent before running: lowering its dtype signature and building (or loading) the kernel;
    0 when both were cached by an earlier call."""
    contractions: list[dict[str, Any]] = field(default_factory=list)
    """Contraction orders chosen for the call's shapes and the BLAS calls made (loop-level backends;
    :func:`fuse_mlir.passes.transforms.contract_order.explain_contractions`)."""

    def group(self, name: str) -> GroupTrace:
        """The record of group ``name`` (KeyError if the run had none)."""
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "mode": self.mode,
            "seconds": self.seconds,
            "compile_seconds": self.compile_seconds,
            "flops": sum(g.flops for g in self.groups),
            "bytes": sum(g.bytes for g in self.groups),
            "groups": [asdict(g) for g in self.groups],
            "notes": list(self.notes),
            "contractions": list(self.contractions),
        }

    def text(self) -> str:
        lines = [
            f"run on {self.backend} ({self.mode} mode): {_secs(self.seconds)} run, "
            f"{_secs(self.compile_seconds)} compile, "
            f"{_num(sum(g.flops for g in self.groups))} FLOPs (est.), {_num(sum(g.bytes for g in self.groups))}B moved (est.)",
            f"{'group':<16} {'iters':>5} {'time':>10} {'kernels':>7} {'FLOPs':>9} {'bytes':>9}  extra",
        ]
        for g in self.groups:
            extra = ", ".join(f"{k}={v}" for k, v in g.extra.items())
            lines.append(
                f"{g.name:<16} {g.iterations:>5} {_secs(g.seconds):>10} {g.kernels:>7} {_num(g.flops):>9} "
                f"{_num(g.bytes):>9}  {extra}".rstrip()
            )
        if self.contractions:
            from fuse_mlir.passes.transforms.contract_plan import contraction_text

            lines += [f"contraction: {contraction_text(c)}" for c in self.contractions]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def render(self, format: str = "text") -> str | dict[str, Any]:
        """The trace as text or as a JSON-ready dict (``format`` text, json or json-text)."""
        if format == "text":
            return self.text()
        if format == "json":
            return self.to_json()
        if format == "json-text":
            return json.dumps(self.to_json(), indent=1)
        raise ValueError("format must be 'text', 'json' or 'json-text'")


def _secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.3f}ms" if s < 1 else f"{s:.3f}s"


def _num(n: int) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


def segments(module: ModuleOp) -> list[tuple[str, list[Operation]]]:
    """The module's compute ops cut into groups, in order: (group name, ops ending with its ``te.group``)."""
    out: list[tuple[str, list[Operation]]] = []
    pending: list[Operation] = []
    for op in module.body.block.ops:
        if isinstance(op, _BOOKKEEPING):
            continue
        pending.append(op)
        if isinstance(op, te.GroupOp):
            out.append((op.tensor_name.data, pending))
            pending = []
        elif isinstance(op, te.FixpointOp):  # a recursive group: its body's ops run once per iteration
            body = [o for o in op.body.block.ops if not isinstance(o, (*_BOOKKEEPING, te.YieldOp))]
            out.append((op.label.data, pending[:-1] + body))
            pending = []
    if pending:
        out.append((SINKS, pending))
    return out


def _size(shape: object) -> int:
    return int(math.prod(shape)) if isinstance(shape, tuple) else 0


def _nbytes(v: SSAValue, shape: object) -> int:
    try:
        return _size(shape) * te.dtype_of(v).itemsize
    except (AssertionError, TypeError):
        return 0


def op_cost(op: Operation, shapes: Mapping[SSAValue, object]) -> tuple[int, int]:
    """Estimated (FLOPs, bytes) of one te op given the shapes of its operands and results (0 where unknown)."""
    try:
        return _op_cost(op, shapes)
    except (KeyError, TypeError, ValueError):  # an op whose shapes the inference does not know
        return 0, 0


def _op_cost(op: Operation, shapes: Mapping[SSAValue, object]) -> tuple[int, int]:
    moved = sum(_nbytes(v, shapes.get(v)) for v in (*op.operands, *op.results) if v in shapes)
    out = _size(shapes.get(op.results[0])) if op.results else 0
    if isinstance(op, te.ContractOp):
        ext = op_index_extents(op, shapes)
        if is_nway(op):
            return _nway_flops(op, ext), moved
        return math.prod(ext.values()) * len(op.inputs), moved
    if isinstance(op, te.ReduceOp):
        return _size(shapes.get(op.input)), moved
    if isinstance(op, te.MapOp):
        return out, moved
    if isinstance(op, te.AxisOp):
        return 5 * out, moved
    if isinstance(op, te.GroupOp):
        return out * max(len(op.inputs) - 1, 0), moved
    if isinstance(op, te.BlockOp) and op.fn.data == "attention":
        q, k = (shapes.get(v) for v in op.inputs[:2])
        if isinstance(q, tuple) and isinstance(k, tuple) and q and k:
            return 4 * _size(q) * k[-2] + 5 * _size(q[:-1]) * k[-2], moved
    return 0, moved


def _nway_flops(op: te.ContractOp, ext: Mapping[str, int]) -> int:
    """An n-way sum contraction as the backends evaluate it: pairwise, in the order written on the op (by a shape
    plan) or else the cheapest one for these extents (not its whole iteration space, which no backend walks)."""
    names = te.names_of_each(op.operand_indices)
    out = te.names_of(op.indices)
    path = path_of(op)
    if path is None or len(path) != len(names) - 1:
        path, _ = optimal_path(names, out, ext, te.dtype_of(op.result).itemsize)
    return path_flops(names, out, ext, path)


def build_trace(
    module: ModuleOp,
    shapes: Mapping[SSAValue, object],
    *,
    backend: str,
    mode: str,
    seconds: float,
    op_seconds: Mapping[Operation, float] | None = None,
    iterations: Mapping[str, int] | None = None,
    group_extra: Mapping[str, Mapping[str, Any]] | None = None,
    notes: list[str] | None = None,
    compile_seconds: float = 0.0,
) -> RunTrace:
    """A trace of one run of ``module`` from its value shapes and, when measured, the time of each op.

    ``iterations`` and ``group_extra`` (by group name) come from modes that
    iterate groups (fixpoint: iterations, convergence, temperatures); a
    group's FLOPs and bytes count every iteration.
    """
    groups = []
    for name, ops in segments(module):
        g = GroupTrace(name, iterations=(iterations or {}).get(name, 1), kernels=len(ops))
        g.extra.update((group_extra or {}).get(name, {}))
        for op in ops:
            f, b = op_cost(op, shapes)
            g.flops += f
            g.bytes += b
            samples = op.attributes.get(SAMPLES_ATTR)
            if isinstance(samples, IntegerAttr):
                g.extra["samples"] = samples.value.data
        g.flops *= g.iterations  # the group's ops ran once per iteration
        g.bytes *= g.iterations
        if op_seconds is not None:
            g.seconds = sum(op_seconds.get(op, 0.0) for op in ops)
        groups.append(g)
    notes = list(notes or [])
    if op_seconds is None:
        notes.append(
            "per-group time is measured by the reference backend with compile(profile=True); seconds is the whole call"
            if backend == "reference"
            else "per-group time is not measured on this backend (one native call); seconds is the whole call"
        )
        if backend in ("torch", "jax", "numba"):
            notes.append(f"{backend} compiles inside its first call: that call's run time includes the compile")
    return RunTrace(backend, mode, seconds, groups, notes, compile_seconds)


class TracingInterpreter(Interpreter):
    """The reference interpreter, timing each op (for ``compile(profile=True)``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.op_seconds: dict[Operation, float] = {}

    def step(self, op: Operation) -> None:
        t0 = time.perf_counter()
        super().step(op)
        self.op_seconds[op] = time.perf_counter() - t0

    def shapes(self) -> dict[SSAValue, object]:
        return {v: (x.shape if isinstance(x, np.ndarray) else x) for v, x in self.env.items()}


@dataclass
class LastRun:
    """What a runner remembers of its last run to explain it later (the trace is built on demand)."""

    module: ModuleOp
    input_shapes: dict[str, tuple[int, ...]]
    sources: dict[str, np.ndarray]
    seconds: float
    backend: str
    mode: str
    shapes: dict[SSAValue, object] | None = None
    op_seconds: dict[Operation, float] | None = None
    iterations: dict[str, int] | None = None
    group_extra: dict[str, dict[str, Any]] | None = None
    notes: list[str] | None = None
    compile_seconds: float = 0.0
    contractions: Any = None  # () -> list of rows: the call's contraction orders and BLAS calls, built when asked

    def trace(self) -> RunTrace:
        shapes = self.shapes
        if shapes is None:
            shapes = infer_shapes(self.module, self.input_shapes, self.sources)
        trace = build_trace(
            self.module,
            shapes,
            backend=self.backend,
            mode=self.mode,
            seconds=self.seconds,
            op_seconds=self.op_seconds,
            iterations=self.iterations,
            group_extra=self.group_extra,
            notes=self.notes,
            compile_seconds=self.compile_seconds,
        )
        if self.contractions is not None:
            trace.contractions = self.contractions()
        return trace


def run_profiled(
    module: ModuleOp, arrays: dict[str, np.ndarray], sources: dict[str, np.ndarray]
) -> tuple[RunResult, dict[SSAValue, object], dict[Operation, float]]:
    """Run the reference interpreter timing every op; returns the result, value shapes and op times."""
    interp = TracingInterpreter(module, arrays, sources)
    result = interp.run()
    return result, interp.shapes(), interp.op_seconds
