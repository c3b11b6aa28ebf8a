"""Buffer arenas for native kernels: what ``rt`` points at, and the native ``fuse_alloc`` that serves from it.

A :class:`CallState` is one reusable runtime block: an ``int64`` array whose
head is the arena (``rt``) and whose tail is the call scratch (argument and
result pointers and extents, the error triple). Its layout, in 64-bit words::

    [0] serial  [1] n_slots  [2] dirty (a Python-side buffer was made this call)
    [3] the return code of the native entry's latest call (:mod:`.entry`)
    [4, 4+n)        bufs    data pointer of each arena slot (one per loop.alloc id)
    [4+n, 4+2n)     caps    capacity in bytes of each slot (-1: none)
    [4+2n, 4+3n)    stamps  serial of the call that last claimed the slot
    [4+3n, ...)     scratch args | arg_shapes | results | result_shapes | err[3]

``fuse_alloc(rt, nbytes, id)`` is native code (built once per process from the
IR below): when slot ``id`` has room and was not yet claimed in this call (an
atomic exchange of its stamp with the serial), it returns the slot's buffer
without leaving native code. Otherwise it calls back into Python
(``fuse_alloc_slow``), which grows the slot or, for an id outside the table
or a second claim in one call, hands out a one-call buffer. So a steady
stream of calls with the same (or smaller) extents allocates nothing and
touches no fresh pages (DESIGN.md §6: +44 ms per fresh 80 MB buffer).

``fuse_enter(block)`` (same module) is how the runtime calls a kernel: one
ctypes argument instead of six, and it reads each input's data pointer and
layout flags from the NumPy array object itself (see :func:`_array_offsets`).

The runtime binds a slot for one call to memory it does not own (a caller's
``out=`` buffer, a donated input) by writing its pointer and capacity, and
restores the slot's own buffer afterwards. States are pooled per runner
(:class:`StatePool`): a call takes one and gives it back, so concurrent calls
on one runner never share buffers.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import numpy as np

from .jit import JitFunction, cached_runtime, register_symbol
from .recycle import ALIGN, address, aligned_buffer, take

__all__ = ["ALIGN", "CallState", "StatePool", "address", "aligned_buffer", "state_at"]

HEADER = 4


# --------------------------------------------------------------------------- states


_states: weakref.WeakValueDictionary[int, CallState] = weakref.WeakValueDictionary()


def state_at(rt: int | None) -> CallState | None:
    """The live state whose runtime block is at address ``rt`` (what callbacks receive)."""
    return _states.get(rt or 0)


class CallState:
    """One reusable native runtime block: arena slots, call scratch, and the buffers behind them.

    ``own[k]`` is slot ``k``'s buffer ``(base, offset, address, capacity)``
    or None; ``extras`` maps the address of each one-call buffer (host-call
    outputs, overflow allocations) to ``(base, offset, nbytes)``; ``error``
    holds an exception raised by a callback until the call returns.
    """

    __slots__ = (
        "__weakref__",
        "block",
        "by_addr",
        "call",
        "error",
        "extras",
        "kernel",
        "n",
        "own",
        "rt",
        "scratch",
        "view",
        "views",
        "words",
    )

    def __init__(self, kernel: Any, n_slots: int, n_scratch: int):
        # The kernel keeps its idle states: no cycle back to it (see StatePool). None: a bare block (tests).
        self.kernel = weakref.proxy(kernel) if kernel is not None else None
        self.n = n_slots
        self.words = np.zeros(HEADER + 3 * n_slots + n_scratch, dtype=np.int64)
        self.words[1] = n_slots
        self.view = memoryview(self.words)  # item access ~2x faster than the array's
        # Typed views of small slot buffers by (address, shape, dtype); cleared whenever a slot's buffer changes.
        self.views: dict[tuple[int, tuple[int, ...], Any], np.ndarray] = {}
        self.words[HEADER + n_slots : HEADER + 2 * n_slots] = -1
        self.rt = address(self.words)
        self.scratch = HEADER + 3 * n_slots
        self.own: list[tuple[np.ndarray, int, int, int] | None] = [None] * n_slots
        self.by_addr: dict[int, int] = {}
        self.extras: dict[int, tuple[np.ndarray, int, int]] = {}
        self.error: BaseException | None = None
        self.call: tuple[int, ...] = ()
        self.block = 0
        _states[self.rt] = self

    @property
    def serial(self) -> int:
        """The current call's serial: kept in the block only, so the native entry (:mod:`.entry`) can begin a call."""
        return int(self.view[0])

    def begin(self) -> None:
        """Start a call: a new serial makes every slot claimable again."""
        self.view[0] += 1
        self.view[2] = 0
        self.error = None

    def end(self) -> None:
        """Finish a call: drop one-call buffers."""
        self.extras.clear()
        self.error = None

    def extra(self, nbytes: int) -> int:
        """A one-call buffer (freed when the call ends unless a result takes it)."""
        base, off, addr = aligned_buffer(nbytes)
        self.extras[addr] = (base, off, nbytes)
        self.view[2] = 1  # the native entry leaves such a call to Python to finish (end() drops these)
        return addr

    def grow(self, k: int, nbytes: int) -> int:
        """Give slot ``k`` a new buffer of ``nbytes`` bytes, claimed by the current call."""
        self.drop(k)
        base, off, addr = aligned_buffer(nbytes)
        self.own[k] = (base, off, addr, nbytes)
        self.by_addr[addr] = k
        w, n = self.words, self.n
        w[HEADER + k] = addr
        w[HEADER + n + k] = nbytes
        w[HEADER + 2 * n + k] = w[0]
        w[2] = 1
        return addr

    def drop(self, k: int) -> None:
        """Forget slot ``k``'s buffer (it was handed to the caller, or is too small)."""
        self.views.clear()
        old = self.own[k]
        if old is not None:
            self.by_addr.pop(old[2], None)
            self.own[k] = None
        self.words[HEADER + k] = 0
        self.words[HEADER + self.n + k] = -1

    def restock(self, k: int, nbytes: int) -> None:
        """Replace slot ``k``'s buffer (handed to the caller) by one of the same size, unclaimed.

        The new buffer is one the caller released earlier when there is one (:mod:`.recycle`): its pages are
        already faulted in.
        """
        self.drop(k)
        base, off, addr = take(nbytes)
        self.own[k] = (base, off, addr, nbytes)
        self.by_addr[addr] = k
        self.words[HEADER + k] = addr
        self.words[HEADER + self.n + k] = nbytes

    def bind(self, k: int, addr: int, nbytes: int) -> None:
        """Serve slot ``k`` from foreign memory (an ``out=`` buffer, a donated input) for this call."""
        self.words[HEADER + k] = addr
        self.words[HEADER + self.n + k] = nbytes

    def unbind(self, k: int) -> None:
        """Back to the slot's own buffer after a bound call."""
        own = self.own[k]
        self.words[HEADER + k] = own[2] if own is not None else 0
        self.words[HEADER + self.n + k] = own[3] if own is not None else -1

    def alloc_slow(self, nbytes: int, k: int) -> int:
        """What native ``fuse_alloc`` falls back to: grow slot ``k`` if it is free this call, else a one-call buffer."""
        if 0 <= k < self.n and self.words[HEADER + 2 * self.n + k] != self.serial:
            return self.grow(k, nbytes)
        return self.extra(nbytes)


class StatePool:
    """Idle call states of one kernel for one runner; ``take``/``give`` are atomic list operations (thread-safe)."""

    __slots__ = ("free", "kernel")

    def __init__(self, kernel: Any):
        # A proxy, not a reference: the kernel owns a pool of its own, whose states point back at it, and a
        # cycle would keep the kernel's machine code alive until the cycle collector happens to run.
        self.kernel = weakref.proxy(kernel)
        self.free: list[CallState] = []

    def take(self) -> CallState:
        try:
            return self.free.pop()
        except IndexError:
            return self.kernel.new_state()

    def give(self, state: CallState) -> None:
        self.free.append(state)


# --------------------------------------------------------------------------- native allocator

_ALLOC_IR = """\
declare ptr @fuse_alloc_slow(ptr, i64, i64)

define ptr @fuse_alloc(ptr %rt, i64 %nbytes, i64 %id) nounwind {
entry:
  %np = getelementptr inbounds i64, ptr %rt, i64 1
  %n = load i64, ptr %np
  %known = icmp ult i64 %id, %n
  br i1 %known, label %check, label %slow
check:
  %ci0 = add i64 %id, %n
  %ci = add i64 %ci0, 4
  %cp = getelementptr inbounds i64, ptr %rt, i64 %ci
  %cap = load i64, ptr %cp
  %fits = icmp sge i64 %cap, %nbytes
  br i1 %fits, label %claim, label %slow
claim:
  %serial = load i64, ptr %rt
  %si = add i64 %ci, %n
  %sp = getelementptr inbounds i64, ptr %rt, i64 %si
  %old = atomicrmw xchg ptr %sp, i64 %serial monotonic
  %fresh = icmp ne i64 %old, %serial
  br i1 %fresh, label %fast, label %slow
fast:
  %bi = add i64 %id, 4
  %bp = getelementptr inbounds i64, ptr %rt, i64 %bi
  %buf = load ptr, ptr %bp
  ret ptr %buf
slow:
  %r = call ptr @fuse_alloc_slow(ptr %rt, i64 %nbytes, i64 %id)
  ret ptr %r
}

define ptr @fuse_alloc_shared(ptr %rt, i64 %nbytes, i64 %id) nounwind {
  %r = tail call ptr @fuse_alloc(ptr %rt, i64 %nbytes, i64 %id)
  ret ptr %r
}

define i32 @fuse_enter(ptr %b) nounwind {
entry:
  %main = load ptr, ptr %b
  %p1 = getelementptr inbounds i64, ptr %b, i64 1
  %args = load ptr, ptr %p1
  %p2 = getelementptr inbounds i64, ptr %b, i64 2
  %shapes = load ptr, ptr %p2
  %p3 = getelementptr inbounds i64, ptr %b, i64 3
  %results = load ptr, ptr %p3
  %p4 = getelementptr inbounds i64, ptr %b, i64 4
  %rshapes = load ptr, ptr %p4
  %p5 = getelementptr inbounds i64, ptr %b, i64 5
  %err = load ptr, ptr %p5
  %p6 = getelementptr inbounds i64, ptr %b, i64 6
  %rt = load ptr, ptr %p6
  %p7 = getelementptr inbounds i64, ptr %b, i64 7
  %off = load i64, ptr %p7
  %p8 = getelementptr inbounds i64, ptr %b, i64 8
  %n = load i64, ptr %p8
  %p9 = getelementptr inbounds i64, ptr %b, i64 9
  %foff = load i64, ptr %p9
  br label %check
check:
  %c = phi i64 [ 0, %entry ], [ %c1, %flagsok ]
  %cmore = icmp ult i64 %c, %n
  br i1 %cmore, label %cbody, label %head
cbody:
  %cki = add i64 %c, 10
  %ckp = getelementptr inbounds i64, ptr %b, i64 %cki
  %ck = load i64, ptr %ckp
  %cap = getelementptr inbounds ptr, ptr %args, i64 %ck
  %cobj = load ptr, ptr %cap
  %fp = getelementptr inbounds i8, ptr %cobj, i64 %foff
  %flags = load i32, ptr %fp
  %fl = and i32 %flags, 257
  %ok = icmp eq i32 %fl, 257
  %c1 = add i64 %c, 1
  br i1 %ok, label %flagsok, label %layout
flagsok:
  br label %check
layout:
  ret i32 -3
head:
  %j = phi i64 [ 0, %check ], [ %j1, %body ]
  %more = icmp ult i64 %j, %n
  br i1 %more, label %body, label %call
body:
  %ki = add i64 %j, 10
  %kp = getelementptr inbounds i64, ptr %b, i64 %ki
  %k = load i64, ptr %kp
  %ap = getelementptr inbounds ptr, ptr %args, i64 %k
  %obj = load ptr, ptr %ap
  %dp = getelementptr inbounds i8, ptr %obj, i64 %off
  %data = load ptr, ptr %dp
  store ptr %data, ptr %ap
  %j1 = add i64 %j, 1
  br label %head
call:
  %rc = call i32 %main(ptr %args, ptr %shapes, ptr %results, ptr %rshapes, ptr %err, ptr %rt)
  ret i32 %rc
}
"""

_SLOW_TYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
ENTER_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
"""``fuse_enter(block)``, block = [fuse_main, args, arg_shapes, results, result_shapes, err, rt, data_offset, n,
flags_offset, slot_0 .. slot_n-1]: the first n ``args`` entries named by the slots hold ndarray objects (``id``);
it returns :data:`fuse_mlir.dialects.abi.ERR_LAYOUT` if one is not C-contiguous and aligned, else swaps each for its data pointer and
calls ``fuse_main``."""


def _fuse_alloc_slow(rt: int | None, nbytes: int, k: int) -> int | None:
    state = _states.get(rt or 0)
    if state is None:
        return None
    try:
        return state.alloc_slow(int(nbytes), int(k))
    except BaseException as err:  # noqa: BLE001 - must not unwind through native frames
        state.error = err
        return None


_slow_cb = _SLOW_TYPE(_fuse_alloc_slow)
_native: JitFunction | None = None
enter: Any = None
"""``fuse_enter`` as a ctypes function once :func:`install_allocator` ran."""


def _array_offsets() -> tuple[int, int] | None:
    """Where an ndarray object keeps its data pointer and flags (``PyArrayObject_fields``), verified on probes.

    ``fuse_enter`` reads them there, so the call path hands native code
    ``id(array)`` instead of asking NumPy for the address (~0.4 µs per array)
    and its flags (~0.15 µs). The layout is NumPy's public C struct
    (``PyObject_HEAD; char *data; int nd; npy_intp *dimensions, *strides;
    PyObject *base; PyArray_Descr *descr; int flags``); None, and the plain
    Python path, if probing finds anything else.
    """
    head = object.__basicsize__
    data, flags = head, head + 48
    probes = [np.zeros(3), np.arange(10)[2:], np.zeros((2, 3), dtype=np.float32).T, np.zeros(()), np.zeros(8)[::2]]
    for p in probes:
        if ctypes.c_void_p.from_address(id(p) + data).value != p.ctypes.data:
            return None
        if ctypes.c_int.from_address(id(p) + flags).value != p.flags.num:
            return None
    return data, flags


_OFFSETS = _array_offsets()
DATA_OFFSET = _OFFSETS[0] if _OFFSETS else None
FLAGS_OFFSET = _OFFSETS[1] if _OFFSETS else None
_native_lock = threading.Lock()


def _cached_allocator() -> JitFunction:
    """The allocator's machine code: from the disk cache when present (a JIT compile costs ~30 ms per process)."""
    return cached_runtime("fuse-alloc 3", _ALLOC_IR, "fuse_alloc", _SLOW_TYPE)


def install_allocator() -> None:
    """Build the native ``fuse_alloc``/``fuse_alloc_shared`` (registered for kernels to link against) and ``fuse_enter``."""
    global _native, enter
    with _native_lock:
        if _native is not None:
            return
        register_symbol("fuse_alloc_slow", ctypes.cast(_slow_cb, ctypes.c_void_p).value or 0, _slow_cb)
        jf = _cached_allocator()
        register_symbol("fuse_alloc", jf.address)
        register_symbol("fuse_alloc_shared", jf.engine.get_function_address("fuse_alloc_shared"))
        enter = ENTER_TYPE(jf.engine.get_function_address("fuse_enter"))
        _native = jf
