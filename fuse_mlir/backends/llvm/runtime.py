"""Run a loop-level module as native code: :class:`NativeKernel` (docs/native-abi.md is the contract).

A kernel is built from a loop-level module: it reads the module attributes
(``fuse.args``, ``fuse.results``, ``fuse.errors``, ``fuse.host_calls``), lowers a
clone to the llvm dialect, emits LLVM IR and JIT-compiles it.

Calling convention of :meth:`NativeKernel.__call__`: the caller passes one
array per *non-constant* argument slot (kind ``input`` or ``source``), in slot
order. Constant slots take their value from their ``fuse.args`` entry
(``[name, "constant", dense, ...]``) or from the ``constants`` mapping given to
the constructor (by name). Without ``fuse.args`` every slot is an input. The
result is one array per result slot, in slot order.

Inputs are validated here (dtype, rank, static extents; a boolean array is
accepted for an ``i8`` slot; non-contiguous or misaligned arrays are copied),
so native code checks only value-dependent facts. Buffers that native code
asks for (``fuse_alloc``) are 64-byte aligned NumPy ``uint8`` arrays kept in a
per-call table keyed by address; results are views of them (no copy), and a
result that points at memory the runtime does not own (an input or a constant)
is copied. A non-zero return code becomes ``FuseRuntimeError(message.format(a,
b), loc)`` from ``fuse.errors``; an exception raised by a host call is re-raised.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Attribute

from fuse_mlir.diagnostics import FuseError, FuseRuntimeError, Loc
from fuse_mlir.dialects import loop
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.interp import numpy_builtins as nb
from fuse_mlir.passes.lower_loop_to_llvm import (
    ERR_ALLOC,
    ERR_HOST_CALL,
    PARALLEL_MIN,
    abi_layout,
    host_call_id,
    lower_module,
)

from .emit import emit_llvm_ir
from .jit import JitFunction, emit_assembly, jit_compile, optimize_ir, register_symbol

__all__ = ["NativeKernel", "host_call_impl"]

ALIGN = 64

# --------------------------------------------------------------------------- per-call state and callbacks

_contexts: dict[int, _CallContext] = {}
_ids = itertools.count(1)


@dataclass
class _Alloc:
    base: np.ndarray
    offset: int
    nbytes: int
    handed_out: bool = False


def _address(a: np.ndarray) -> int:
    """The data address of an array (the ctypes buffer route is ~7x faster than ``a.ctypes.data``)."""
    try:
        return _addressof(_c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


_addressof = ctypes.addressof
_c_char = ctypes.c_char


class _CallContext:
    """What one ``fuse_main`` call owns: its allocations and a pending host-call exception."""

    __slots__ = ("allocs", "error", "kernel")

    def __init__(self, kernel: NativeKernel):
        self.kernel = kernel
        self.allocs: dict[int, _Alloc] = {}
        self.error: BaseException | None = None

    def alloc(self, nbytes: int) -> int:
        base = np.empty(nbytes + ALIGN, dtype=np.uint8)
        addr = _address(base)
        off = (-addr) % ALIGN
        self.allocs[addr + off] = _Alloc(base, off, nbytes)
        return addr + off

    def array_at(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The result array at ``ptr``: a view of an owned buffer (first time), else a copy."""
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype=dtype)
        owner = self.allocs.get(ptr)
        if owner is None:
            for addr, a in self.allocs.items():
                if addr <= ptr and ptr + nbytes <= addr + a.nbytes:
                    owner = a
                    break
        if owner is not None and not owner.handed_out and self.allocs.get(ptr) is owner:
            owner.handed_out = True
            start = owner.offset
            return owner.base[start : start + nbytes].view(dtype).reshape(shape)
        return _foreign(ptr, shape, dtype).copy()


def _foreign(ptr: int, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A NumPy view of ``prod(shape)`` elements at ``ptr`` (memory owned elsewhere)."""
    count = math.prod(shape)
    if count == 0:
        return np.empty(tuple(shape), dtype=dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dtype).reshape(tuple(shape))


_ALLOC_TYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_HOST_CALL_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_int64),
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_int64),
)


def _fuse_alloc(rt: int | None, nbytes: int) -> int | None:
    ctx = _contexts.get(rt or 0)
    if ctx is None:
        return None
    try:
        return ctx.alloc(int(nbytes))
    except BaseException as err:  # noqa: BLE001 - must not unwind through native frames
        ctx.error = err
        return None


def _fuse_host_call(
    rt: int | None,
    call_id: int,
    in_ptrs: Any,
    in_shapes: Any,
    out_ptrs: Any,
    out_shapes: Any,
) -> int:
    ctx = _contexts.get(rt or 0)
    if ctx is None:
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
            ptr = ctx.alloc(arr.nbytes)
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


_alloc_cb = _ALLOC_TYPE(_fuse_alloc)
_host_call_cb = _HOST_CALL_TYPE(_fuse_host_call)
register_symbol("fuse_alloc", ctypes.cast(_alloc_cb, ctypes.c_void_p).value or 0, _alloc_cb)
register_symbol("fuse_host_call", ctypes.cast(_host_call_cb, ctypes.c_void_p).value or 0, _host_call_cb)


def host_call_impl(fn: str, inputs: list[np.ndarray], params: Mapping[str, Any]) -> list[np.ndarray]:
    """Run builtin ``fn`` on NumPy (``fuse_mlir.interp.numpy_builtins``); always a list of result arrays."""
    if fn == "topk":
        idx, vals = nb.topk(inputs[0], int(params["k"]), axis=int(params.get("axis", -1)))
        return [idx, vals]
    if fn == "tucker_dense":
        rank = params.get("rank")
        return [nb.tucker_dense(inputs[0], rank=rank, threshold=float(params.get("threshold", 0.5)))]  # type: ignore[arg-type]
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


def _dtype(t: MemRefType) -> np.dtype:
    return te.np_dtype(t.element_type)


def _strs(a: Attribute) -> list[Attribute]:
    assert isinstance(a, ArrayAttr)
    return list(a.data)


def _str(a: Attribute) -> str:
    assert isinstance(a, StringAttr), a
    return a.data


def _arg_slots(module: ModuleOp, n_slots: int, constants: Mapping[str, np.ndarray]) -> list[ArgSlot]:
    attr = module.attributes.get("fuse.args")
    if attr is None:
        return [ArgSlot(f"arg{k}", "input") for k in range(n_slots)]
    slots = []
    for entry in _strs(attr):
        parts = _strs(entry)
        name, kind = _str(parts[0]), _str(parts[1])
        value = None
        if kind == "constant":
            if name in constants:
                value = np.asarray(constants[name])
            elif len(parts) >= 3:
                from fuse_mlir.passes.lower_ew_to_loop import constant_value

                value = constant_value(entry)  # type: ignore[arg-type]
            else:
                raise FuseError(f"constant '{name}' has no value (pass it in `constants`)")
        slots.append(ArgSlot(name, kind, value))
    return slots


def _host_calls(module: ModuleOp) -> dict[int, HostCallSpec]:
    table = module.attributes.get("fuse.host_calls")
    entries = _strs(table) if table is not None else []
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
            e = entries[cid]
            assert isinstance(e, DictionaryAttr)
            if isinstance(p := e.data.get("params"), DictionaryAttr):
                params = {**te.params_of(p), **params}
            if isinstance(f := e.data.get("fn"), StringAttr):
                fn = f.data
        ins = []
        for v in op.inputs:
            assert isinstance(v.type, MemRefType)
            ins.append((_dtype(v.type), len(v.type.get_shape())))
        outs = []
        for r in op.outputs:
            assert isinstance(r.type, MemRefType)
            outs.append((_dtype(r.type), tuple(r.type.get_shape())))
        specs[cid] = HostCallSpec(fn, params, tuple(ins), tuple(outs))
    return specs


def _errors(module: ModuleOp) -> list[tuple[str, str]]:
    attr = module.attributes.get("fuse.errors")
    if attr is None:
        return []
    out = []
    for entry in _strs(attr):
        parts = _strs(entry)
        out.append((_str(parts[0]), _str(parts[1]) if len(parts) > 1 else ""))
    return out


def _decode_loc(text: str) -> Loc | None:
    if not text:
        return None
    try:
        return Loc.decode(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------- the kernel


@dataclass
class _Slot:
    """Validation data of one argument slot."""

    index: int
    name: str
    dtype: np.dtype | None
    static: tuple[int, ...] | None
    offset: int


@dataclass(eq=False)
class NativeKernel:
    """A loop-level module compiled to native code; call it with the input/source arrays in slot order."""

    module: ModuleOp
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    strict: bool = False
    opt_level: int = 3
    threads: int = 1
    parallel_min: int = PARALLEL_MIN

    def __post_init__(self) -> None:
        t0 = time.perf_counter()
        self.layout = abi_layout(self.module)
        self.arg_slots = _arg_slots(self.module, len(self.layout.arg_types), self.constants)
        if len(self.arg_slots) < len(self.layout.arg_types):
            raise FuseError("loop.arg uses a slot beyond fuse.args")
        self.result_names = self._result_names()
        self.errors = _errors(self.module)
        self.host_calls = _host_calls(self.module)
        self._slots: list[_Slot] = []
        for k, slot in enumerate(self.arg_slots):
            t = self.layout.arg_types[k] if k < len(self.layout.arg_types) else None
            dtype = _dtype(t) if t is not None else None
            static = tuple(t.get_shape()) if t is not None else None
            self._slots.append(_Slot(k, slot.name, dtype, static, self.layout.arg_offsets[k] if t is not None else 0))
        self.input_slots = [k for k, s in enumerate(self.arg_slots) if s.kind != "constant"]
        self._fixed: list[np.ndarray | None] = [None] * len(self.arg_slots)
        for k, s in enumerate(self.arg_slots):
            if s.kind == "constant":
                assert s.value is not None
                self._fixed[k] = self._prepare(k, s.value)
        for t in self.layout.result_types:
            if t is None:
                raise FuseError("a result slot is never written by loop.result")
        self._result_dtypes = [_dtype(t) for t in self.layout.result_types if t is not None]
        self._result_ranks = [len(t.get_shape()) for t in self.layout.result_types if t is not None]
        n_args, n_res = len(self.arg_slots), len(self._result_dtypes)
        o_shapes = n_args
        o_results = o_shapes + self.layout.n_arg_extents
        o_rshapes = o_results + n_res
        o_err = o_rshapes + self.layout.n_result_extents
        self._scratch = (o_shapes, o_results, o_rshapes, o_err, o_err + 3)
        lowered = self.module.clone()
        lower_module(lowered, strict=self.strict, threads=self.threads, parallel_min=self.parallel_min)
        t1 = time.perf_counter()
        self.llvm_ir = emit_llvm_ir(lowered)
        t2 = time.perf_counter()
        self.jit: JitFunction = jit_compile(self.llvm_ir, opt_level=self.opt_level)
        self.timings = {"lower": t1 - t0, "emit": t2 - t1, **self.jit.timings}

    @property
    def compile_seconds(self) -> float:
        """Wall time from loop-level module to machine code."""
        return sum(self.timings.values())

    def optimized_ir(self) -> str:
        """The LLVM IR after the optimisation pipeline (recomputed)."""
        return optimize_ir(self.llvm_ir, opt_level=self.opt_level)

    def assembly(self) -> str:
        """The host assembly of the kernel (recomputed)."""
        return emit_assembly(self.llvm_ir, opt_level=self.opt_level)

    def _result_names(self) -> list[str]:
        attr = self.module.attributes.get("fuse.results")
        if attr is None:
            return [f"result{k}" for k in range(len(self.layout.result_types))]
        return [_str(_strs(e)[0]) for e in _strs(attr)]

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
            a = np.ascontiguousarray(a)
        return a

    def __call__(self, arrays: Sequence[Any]) -> list[np.ndarray]:
        """Run on the input/source arrays (slot order); return the result arrays (slot order)."""
        if len(arrays) != len(self.input_slots):
            raise FuseRuntimeError(f"expected {len(self.input_slots)} input arrays, got {len(arrays)}")
        slot_arrays = list(self._fixed)
        for k, a in zip(self.input_slots, arrays):
            slot_arrays[k] = self._prepare(k, a)
        # One int64 scratch array: [args | arg_shapes | results | result_shapes | err].
        o_shapes, o_results, o_rshapes, o_err, total = self._scratch
        scratch = np.zeros(total, dtype=np.int64)
        for k, a in enumerate(slot_arrays):
            assert a is not None
            scratch[k] = _address(a)
            off = self._slots[k].offset
            if a.ndim and self._slots[k].static is not None:
                scratch[o_shapes + off : o_shapes + off + a.ndim] = a.shape
        base = _address(scratch)
        ctx = _CallContext(self)
        rt = next(_ids)
        _contexts[rt] = ctx
        try:
            rc = self.jit.fn(
                base, base + 8 * o_shapes, base + 8 * o_results, base + 8 * o_rshapes, base + 8 * o_err, rt
            )
            if rc != 0:
                self._raise(int(rc), ctx, scratch[o_err : o_err + 3])
            out = []
            ptrs = scratch[o_results:o_rshapes].tolist()
            shapes = scratch[o_rshapes:o_err].tolist()
            for k, (dtype, rank) in enumerate(zip(self._result_dtypes, self._result_ranks)):
                off = self.layout.result_offsets[k]
                out.append(ctx.array_at(ptrs[k], tuple(shapes[off : off + rank]), dtype))
            return out
        finally:
            del _contexts[rt]

    def _raise(self, rc: int, ctx: _CallContext, err: np.ndarray) -> None:
        code, a, b = (int(x) for x in err)
        if ctx.error is not None:
            e = ctx.error
            if isinstance(e, FuseError | MemoryError):
                raise e
            if rc == ERR_HOST_CALL and a in self.host_calls:
                fn, msg = self.host_calls[a].fn, str(e)
                raise FuseRuntimeError(msg if msg.startswith(fn) else f"{fn}: {msg}") from e
            raise FuseRuntimeError(f"runtime callback failed: {e}") from e
        if rc == ERR_ALLOC:
            raise MemoryError(f"fuse_alloc could not allocate {a} bytes")
        if 1 <= code <= len(self.errors):
            message, loc = self.errors[code - 1]
            try:
                text = message.format(a, b)
            except (IndexError, KeyError, ValueError):
                text = message
            raise FuseRuntimeError(text, _decode_loc(loc))
        raise FuseRuntimeError(f"native code failed with code {code} (details {a}, {b})")
