"""The llvm backend's executor: tensor_eq → elemwise → (fusion) → loop → LLVM → machine code, cached.

One native kernel is built per tensor_eq module (that is, per program and
input dtype signature; extents stay symbolic). Kernels are cached in memory
by the sha256 of the module's text plus the backend options, so two programs
with the same structure share one kernel and a second call compiles nothing.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr

from fuse_mlir.backends.llvm.runtime import NativeKernel
from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.frontend.lower import Lowered
from fuse_mlir.interp.reference import RunResult
from fuse_mlir.ir import make_context
from fuse_mlir.program import print_module
from fuse_mlir.targets import get_target, normalise_opt_level


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


def lowering_pipeline(
    target: str = "llvm", opt_level: str | int = "O2", strict: bool = False, donate: Sequence[str] = ()
) -> str:
    """The pass pipeline (text) from tensor_eq to the loop level for ``target`` (see fuse_mlir.targets).

    ``O2`` dedups, fuses and plans in-place buffers as the target allows; ``O0``
    only lowers. Transcendentals are expanded into vectorisable code unless
    ``strict`` (which keeps libm and IEEE order). ``donate`` names inputs the
    in-place planner may overwrite.
    """
    spec = get_target(target).pipeline(opt_level, strict=strict)
    if donate:
        spec = spec.replace(f"inplace{{target={target}}}", f"inplace{{target={target} donate={','.join(donate)}}}")
    return spec


def lower_to_loop(
    te_module: ModuleOp,
    *,
    target: str = "llvm",
    opt_level: str | int = "O2",
    strict: bool = False,
    donate: Sequence[str] = (),
    pipeline: str | None = None,
) -> ModuleOp:
    """A copy of a tensor_eq module lowered to the loop level by :func:`lowering_pipeline`.

    A user ``pipeline`` (pass pipeline text, e.g. ``"dedup,fuse"``) replaces the
    target's: each pass runs at its own level (the module is lowered to it
    first) and whatever lowering remains to the loop level follows.
    """
    from fuse_mlir.passes.levels import lower_to
    from fuse_mlir.passes.pipeline import Pipeline

    module = te_module.clone()
    ctx = make_context()
    spec = pipeline if pipeline is not None else lowering_pipeline(target, opt_level, strict, donate)
    Pipeline.parse(spec, source=f"<{target} {opt_level}>" if pipeline is None else "<pipeline>").run(module, ctx)
    lower_to(module, "loop", ctx)
    module.verify()
    return module


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
    opt_level: str | int = "O2",
    donate: Sequence[str] = (),
    pipeline: str | None = None,
    cache: bool = True,
) -> CompiledProgram:
    """The native program for a tensor_eq module (from the cache when the same module was compiled before)."""
    opt = normalise_opt_level(opt_level)
    donated = ",".join(sorted(donate))
    head = f"{strict}|{opt}|{donated}|{pipeline}|".encode()
    key = hashlib.sha256(head + print_module(te_module).encode()).hexdigest()
    if cache:
        with _LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
    t0 = time.perf_counter()
    loop_module = lower_to_loop(te_module, opt_level=opt, strict=strict, donate=sorted(donate), pipeline=pipeline)
    kernel = NativeKernel(loop_module, strict=strict)
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
    """Runs lowered programs as native code.

    ``strict`` keeps IEEE order and libm; ``opt_level`` picks the llvm
    target's pipeline (O0: no fusion or inplace; O2: the default); ``donate``
    names inputs whose arrays the program may overwrite; ``pipeline`` (pass
    pipeline text) replaces the target's pipeline.
    """

    strict: bool = False
    opt_level: str | int = "O2"
    donate: Sequence[str] = ()
    pipeline: str | None = None
    cache: bool = True
    compiled: dict[int, CompiledProgram] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.opt_level = normalise_opt_level(self.opt_level)
        if isinstance(self.donate, str):
            self.donate = (self.donate,)
        self.donate = tuple(sorted(self.donate))

    def program_for(self, lowered: Lowered) -> CompiledProgram:
        key = id(lowered.module)
        if key not in self.compiled:
            unknown = sorted(set(self.donate) - {s.name for s in lowered.inputs})
            if unknown:
                raise FuseError(f"donate names {', '.join(unknown)}, which the program does not take as inputs")
            self.compiled[key] = compile_program(
                lowered.module,
                strict=self.strict,
                opt_level=self.opt_level,
                donate=self.donate,
                pipeline=self.pipeline,
                cache=self.cache,
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
