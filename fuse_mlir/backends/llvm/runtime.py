"""Run a loop-level module as native code: :class:`NativeKernel` (docs/native-abi.md is the contract).

A kernel is built from a loop-level module: it reads the module's ABI tables
(``fuse.args``, ``fuse.results``, ``fuse.errors``, ``fuse.host_calls``) through
:class:`fuse_mlir.dialects.abi.LoopAbi`, has the pass pipeline lower a clone to
the llvm dialect (:func:`fuse_mlir.passes.lowering.lower_to_llvm`), emits LLVM
IR and JIT-compiles it.

Calling convention of :meth:`NativeKernel.__call__`: the caller passes one
array per *non-constant* argument slot (kind ``input`` or ``source``), in slot
order. Constant slots take their value from their ``fuse.args`` entry
(``[name, "constant", dense, ...]``) or from the ``constants`` mapping given to
the constructor (by name). Without ``fuse.args`` every slot is an input. The
result is one array per result slot, in slot order.

Inputs are validated here (dtype, rank, static extents; a boolean array is
accepted for an ``i8`` slot; non-contiguous or misaligned arrays are copied,
the layout check itself running natively in ``fuse_enter``), so native code
checks only value-dependent facts. Buffers that native code asks for
(``fuse_alloc``) come from a reusable arena (:mod:`.arena`), one buffer per
``loop.alloc`` id, kept across calls; results above :data:`SMALL_RESULT`
bytes are handed over without a copy (the arena restocks), smaller ones are
copied, and with ``keep_outputs`` they stay in the arena. A result that points
at memory the runtime does not own (an input or a constant) is copied. The
caller's ``out`` buffers and donated inputs can back allocations for one call
(:meth:`NativeKernel.__call__`). A non-zero return code becomes
``FuseRuntimeError(message.format(a, b), loc)`` from ``fuse.errors``; an
exception raised by a host call is re-raised. :class:`KernelSpec` holds the
tables read from the module, so a kernel can be rebuilt from the disk cache
without it.
"""

from __future__ import annotations

import base64
import ctypes
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fuse_mlir.backends.outputs import fill_out
from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc, format_details
from fuse_mlir.interp import numpy_builtins as nb
from fuse_mlir.stages import record

from . import (
    arena,  # parallel: registers the thread pool behind fuse_parallel_for (kernels with threads > 1)
    blas,  # noqa: F401 - registers the BLAS symbols' provider (fuse_dgemm, fuse_sgemm)
)
from .arena import DATA_OFFSET, FLAGS_OFFSET, CallState, StatePool, address, install_allocator, state_at
from .jit import (
    JitFunction,
    emit_assembly,
    jit_units,
    native_ldexp,
    optimize_ir,
    register_symbol,
    streaming_min_bytes,
    unit_levels,
    unit_listing,
)
from .recycle import hand_out

if TYPE_CHECKING:
    from xdsl.dialects.builtin import MemRefType, ModuleOp
    from xdsl.ir import SSAValue

    from fuse_mlir.dialects.abi import LoopAbi

    from .entry import NativeEntry

# xDSL, the dialects, the ABI reader and the llvm lowering are imported inside the functions that read a module or
# build code: a kernel rebuilt from the disk cache (KernelSpec.from_json + NativeKernel.from_parts) needs none of them.

__all__ = ["KernelSpec", "NativeKernel", "host_call_impl"]


def _err_layout() -> int:
    """``ERR_LAYOUT`` from the ABI module, imported only once a call has failed (the ABI module needs xDSL)."""
    from fuse_mlir.dialects.abi import ERR_LAYOUT

    return ERR_LAYOUT


# --------------------------------------------------------------------------- callbacks


def _foreign(ptr: int, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A NumPy view of ``prod(shape)`` elements at ``ptr`` (memory owned elsewhere)."""
    count = math.prod(shape)
    if count == 0:
        return np.empty(tuple(shape), dtype=dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dtype).reshape(tuple(shape))  # type: ignore[call-overload]  # a ctypes buffer


_HOST_CALL_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_int64),
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_int64),
)


def _fuse_host_call(
    rt: int | None,
    call_id: int,
    in_ptrs: Any,
    in_shapes: Any,
    out_ptrs: Any,
    out_shapes: Any,
) -> int:
    ctx = state_at(rt)
    if ctx is None or ctx.kernel is None:
        return 1
    try:
        spec = ctx.kernel.host_calls[int(call_id)]
        ins, at = [], 0
        for k, (dtype, rank) in enumerate(spec.inputs):
            shape = tuple(in_shapes[at + d] for d in range(rank))
            at += rank
            ins.append(_foreign(in_ptrs[k] or 0, shape, dtype))
        outs = host_call_impl(spec.fn, ins, spec.params)
        if len(outs) != len(spec.outputs):
            raise FuseRuntimeError(f"host call {spec.fn} returned {len(outs)} arrays, expected {len(spec.outputs)}")
        at = 0
        for k, (out, t) in enumerate(zip(outs, spec.outputs)):
            dtype, static = t
            arr = np.ascontiguousarray(out, dtype=dtype)
            if arr.ndim != len(static) or any(s >= 0 and s != n for s, n in zip(static, arr.shape)):
                raise FuseRuntimeError(
                    f"host call {spec.fn}: result #{k} has shape {arr.shape}, expected rank {len(static)}"
                )
            ptr = ctx.extra(arr.nbytes)
            if arr.nbytes:
                ctypes.memmove(ptr, arr.ctypes.data, arr.nbytes)
            out_ptrs[k] = ptr
            for d, n in enumerate(arr.shape):
                out_shapes[at + d] = n
            at += arr.ndim
        return 0
    except BaseException as err:  # noqa: BLE001 - must not unwind through native frames
        ctx.error = err
        return 1


_host_call_cb = _HOST_CALL_TYPE(_fuse_host_call)
register_symbol("fuse_host_call", ctypes.cast(_host_call_cb, ctypes.c_void_p).value or 0, _host_call_cb)


def host_call_impl(fn: str, inputs: list[np.ndarray], params: Mapping[str, Any]) -> list[np.ndarray]:
    """Run builtin ``fn`` on NumPy (``fuse_mlir.interp.numpy_builtins``); always a list of result arrays."""
    if fn == "topk":
        idx, vals = nb.topk(inputs[0], int(params["k"]), axis=int(params.get("axis", -1)))
        return [idx, vals]
    if fn == "tucker_dense":
        rank = params.get("rank")
        return [nb.tucker_dense(inputs[0], rank=rank, threshold=float(params.get("threshold", 0.5)))]
    if fn == "concat":
        return [nb.concat(inputs, axis=int(params["axis"]))]
    impl = getattr(nb, fn, None) if fn in nb.__all__ else None
    if impl is None:
        raise FuseRuntimeError(f"no host implementation of builtin '{fn}'")
    res = impl(*inputs, **params)
    return list(res) if isinstance(res, tuple) else [res]


# --------------------------------------------------------------------------- module metadata


@dataclass(frozen=True)
class ArgSlot:
    """One argument slot: name, kind, and (for constants) the value."""

    name: str
    kind: str
    value: np.ndarray | None = None


@dataclass(frozen=True)
class HostCallSpec:
    """One ``fuse.host_calls`` entry with the dtypes/ranks of its buffers."""

    fn: str
    params: dict[str, Any]
    inputs: tuple[tuple[np.dtype, int], ...]
    outputs: tuple[tuple[np.dtype, tuple[int, ...]], ...]
    loc: str = ""  # the call's source location (Loc.encode text; "" when unknown), for its run-time errors


def _dtype(t: MemRefType) -> np.dtype:
    from fuse_mlir.dialects import tensor_eq as te

    return te.np_dtype(t.element_type)


def _arg_slots(abi: LoopAbi, n_slots: int, constants: Mapping[str, np.ndarray]) -> list[ArgSlot]:
    if abi.args is None:
        return [ArgSlot(f"arg{k}", "input") for k in range(n_slots)]
    slots = []
    for entry in abi.args:
        value = None
        if entry.kind == "constant":
            if entry.name in constants:
                value = np.asarray(constants[entry.name])
            else:
                value = entry.value()
                if value is None:
                    raise FuseError(f"constant '{entry.name}' has no value (pass it in `constants`)")
        slots.append(ArgSlot(entry.name, entry.kind, value))
    return slots


def _host_calls(module: ModuleOp, abi: LoopAbi) -> dict[int, HostCallSpec]:
    from xdsl.dialects.builtin import MemRefType

    from fuse_mlir.dialects import loop
    from fuse_mlir.dialects import tensor_eq as te
    from fuse_mlir.dialects.abi import host_call_id
    from fuse_mlir.dialects.locations import loc_text

    entries = abi.host_calls
    specs: dict[int, HostCallSpec] = {}
    position = 0
    for op in module.walk():
        if not isinstance(op, loop.HostCallOp):
            continue
        cid = host_call_id(op, position)
        position += 1
        params: dict[str, Any] = te.params_of(op.params)
        fn = op.fn.data
        if cid < len(entries):
            params = {**entries[cid].param_values(), **params}
            fn = entries[cid].fn or fn
        ins = []
        for v in op.inputs:
            assert isinstance(v.type, MemRefType)
            ins.append((_dtype(v.type), len(v.type.get_shape())))
        outs = []
        for r in op.outputs:
            assert isinstance(r.type, MemRefType)
            outs.append((_dtype(r.type), tuple(r.type.get_shape())))
        specs[cid] = HostCallSpec(fn, params, tuple(ins), tuple(outs), loc_text(op))
    return specs


# --------------------------------------------------------------------------- the kernel's tables


def _alloc_table(module: ModuleOp) -> tuple[int, list[int | None]]:
    """The number of arena slots (loop.alloc ids) and, per result slot, the alloc id of its buffer (or None)."""
    from fuse_mlir.dialects import loop
    from fuse_mlir.dialects.abi import alloc_id

    ids: dict[SSAValue, int] = {}
    n = 0
    for op in module.walk():
        if isinstance(op, loop.AllocOp):
            k = alloc_id(op, len(ids))
            ids[op.result] = k
            n = max(n, k + 1)
    results: dict[int, int | None] = {}
    for op in module.walk():
        if isinstance(op, loop.ResultOp):
            results[op.slot.value.data] = ids.get(op.buffer)
    count = max(results, default=-1) + 1
    return n, [results.get(r) for r in range(count)]


def _dtype_name(d: np.dtype | None) -> str | None:
    return None if d is None else d.str


def _array_json(a: np.ndarray) -> dict[str, Any]:
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}


def _array_from_json(j: Mapping[str, Any]) -> np.ndarray:
    raw = base64.b64decode(j["data"])
    return np.frombuffer(raw, dtype=np.dtype(j["dtype"])).reshape(tuple(j["shape"])).copy()


@dataclass
class KernelSpec:
    """Everything the runtime needs to call a kernel, read from its loop module (or from the disk cache as JSON).

    Per argument slot: name, kind, element dtype and static extents (None
    for a slot no ``loop.arg`` reads), offset into ``arg_shapes`` and, for a
    constant, its value; per result slot: name, dtype, rank, offset into
    ``result_shapes`` and the ``loop.alloc`` id of its buffer; the arena size,
    ``fuse.errors``, ``fuse.host_calls`` and ``fuse.reuse``.
    """

    arg_names: list[str]
    arg_kinds: list[str]
    arg_dtypes: list[np.dtype | None]
    arg_static: list[tuple[int, ...] | None]
    arg_offsets: list[int]
    constants: dict[int, np.ndarray]
    result_names: list[str]
    result_dtypes: list[np.dtype]
    result_ranks: list[int]
    result_offsets: list[int]
    result_allocs: list[int | None]
    n_arg_extents: int
    n_result_extents: int
    n_allocs: int
    errors: list[tuple[str, str]]
    host_calls: dict[int, HostCallSpec]
    reuse: list[tuple[int, str]]

    @classmethod
    def from_module(cls, module: ModuleOp, constants: Mapping[str, np.ndarray]) -> KernelSpec:
        from fuse_mlir.dialects.abi import AbiError, LoopAbi, abi_layout

        layout = abi_layout(module)
        try:
            abi = LoopAbi.read(module)
        except AbiError as err:
            raise FuseError(str(err)) from None
        slots = _arg_slots(abi, len(layout.arg_types), constants)
        if len(slots) < len(layout.arg_types):
            raise FuseError("loop.arg uses a slot beyond fuse.args")
        for t in layout.result_types:
            if t is None:
                raise FuseError("a result slot is never written by loop.result")
        names = abi.result_names(len(layout.result_types))
        types = [t for t in layout.result_types if t is not None]
        n_allocs, result_allocs = _alloc_table(module)
        result_allocs += [None] * (len(types) - len(result_allocs))
        arg_types = [layout.arg_types[k] if k < len(layout.arg_types) else None for k in range(len(slots))]
        reuse = [(r.alloc, r.input) for r in abi.reuse]
        return cls(
            arg_names=[s.name for s in slots],
            arg_kinds=[s.kind for s in slots],
            arg_dtypes=[_dtype(t) if t is not None else None for t in arg_types],
            arg_static=[tuple(t.get_shape()) if t is not None else None for t in arg_types],
            arg_offsets=[layout.arg_offsets[k] if arg_types[k] is not None else 0 for k in range(len(slots))],
            constants={k: s.value for k, s in enumerate(slots) if s.kind == "constant" and s.value is not None},
            result_names=names,
            result_dtypes=[_dtype(t) for t in types],
            result_ranks=[len(t.get_shape()) for t in types],
            result_offsets=list(layout.result_offsets[: len(types)]),
            result_allocs=result_allocs[: len(types)],
            n_arg_extents=layout.n_arg_extents,
            n_result_extents=layout.n_result_extents,
            n_allocs=n_allocs,
            errors=[(e.message, e.loc) for e in abi.errors],
            host_calls=_host_calls(module, abi),
            reuse=reuse,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (constants as base64 bytes); raises TypeError when a host-call parameter is not JSON."""
        hc = {
            str(k): {
                "fn": h.fn,
                "params": h.params,
                "inputs": [[d.str, r] for d, r in h.inputs],
                "outputs": [[d.str, list(s)] for d, s in h.outputs],
                "loc": h.loc,
            }
            for k, h in self.host_calls.items()
        }
        out = {
            "arg_names": self.arg_names,
            "arg_kinds": self.arg_kinds,
            "arg_dtypes": [_dtype_name(d) for d in self.arg_dtypes],
            "arg_static": [None if s is None else list(s) for s in self.arg_static],
            "arg_offsets": self.arg_offsets,
            "constants": {str(k): _array_json(v) for k, v in self.constants.items()},
            "result_names": self.result_names,
            "result_dtypes": [d.str for d in self.result_dtypes],
            "result_ranks": self.result_ranks,
            "result_offsets": self.result_offsets,
            "result_allocs": self.result_allocs,
            "n_arg_extents": self.n_arg_extents,
            "n_result_extents": self.n_result_extents,
            "n_allocs": self.n_allocs,
            "errors": [list(e) for e in self.errors],
            "host_calls": hc,
            "reuse": [list(r) for r in self.reuse],
        }
        json.dumps(out)  # fail here (TypeError) rather than when writing
        return out

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> KernelSpec:
        hc = {
            int(k): HostCallSpec(
                h["fn"],
                dict(h["params"]),
                tuple((np.dtype(d), int(r)) for d, r in h["inputs"]),
                tuple((np.dtype(d), tuple(s)) for d, s in h["outputs"]),
                str(h.get("loc", "")),
            )
            for k, h in j["host_calls"].items()
        }
        return cls(
            arg_names=list(j["arg_names"]),
            arg_kinds=list(j["arg_kinds"]),
            arg_dtypes=[None if d is None else np.dtype(d) for d in j["arg_dtypes"]],
            arg_static=[None if s is None else tuple(s) for s in j["arg_static"]],
            arg_offsets=list(j["arg_offsets"]),
            constants={int(k): _array_from_json(v) for k, v in j["constants"].items()},
            result_names=list(j["result_names"]),
            result_dtypes=[np.dtype(d) for d in j["result_dtypes"]],
            result_ranks=list(j["result_ranks"]),
            result_offsets=list(j["result_offsets"]),
            result_allocs=list(j["result_allocs"]),
            n_arg_extents=int(j["n_arg_extents"]),
            n_result_extents=int(j["n_result_extents"]),
            n_allocs=int(j["n_allocs"]),
            errors=[(str(a), str(b)) for a, b in j["errors"]],
            host_calls=hc,
            reuse=[(int(a), str(b)) for a, b in j["reuse"]],
        )


# --------------------------------------------------------------------------- the kernel


@dataclass
class _Slot:
    """Validation data of one argument slot (``checks``: the (axis, extent) pairs of its static extents)."""

    index: int
    name: str
    dtype: np.dtype | None
    static: tuple[int, ...] | None
    offset: int
    rank: int
    checks: tuple[tuple[int, int], ...]


def host_lowering_options() -> dict[str, int | bool]:
    """The ``lower-loop-to-llvm`` options a program compiled with default settings on this host is lowered with:
    the default thread count and split threshold (:func:`.parallel.default_threads`,
    :func:`.parallel.default_parallel_min`), the host's ldexp (:func:`.jit.native_ldexp`) and streaming-store
    threshold (:func:`.jit.streaming_min_bytes`). ``fuse-opt --emit=llvm-ir-opt`` and ``--emit=asm`` lower with
    them, so that they print the code the JIT runs."""
    from .parallel import default_parallel_min, default_threads

    return {
        "threads": default_threads(),
        "parallel_min": default_parallel_min(),
        "native_ldexp": native_ldexp(),
        "streaming_min_bytes": streaming_min_bytes(),
    }


def compiled_listing(llvm_module: ModuleOp, opt_level: int = 3, *, assembly: bool = False) -> str:
    """The optimised LLVM IR, or with ``assembly`` the host assembly, of an llvm-dialect program module as the
    JIT compiles it: one unit per kernel and the entry last (:func:`.emit.emit_llvm_units`), each optimised at
    its own level (:func:`.jit.unit_levels`: a nest deeper than 16 loops at O1, the entry at O1) and headed by a
    comment that names it and its level. A module that does not split into units (one written by hand, without
    ``@fuse_main``) is optimised whole at ``opt_level``."""
    from .emit import EmitError, emit_llvm_ir, emit_llvm_units

    try:
        units = emit_llvm_units(llvm_module)
    except EmitError:
        ir = emit_llvm_ir(llvm_module)
        return emit_assembly(ir, opt_level=opt_level) if assembly else optimize_ir(ir, opt_level=opt_level)
    from fuse_mlir.dialects.abi import CHECKED

    checked = CHECKED in llvm_module.attributes
    levels = unit_levels([u.loop_depth for u in units], opt_level, units[-1].ir.count("\n"), checked)
    texts = unit_listing([(u.ir, level) for u, level in zip(units, levels, strict=True)], assembly=assembly)
    mark = "#" if assembly else ";"
    parts = []
    for k, (unit, level, text) in enumerate(zip(units, levels, texts, strict=True)):
        what = "the entry" if k == len(units) - 1 else f"@{unit.source}, loop depth {unit.loop_depth}"
        parts.append(f"{mark} unit {k + 1} of {len(units)}: @{unit.name} ({what}), LLVM O{level}\n{text}")
    return "\n".join(parts)


class NativeKernel:
    """A loop-level module compiled to native code; call it with the input/source arrays in slot order.

    ``NativeKernel(module, constants, strict, opt_level, threads=, parallel_min=, ldexp=, streaming=)`` compiles
    (``ldexp``: whether ``mathx.ldexp`` lowers to ``llvm.ldexp``; None: the host's choice, :func:`.jit.native_ldexp`;
    ``streaming``: the least buffer bytes for streaming stores, 0 never; None: :func:`.jit.streaming_min_bytes`);
    :meth:`from_parts` rebuilds one from a :class:`KernelSpec` and loaded
    machine code (the disk cache).
    """

    def __init__(
        self,
        module: ModuleOp,
        constants: Mapping[str, np.ndarray] | None = None,
        strict: bool = False,
        opt_level: int = 3,
        *,
        keep_object: bool = False,
        threads: int = 1,
        parallel_min: int | None = None,
        ldexp: bool | None = None,
        streaming: int | None = None,
    ):
        from fuse_mlir.passes.lowering import lower_to_llvm
        from fuse_mlir.targets import PARALLEL_MIN

        from .emit import emit_llvm_units

        if parallel_min is None:
            parallel_min = PARALLEL_MIN
        install_allocator()
        t0 = time.perf_counter()
        self.module: ModuleOp | None = module
        self.strict = strict
        self.opt_level = opt_level
        self.threads = threads
        self.parallel_min = parallel_min
        spec = KernelSpec.from_module(module, constants or {})
        lowered = lower_to_llvm(
            module,
            strict=strict,
            threads=threads,
            parallel_min=parallel_min,
            native_ldexp=native_ldexp() if ldexp is None else ldexp,
            streaming_min_bytes=streaming_min_bytes() if streaming is None else streaming,
        )
        t1 = time.perf_counter()
        self._llvm_module: ModuleOp | None = lowered
        self._llvm_ir: str | None = None
        units = emit_llvm_units(lowered)
        t2 = time.perf_counter()
        record("emit-llvm-ir", t2 - t1)
        from fuse_mlir.dialects.abi import CHECKED

        checked = CHECKED in module.attributes
        levels = unit_levels([u.loop_depth for u in units], opt_level, units[-1].ir.count("\n"), checked)
        jit = jit_units([(u.ir, level) for u, level in zip(units, levels, strict=True)], cache=keep_object)
        self._setup(spec, jit, {"lower": t1 - t0, "emit": t2 - t1, **jit.timings})

    @classmethod
    def from_parts(cls, spec: KernelSpec, jit: JitFunction, strict: bool = False, opt_level: int = 3) -> NativeKernel:
        """A kernel from its tables and already compiled code (no module, no LLVM IR)."""
        install_allocator()
        self = cls.__new__(cls)
        self.module = None
        self._llvm_module = None
        self._llvm_ir = None
        self.strict = strict
        self.opt_level = opt_level
        self._setup(spec, jit, dict(jit.timings))
        return self

    def _setup(self, spec: KernelSpec, jit: JitFunction, timings: dict[str, float]) -> None:
        self.spec = spec
        self.jit = jit
        self._fn = jit.fn
        self.timings = timings
        self.result_names = spec.result_names
        self.errors = spec.errors
        self.host_calls = spec.host_calls
        self.arg_slots = [
            ArgSlot(n, kind, spec.constants.get(k)) for k, (n, kind) in enumerate(zip(spec.arg_names, spec.arg_kinds))
        ]
        self._slots = []
        for k, name in enumerate(spec.arg_names):
            static = spec.arg_static[k]
            checks = tuple((a, e) for a, e in enumerate(static) if e >= 0) if static is not None else ()
            rank = len(static) if static is not None else -1
            self._slots.append(_Slot(k, name, spec.arg_dtypes[k], static, spec.arg_offsets[k], rank, checks))
        self.input_slots = [k for k, kind in enumerate(spec.arg_kinds) if kind != "constant"]
        self._inputs = [(k, self._slots[k]) for k in self.input_slots]
        self._fixed: list[np.ndarray | None] = [None] * len(spec.arg_names)
        for k, value in spec.constants.items():
            self._fixed[k] = self._prepare(k, value)
        self._result_dtypes = spec.result_dtypes
        self._result_ranks = spec.result_ranks
        n_args, n_res = len(spec.arg_names), len(spec.result_dtypes)
        o_shapes = n_args
        o_results = o_shapes + spec.n_arg_extents
        o_rshapes = o_results + n_res
        o_err = o_rshapes + spec.n_result_extents
        self._scratch = (o_shapes, o_results, o_rshapes, o_err, o_err + 3)
        self._results = [(spec.result_dtypes[r], spec.result_ranks[r], spec.result_offsets[r]) for r in range(n_res)]
        self._pool = StatePool(self)
        self._enter = arena.enter
        self._unbox = DATA_OFFSET is not None and FLAGS_OFFSET is not None

    @property
    def compile_seconds(self) -> float:
        """Wall time from loop-level module to machine code."""
        return sum(self.timings.values())

    @property
    def llvm_ir(self) -> str | None:
        """The kernel's LLVM IR as one module (emitted on first use; None for a kernel loaded from the disk cache)."""
        if self._llvm_ir is None and self._llvm_module is not None:
            from .emit import emit_llvm_ir

            self._llvm_ir = emit_llvm_ir(self._llvm_module)
        return self._llvm_ir

    def _lowered(self) -> ModuleOp:
        if self._llvm_module is None:
            raise FuseError("this kernel was loaded from the compile cache: its LLVM IR is not kept")
        return self._llvm_module

    def optimized_ir(self) -> str:
        """The optimised LLVM IR of each unit as it was compiled (recomputed; :func:`compiled_listing`)."""
        return compiled_listing(self._lowered(), self.opt_level)

    def assembly(self) -> str:
        """The host assembly of each unit as it was compiled (recomputed; :func:`compiled_listing`)."""
        return compiled_listing(self._lowered(), self.opt_level, assembly=True)

    def new_state(self) -> CallState:
        """A fresh runtime block for this kernel: constant slots and the ``fuse_enter`` block filled in once."""
        o_shapes, o_results, o_rshapes, o_err, total = self._scratch
        n_in = len(self.input_slots)
        state = CallState(self, self.spec.n_allocs, total + 10 + n_in)
        w, base = state.words, state.scratch
        for k, a in enumerate(self._fixed):
            if a is not None:
                w[base + k] = address(a)
                s = self._slots[k]
                if s.static is not None:
                    at = base + o_shapes + s.offset
                    w[at : at + a.ndim] = a.shape
        state.call = (
            state.rt + 8 * base,
            state.rt + 8 * (base + o_shapes),
            state.rt + 8 * (base + o_results),
            state.rt + 8 * (base + o_rshapes),
            state.rt + 8 * (base + o_err),
            state.rt,
        )
        blk = base + total
        w[blk] = self.jit.address
        w[blk + 1 : blk + 7] = state.call
        w[blk + 7] = DATA_OFFSET or 0
        w[blk + 8] = n_in if self._unbox else 0  # otherwise the slots hold data addresses already
        w[blk + 9] = FLAGS_OFFSET or 0
        w[blk + 10 : blk + 10 + n_in] = self.input_slots
        state.block = state.rt + 8 * blk
        return state

    def _prepare(self, k: int, value: Any) -> np.ndarray:
        """``value`` as the contiguous array slot ``k`` expects, or a FuseRuntimeError."""
        s = self._slots[k]
        a = np.asarray(value)
        if s.dtype is None or s.static is None:
            return np.ascontiguousarray(a)
        if a.dtype != s.dtype:
            if a.dtype == np.bool_ and s.dtype == np.int8:
                a = a.view(np.int8)
            else:
                raise FuseRuntimeError(f"argument '{s.name}': expected {s.dtype} elements, got {a.dtype}")
        if a.ndim != len(s.static):
            raise FuseRuntimeError(f"argument '{s.name}': expected rank {len(s.static)}, got shape {a.shape}")
        for axis, (want, got) in enumerate(zip(s.static, a.shape)):
            if want >= 0 and want != got:
                raise FuseRuntimeError(f"argument '{s.name}': axis {axis} must have extent {want}, got {got}")
        if not (a.flags.c_contiguous and a.flags.aligned):
            a = np.array(a, order="C")  # a copy is aligned; ascontiguousarray keeps a misaligned contiguous view
        return a

    def __call__(
        self,
        arrays: Sequence[Any],
        *,
        out: Sequence[np.ndarray | None] | None = None,
        donated: Mapping[str, bool] | None = None,
        keep_outputs: bool = False,
        pool: StatePool | None = None,
    ) -> list[np.ndarray]:
        """Run on the input/source arrays (slot order); return the result arrays (slot order).

        ``out[r]``, when given, receives result ``r`` (written in place when
        its buffer can back the result's ``loop.alloc``, else copied in; the
        caller has checked it is a writeable C-contiguous array of the
        result's dtype overlapping no input). ``donated`` names the inputs
        whose arrays may back the allocs ``fuse.reuse`` pairs them with.
        ``keep_outputs`` leaves result buffers in the arena (the next call
        with the same ``pool`` overwrites them); otherwise results are handed
        over and the arena restocks. ``pool`` is the caller's state pool (the
        kernel's own by default).
        """
        if len(arrays) != len(self.input_slots):
            raise FuseRuntimeError(f"expected {len(self.input_slots)} input arrays, got {len(arrays)}")
        pool = pool or self._pool
        state = pool.take()
        try:
            return self._run(state, arrays, out, donated, keep_outputs)
        finally:
            state.end()
            pool.give(state)

    def _run(
        self,
        state: CallState,
        arrays: Sequence[Any],
        out: Sequence[np.ndarray | None] | None,
        donated: Mapping[str, bool] | None,
        keep: bool,
    ) -> list[np.ndarray]:
        held = self._fill(state, arrays, not self._unbox)
        state.begin()
        bound = self._bind(state, held, out, donated) if out is not None or donated else None
        try:
            rc = self._enter(state.block)
            if rc and rc == _err_layout():  # an input needs a contiguous, aligned copy: native code checked the flags
                held = self._fill(state, held, True)
                rc = self._enter(state.block)
            return self._collect(state, int(rc), out, bound, keep)
        finally:
            if bound:
                for _, _, aid, _ in bound.values():
                    state.unbind(aid)

    def _collect(
        self,
        state: CallState,
        rc: int,
        out: Sequence[np.ndarray | None] | None,
        bound: Mapping[int, tuple[str, np.ndarray, int, int]] | None,
        keep: bool,
    ) -> list[np.ndarray]:
        """After the kernel returned ``rc``: raise its error, or take its results (slot order) out of ``state``."""
        v, base = state.view, state.scratch
        o_shapes, o_results, o_rshapes, o_err, _ = self._scratch
        if rc != 0:
            self._raise(rc, state, state.words[base + o_err : base + o_err + 3])
        at_ptr, at_shape = base + o_results, base + o_rshapes
        results = []
        taken: set[int] = set()
        for r, (dtype, rank, off) in enumerate(self._results):
            at = at_shape + off
            shape = tuple(v[at : at + rank]) if rank else ()
            results.append(self._take(state, v[at_ptr + r], shape, dtype, keep, taken, bound, r))
        if out is not None:
            for r, o in enumerate(out):
                if o is not None and results[r] is not o:
                    results[r] = fill_out(o, results[r], self.result_names[r])
        return results

    def native_entry(
        self,
        exports: Sequence[tuple[int, str]],
        keep: bool,
        pool: StatePool | None = None,
    ) -> NativeEntry | None:
        """A native builtin for calls by input name (:mod:`.entry`): ``entry.call(inputs)`` returns the exports
        by name, or None when it declines (the caller takes the Python path). It keeps a state of ``pool`` (the
        one the latest call used, so ``keep`` results stay where they were) for itself.

        None where no entry fits: an argument slot other than an input (a constant is fine; a source is passed per
        call), one no ``loop.arg`` reads, a result that is not exported (``exports``: (slot, name) pairs), or a
        process whose NumPy layout the entry cannot read.
        """
        from .entry import make_entry

        spec = self.spec
        if sorted(r for r, _ in exports) != list(range(len(spec.result_dtypes))):
            return None
        inputs = []
        for k in self.input_slots:
            s = self._slots[k]
            if spec.arg_kinds[k] != "input" or s.static is None or s.dtype is None:
                return None
            inputs.append((s.name, k, s.dtype, s.static, s.offset))
        names = dict(exports)
        results = [(names[r], d, rank, off) for r, (d, rank, off) in enumerate(self._results)]
        state = (pool or self._pool).take()

        def finish() -> dict[str, np.ndarray]:
            """The Python end of a call the entry ran but leaves to Python (an error, a large result, ...)."""
            try:
                values = self._collect(state, int(state.view[3]), None, None, keep)
            finally:
                state.end()
            return {name: values[r] for r, name in exports}

        return make_entry(self.jit.address, state.call, inputs, results, finish, -1 if keep else SMALL_RESULT)

    def _fill(self, state: CallState, arrays: Sequence[Any], full: bool) -> list[np.ndarray]:
        """Write the inputs' pointers (or, for ``fuse_enter`` to read, their ids) and extents into the scratch.

        Plain arrays of the slot's dtype and rank take the short way; ``full``
        also checks contiguity and alignment here (copying when needed) rather
        than leaving that to ``fuse_enter``. Returns the arrays actually passed,
        which the caller keeps alive until the call returns.
        """
        v, base = state.view, state.scratch
        at_shapes = base + self._scratch[0]
        held = []
        for (k, s), a in zip(self._inputs, arrays):
            if full or type(a) is not _ndarray or a.dtype is not s.dtype or a.ndim != s.rank:
                a = self._prepare(k, a)
            elif s.checks:
                shape = a.shape
                for axis, want in s.checks:
                    if shape[axis] != want:
                        a = self._prepare(k, a)  # raises
            held.append(a)
            v[base + k] = id(a) if self._unbox else address(a)
            if s.rank > 0:
                at = at_shapes + s.offset
                for e in a.shape:
                    v[at] = e
                    at += 1
        return held

    def _bind(
        self,
        state: CallState,
        held: list[np.ndarray],
        out: Sequence[np.ndarray | None] | None,
        donated: Mapping[str, bool] | None,
    ) -> dict[int, tuple[str, np.ndarray, int, int]]:
        """Point arena slots at the caller's ``out`` buffers and donated inputs for this call; returns them by address."""
        bound: dict[int, tuple[str, np.ndarray, int, int]] = {}
        if out is not None:
            for r, o in enumerate(out):
                aid = self.spec.result_allocs[r]
                if o is not None and aid is not None:
                    addr = address(o)
                    state.bind(aid, addr, o.nbytes)
                    bound[addr] = ("out", o, aid, r)
        if donated:
            for aid, name in self.spec.reuse:
                if not donated.get(name) or not 0 <= aid < state.n or name not in self.spec.arg_names:
                    continue
                k = self.spec.arg_names.index(name)
                a = held[self.input_slots.index(k)] if k in self.input_slots else None
                if a is not None and a.nbytes and a.flags.writeable and a.flags.c_contiguous:
                    addr = address(a)
                    state.bind(aid, addr, a.nbytes)
                    bound[addr] = ("donated", a, aid, -1)
        return bound

    def _take(
        self,
        state: CallState,
        ptr: int,
        shape: tuple[int, ...],
        dtype: np.dtype,
        keep: bool,
        taken: set[int],
        bound: Mapping[int, tuple[str, np.ndarray, int, int]] | None,
        r: int,
    ) -> np.ndarray:
        """Result ``r`` at ``ptr``: a buffer the runtime may hand over (first time), else a copy.

        An arena buffer is handed over and its slot restocked (or, up to
        :data:`SMALL_RESULT` bytes, copied: cheaper than a new buffer); with
        ``keep`` it stays in the arena.
        """
        if not keep and ptr not in taken:
            view = state.views.get((ptr, shape, dtype))
            if view is not None:  # a small result seen before at this address: copy it out
                taken.add(ptr)
                return view.copy()
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype=dtype)
        if ptr not in taken:
            k = state.by_addr.get(ptr)
            if k is not None:
                b, off, addr, cap = state.own[k]  # type: ignore[misc]
                if nbytes <= cap:
                    taken.add(ptr)
                    if keep:
                        return _ndarray(shape, dtype, b, off)
                    if nbytes <= SMALL_RESULT:
                        view = state.views[(ptr, shape, dtype)] = _ndarray(shape, dtype, b, off)
                        return view.copy()
                    state.restock(k, cap)
                    return hand_out(shape, dtype, b, off, addr, cap)
            e = state.extras.get(ptr)
            if e is not None and nbytes <= e[2]:
                taken.add(ptr)
                return _ndarray(shape, dtype, e[0], e[1])
            f = bound.get(ptr) if bound else None
            if f is not None:
                kind, what, _, slot = f
                if kind == "out":
                    if slot == r and what.shape == shape and what.dtype == dtype:
                        taken.add(ptr)
                        return what
                elif nbytes <= what.nbytes:
                    taken.add(ptr)
                    return _ndarray(shape, dtype, what.reshape(-1).view(np.uint8), 0)
        return _foreign(ptr, shape, dtype).copy()

    def _array_name(self, aid: int) -> str:
        """How an error names the buffer of ``loop.alloc`` id ``aid``: the result it holds, else a temporary."""
        for r, k in enumerate(self.spec.result_allocs):
            if k == aid and r < len(self.result_names):
                return f"result '{self.result_names[r]}'"
        return "a temporary array"

    def _raise(self, rc: int, ctx: CallState, err: np.ndarray) -> None:
        from fuse_mlir.dialects.abi import ERR_ALLOC, ERR_HOST_CALL, ERR_LAYOUT, ERR_SIZE, ErrorEntry

        code, a, b = (int(x) for x in err)
        if ctx.error is not None:
            e = ctx.error
            if isinstance(e, MemoryError):
                if rc == ERR_ALLOC:
                    raise FuseRuntimeError(out_of_memory(self._array_name(b), a)) from None
                raise FuseRuntimeError(f"out of memory: {e}") from None
            if isinstance(e, FuseError):
                raise e
            if rc == ERR_HOST_CALL and a in self.host_calls:
                from fuse_mlir.interp.loop_interp import host_call_error  # imports xdsl: not on the warm path

                call = self.host_calls[a]
                raise host_call_error(call.fn, e, Loc.decode(call.loc) if call.loc else None) from e
            raise FuseRuntimeError(f"runtime callback failed: {e}") from e
        if rc == ERR_ALLOC:
            raise FuseRuntimeError(out_of_memory(self._array_name(b), a))
        if rc == ERR_LAYOUT:  # _prepare copies such arrays; reaching this is a runtime bug, reported as one
            raise FuseRuntimeError("an input array is not C-contiguous and aligned even after a copy")
        if rc == ERR_SIZE:
            raise FuseRuntimeError(
                f"{self._array_name(a)} would need 2^63 bytes or more: the product of its extents overflows"
            )
        if 1 <= code <= len(self.errors):
            message, loc = self.errors[code - 1]
            raise FuseRuntimeError(format_details(message, a, b), ErrorEntry(message, loc).location())
        raise FuseRuntimeError(f"native code failed with code {code} (details {a}, {b})")


def out_of_memory(what: str, nbytes: int) -> str:
    """The message for an allocation the system refused: what it was for and how much was asked, in GiB."""
    return f"out of memory: {what} needs {nbytes / 2**30:.3g} GiB ({nbytes} bytes)"


_ndarray = np.ndarray
SMALL_RESULT = 4096
"""Results up to this many bytes are copied out of the arena rather than handed over (a copy is cheaper)."""
