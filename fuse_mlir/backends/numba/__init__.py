"""The numba backend: the loop level rendered as Python and compiled by ``numba.njit``.

``compile(backend="numba", parallel=True, return_type="numpy"|"native")``. The
tensor_eq module is lowered for the numba target (fused loop nests, no
inplace buffer reuse, libm math: ``lower_to_loop(..., target="numba", strict=True)``), rendered
by :mod:`fuse_mlir.backends.numba.render` and compiled with
``njit(parallel=parallel, error_model="numpy")``; parallel ``loop.for`` nests
run under ``numba.prange``. It is a second native path beside llvm and a
cross-check of the loop dialect. Compiled functions are cached in memory by
the sha256 of the loop module's text. ``return_type="native"`` is NumPy
here: numba's arrays are NumPy arrays.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp

from fuse_mlir.backends.array_walk import check_return_type
from fuse_mlir.backends.memcache import BoundedCache
from fuse_mlir.backends.numba import kernels
from fuse_mlir.backends.numba.render import render_module
from fuse_mlir.diagnostics import FuseRuntimeError, Loc, format_details
from fuse_mlir.dialects import loop
from fuse_mlir.dialects.abi import LoopAbi
from fuse_mlir.dialects.locations import source_loc
from fuse_mlir.interp.loop_interp import main_function, run_host_call, slot_arguments, slot_results
from fuse_mlir.ir import print_module
from fuse_mlir.lowered import Lowered, RunResult
from fuse_mlir.passes.lowering import lower_to_loop
from fuse_mlir.passes.transforms.check_bounds import checked_build


@dataclass
class NumbaProgram:
    """A compiled ``fuse_main``, its source and what the executor needs to call it."""

    loop_module: ModuleOp
    source: str
    function: Callable[..., tuple[np.ndarray, ...]]
    arg_types: dict[int, MemRefType]
    errors: list[tuple[str, str]]
    scalar_results: set[int]
    compile_seconds: float


_CACHE: BoundedCache[NumbaProgram] = BoundedCache()  # LRU, at most $FUSE_CACHE_MAX entries
_LOCK = threading.Lock()


def compile_numba(
    te_module: ModuleOp, parallel: bool = True, opt_level: str | int = "O2", check_bounds: bool = False
) -> NumbaProgram:
    """Lower a tensor_eq module with the numba target's pipeline (fused loop nests, no inplace, libm math),
    render it and ``njit`` it (cached by the loop module's text). ``check_bounds`` checks every load and store
    at the loop level (as the llvm backend does) and compiles with numba's own ``boundscheck=True``."""
    t0 = time.perf_counter()
    loop_module = lower_to_loop(te_module, target="numba", opt_level=opt_level, strict=True, check_bounds=check_bounds)
    return numba_program(loop_module, parallel, check_bounds, started=t0)


def numba_program(
    loop_module: ModuleOp, parallel: bool = True, check_bounds: bool = False, *, started: float | None = None
) -> NumbaProgram:
    """Render a loop-level module (any pipeline's: expanded math included) and ``njit`` it, cached by its text.
    ``started``: when the caller began (its lowering counts in the compile time)."""
    t0 = time.perf_counter() if started is None else started
    text = print_module(loop_module)
    key = hashlib.sha256(f"{parallel}|{check_bounds}|".encode() + text.encode()).hexdigest()
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    source, constants = render_module(loop_module, parallel)
    abi = LoopAbi.read(loop_module)
    main = main_function(loop_module)
    # each host call's result types and location, by id
    host_ops = {
        op.attributes["id"].value.data: ([r.type for r in op.outputs], source_loc(op))  # type: ignore[attr-defined]
        for op in main.walk()
        if isinstance(op, loop.HostCallOp)
    }

    def host(cid: int, ins: tuple[np.ndarray, ...]) -> Any:
        return tuple(run_host_call(abi.host_calls[cid], list(ins), *host_ops[cid]))

    namespace: dict[str, Any] = {
        "np": np,
        "math": math,
        "prange": numba.prange,
        "objmode": numba.objmode,
        "_k": kernels,
        "_host": host,
        **constants,
    }
    exec(compile(source, f"<fuse numba {key[:12]}>", "exec"), namespace)  # noqa: S102 - our own rendered code
    # parallel only where a prange was rendered: numba warns (NumbaPerformanceWarning, at the first call) when
    # parallel=True finds nothing to parallelise, as in a program of full reductions or scalars only
    threaded = parallel and "prange(" in source
    function = numba.njit(parallel=threaded, error_model="numpy", cache=False, boundscheck=check_bounds)(
        namespace["fuse_main"]
    )
    arg_types = {op.slot.value.data: op.result.type for op in main.walk() if isinstance(op, loop.ArgOp)}
    errors = [(e.message, e.loc) for e in abi.errors]
    scalar_results = {
        op.slot.value.data
        for op in main.walk()
        if isinstance(op, loop.ResultOp) and not op.buffer.type.get_shape()  # type: ignore[attr-defined]
    }
    program = NumbaProgram(loop_module, source, function, arg_types, errors, scalar_results, time.perf_counter() - t0)
    with _LOCK:
        return _CACHE.setdefault(key, program)


class NumbaExecutor:
    """Runs lowered programs through numba (``parallel``: prange for parallel loops; ``check_bounds``, default
    ``FUSE_CHECK_BOUNDS``: the checked build)."""

    def __init__(
        self,
        parallel: bool = True,
        return_type: str = "numpy",
        opt_level: str | int = "O2",
        check_bounds: bool | None = None,
    ):
        self.parallel = bool(parallel)
        self.check_bounds = checked_build(check_bounds)
        self.opt_level = opt_level
        self.return_type = check_return_type(return_type)
        # Per module, held weakly: a module that is gone takes its entry with it (ids are reused).
        self.compiled: weakref.WeakKeyDictionary[Any, NumbaProgram] = weakref.WeakKeyDictionary()

    def program_for(self, lowered: Lowered) -> NumbaProgram:
        key = lowered.module
        if key not in self.compiled:
            self.compiled[key] = compile_numba(lowered.module, self.parallel, self.opt_level, self.check_bounds)
        return self.compiled[key]

    def __call__(self, lowered: Lowered, arrays: dict[str, np.ndarray]) -> RunResult:
        prog = self.program_for(lowered)
        args = slot_arguments(prog.loop_module, prog.arg_types, arrays, lowered.sources)
        err = np.zeros(3, dtype=np.int64)
        # Rank-0 buffers travel as one-element vectors (see render.Renderer._index).
        try:
            results = prog.function(*[a.reshape(1) if a.ndim == 0 else a for a in args], err)
        except MemoryError as e:  # np.empty inside the kernel: a result or temporary too large for this machine
            raise FuseRuntimeError(f"out of memory: {e}") from None
        except ValueError as e:  # np.empty refusing a byte size past the address space (numba's own message)
            raise FuseRuntimeError(f"an array of this program is too large: {e}") from None
        except IndexError as e:  # numba's boundscheck (checked build), behind the loop-level checks
            raise FuseRuntimeError(f"out-of-bounds access in native code (numba boundscheck): {e}") from None
        code = int(err[0])
        if code:
            message, loc = prog.errors[code - 1]
            raise FuseRuntimeError(format_details(message, int(err[1]), int(err[2])), Loc.decode(loc) if loc else None)
        # Exports and sinks in slot order; result slots are numbered densely from 0.
        return slot_results(
            prog.loop_module, [r.reshape(()) if k in prog.scalar_results else r for k, r in enumerate(results)]
        )
