"""The llvm backend's executor: tensor_eq → elemwise → (fusion) → loop → LLVM → machine code, cached.

One native kernel is built per tensor_eq module (that is, per program and
input dtype signature; extents stay symbolic). Kernels are cached in memory
by the sha256 of the module's text plus the backend options, so two programs
with the same structure share one kernel and a second call compiles nothing.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr

from fuse_mlir.backends.llvm.parallel import resolve as resolve_threads
from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.diagnostics import Loc
from fuse_mlir.frontend.lower import Lowered
from fuse_mlir.interp.reference import RunResult
from fuse_mlir.ir import make_context
from fuse_mlir.passes.contract_order import ContractOrder
from fuse_mlir.passes.expand_math import ExpandMath
from fuse_mlir.passes.fuse_elementwise import FuseElementwise
from fuse_mlir.passes.lower_ew_to_loop import LowerEwToLoop
from fuse_mlir.passes.lower_loop_to_llvm import PARALLEL_MIN
from fuse_mlir.passes.lower_te_to_ew import LowerTeToEw
from fuse_mlir.program import print_module


@dataclass
class CompiledProgram:
    """A native kernel and how its slots map to the program's names."""

    kernel: NativeKernel
    arg_names: list[tuple[str, str]]  # (name, kind) per non-constant argument slot, in slot order
    results: list[tuple[str, str, str, Loc | None, int]]  # (name, kind, value name, loc, sink index)
    loop_module: ModuleOp
    compile_seconds: float


_CACHE: dict[str, CompiledProgram] = {}
_LOCK = threading.Lock()


def lower_to_loop(te_module: ModuleOp, fuse: bool = True, strict: bool = False, verify: bool | None = None) -> ModuleOp:
    """A copy of a tensor_eq module lowered to the loop level.

    Multi-operand contractions are split in the cheapest pairwise order,
    elemwise fusion runs unless ``fuse`` is off; ``exp`` is expanded into
    vectorisable code unless ``strict`` (which keeps libm and IEEE order).
    The result is verified when ``verify`` is true (default: when the
    ``FUSE_VERIFY`` environment variable is set and not ``0``): verification
    costs about a third of the lowering time, and the passes build valid IR
    by construction (each pass's tests verify its output).
    """
    module = te_module.clone()
    ctx = make_context()
    ContractOrder().apply(ctx, module)
    LowerTeToEw().apply(ctx, module)
    if fuse:
        FuseElementwise().apply(ctx, module)
    if not strict:
        ExpandMath().apply(ctx, module)
    LowerEwToLoop().apply(ctx, module)
    if verify if verify is not None else os.environ.get("FUSE_VERIFY", "0") not in ("", "0"):
        module.verify()
    return module


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with Python's cyclic garbage collector off (back on afterwards, if it was on).

    Lowering builds hundreds of thousands of IR objects; the collector's
    repeated scans of that growing heap made compile time quadratic in the
    program's size (more than half the Python time at 200 equations).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _strings(attr: ArrayAttr) -> list:
    out = []
    for a in attr.data:
        if isinstance(a, StringAttr):
            out.append(a.data)
        elif isinstance(a, IntegerAttr):
            out.append(a.value.data)
        else:
            out.append(a)
    return out


def compile_program(
    te_module: ModuleOp,
    *,
    strict: bool = False,
    fuse: bool = True,
    cache: bool = True,
    threads: int = 1,
    parallel_min: int = PARALLEL_MIN,
) -> CompiledProgram:
    """The native program for a tensor_eq module (from the cache when the same module was compiled before).

    ``threads`` > 1 splits parallel loop nests whose work reaches ``parallel_min`` over that many threads.
    """
    options = f"{strict}|{fuse}|{threads}|{parallel_min}|"
    key = hashlib.sha256(options.encode() + print_module(te_module).encode()).hexdigest()
    if cache:
        with _LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
    t0 = time.perf_counter()
    with gc_paused():
        loop_module = lower_to_loop(te_module, fuse, strict)
        kernel = NativeKernel(loop_module, strict=strict, threads=threads, parallel_min=parallel_min)
    args = [_strings(e) for e in loop_module.attributes["fuse.args"].data]  # type: ignore[union-attr]
    results = []
    for e in loop_module.attributes["fuse.results"].data:  # type: ignore[union-attr]
        parts = _strings(e)
        if parts[1] == "sink":
            loc = Loc.decode(parts[3]) if parts[3] else None
            results.append((parts[0], "sink", parts[2], loc, int(parts[4])))
        else:
            results.append((parts[0], "export", parts[0], None, -1))
    compiled = CompiledProgram(
        kernel,
        [(a[0], a[1]) for a in args if a[1] != "constant"],
        results,
        loop_module,
        time.perf_counter() - t0,
    )
    if cache:
        with _LOCK:
            _CACHE[key] = compiled
    return compiled


@dataclass
class NativeExecutor:
    """Runs lowered programs as native code; ``strict`` keeps IEEE order, ``fuse`` enables kernel fusion.

    ``threads`` (default ``FUSE_NUM_THREADS``, else the CPUs available) and
    ``parallel_min`` (default ``FUSE_PARALLEL_MIN``, else 65536) set how parallel
    loop nests are split (docs/threads.md).
    """

    strict: bool = False
    fuse: bool = True
    cache: bool = True
    threads: int | None = None
    parallel_min: int | None = None
    compiled: dict[int, CompiledProgram] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.threads, self.parallel_min = resolve_threads(self.threads, self.parallel_min)

    def program_for(self, lowered: Lowered) -> CompiledProgram:
        key = id(lowered.module)
        if key not in self.compiled:
            self.compiled[key] = compile_program(
                lowered.module,
                strict=self.strict,
                fuse=self.fuse,
                cache=self.cache,
                threads=self.threads or 1,
                parallel_min=self.parallel_min if self.parallel_min is not None else PARALLEL_MIN,
            )
        return self.compiled[key]

    def __call__(self, lowered: Lowered, arrays: dict[str, np.ndarray]) -> RunResult:
        prog = self.program_for(lowered)
        args = [arrays[name] if kind == "input" else lowered.sources[name] for name, kind in prog.arg_names]
        outputs = prog.kernel(args)
        result = RunResult({})
        sinks: dict[int, tuple[str, dict[str, np.ndarray], Loc | None]] = {}
        for (name, kind, value_name, loc, index), value in zip(prog.results, outputs):
            if kind == "export":
                result.exports[name] = value
            else:
                sinks.setdefault(index, (name, {}, loc))[1][value_name] = value
        for index in sorted(sinks):
            path, values, loc = sinks[index]
            value = next(iter(values.values())) if len(values) == 1 else values
            result.sinks.append((path, value, loc))
        return result
