"""The native call entry of a kernel: a Python builtin that checks, fills, runs and boxes without Python frames.

``fuse_call(self, inputs)`` is one generic native function (built once per process from the IR below, kept in
the disk cache like the allocator) wrapped per kernel signature as a ``METH_O`` builtin whose ``self`` is a tuple
``(descriptor, keepalive)``. Given the keyword dict of a call it checks, per input, the name's presence, that the
value's type is exactly ``numpy.ndarray``, its dtype descriptor object, its rank, each static extent and the
C-contiguous and aligned flags, all read from the array object's C fields (NumPy's public ``PyArrayObject``
layout, probed at import); it then writes data pointers and extents into the call block of a state reserved for
it, runs the kernel with the GIL released (worker threads and callbacks may need it), and returns the exports as
new arrays (``PyArray_New`` from NumPy's ``_ARRAY_API`` table, then a copy) in a new dict.

It declines (returns None, before running anything) when any check fails or the entry is busy (another thread, or
a callback's Python code, is inside it): the caller then takes the Python path, which raises the same errors as
before. Once the kernel ran, anything it cannot finish itself (a non-zero return code, a buffer made by a Python
callback this call, a result above the small-result size, ``keep_outputs``) goes to the ``finish`` callable, the
Python path's own result handling. Descriptor words (int64)::

    [0] busy  [1] n_inputs  [2] n_results  [3] fuse_main  [4..9] args, arg_shapes, results, result_shapes, err, rt
    [10] small-result limit in bytes (-1: always finish)  [11] finish  [12] numpy.ndarray  [13] None
    [14] first input record  [15] first result record  [16] the latest call's nanoseconds  [17] dict
    input record (6):  name, arg slot, dtype descriptor, rank, offset in arg_shapes, index of its static extents here
    result record (6): name, type number, item size, rank, offset in result_shapes, byte count (scratch)
"""

from __future__ import annotations

import ctypes
import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .arena import DATA_OFFSET, FLAGS_OFFSET
from .jit import MONOTONIC_NS_IR, JitError, JitFunction, cached_runtime, register_symbol

__all__ = ["HEAD", "NativeEntry", "entry_available", "make_entry"]

HEAD = 18
_IN, _RES = 6, 6

_IR = """\
declare i64 @PyDict_Size(ptr)
declare ptr @PyDict_GetItem(ptr, ptr)
declare ptr @PyDict_New()
declare i32 @PyDict_SetItem(ptr, ptr, ptr)
declare void @Py_IncRef(ptr)
declare void @Py_DecRef(ptr)
declare ptr @PyObject_CallObject(ptr, ptr)
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)
declare ptr @fuse_PyArray_New(ptr, i32, ptr, i32, ptr, ptr, i32, i32, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define internal i64 @word(ptr %d, i64 %i) alwaysinline {{
  %p = getelementptr inbounds i64, ptr %d, i64 %i
  %v = load i64, ptr %p
  ret i64 %v
}}

define internal ptr @pword(ptr %d, i64 %i) alwaysinline {{
  %p = getelementptr inbounds i64, ptr %d, i64 %i
  %v = load ptr, ptr %p
  ret ptr %v
}}

define internal ptr @field(ptr %o, i64 %off) alwaysinline {{
  %p = getelementptr inbounds i8, ptr %o, i64 %off
  %v = load ptr, ptr %p
  ret ptr %v
}}

{monotonic_ns}
define internal void @elapsed(ptr %d, ptr %ts, i64 %t0) alwaysinline {{
  %t1 = call i64 @fuse_monotonic_ns(ptr %ts)
  %dt = sub i64 %t1, %t0
  %p = getelementptr inbounds i64, ptr %d, i64 16
  store i64 %dt, ptr %p
  ret void
}}

define ptr @fuse_call(ptr %self, ptr %inputs) {{
entry:
  %tsbuf = alloca [2 x i64], align 8
  %t0 = call i64 @fuse_monotonic_ns(ptr %tsbuf)
  %dobj = call ptr @field(ptr %self, i64 {tuple0})
  %d = call ptr @field(ptr %dobj, i64 {data})
  %dicttype = call ptr @pword(ptr %d, i64 17)
  %itype = call ptr @field(ptr %inputs, i64 {type})
  %isdict = icmp eq ptr %itype, %dicttype
  br i1 %isdict, label %sized, label %decline
sized:
  %size = call i64 @PyDict_Size(ptr %inputs)
  %nin = call i64 @word(ptr %d, i64 1)
  %same = icmp eq i64 %size, %nin
  br i1 %same, label %lock, label %decline
lock:
  %old = atomicrmw xchg ptr %d, i64 1 acquire
  %free = icmp eq i64 %old, 0
  br i1 %free, label %setup, label %decline
setup:
  %args = call ptr @pword(ptr %d, i64 4)
  %shapes = call ptr @pword(ptr %d, i64 5)
  %arraytype = call ptr @pword(ptr %d, i64 12)
  %instart = call i64 @word(ptr %d, i64 14)
  br label %inhead
inhead:
  %i = phi i64 [ 0, %setup ], [ %i1, %argstore ]
  %more = icmp ult i64 %i, %nin
  br i1 %more, label %inbody, label %run
inbody:
  %r6 = mul i64 %i, {rin}
  %ri = add i64 %instart, %r6
  %rec = getelementptr inbounds i64, ptr %d, i64 %ri
  %name = load ptr, ptr %rec
  %a = call ptr @PyDict_GetItem(ptr %inputs, ptr %name)
  %isnull = icmp eq ptr %a, null
  br i1 %isnull, label %release, label %typecheck
typecheck:
  %atype = call ptr @field(ptr %a, i64 {type})
  %ok1 = icmp eq ptr %atype, %arraytype
  br i1 %ok1, label %fieldcheck, label %release
fieldcheck:
  %adescr = call ptr @field(ptr %a, i64 {descr})
  %wdescr = call ptr @pword(ptr %rec, i64 2)
  %ok2 = icmp eq ptr %adescr, %wdescr
  %ndp = getelementptr inbounds i8, ptr %a, i64 {nd}
  %nd32 = load i32, ptr %ndp
  %nd = sext i32 %nd32 to i64
  %rank = call i64 @word(ptr %rec, i64 3)
  %ok3 = icmp eq i64 %nd, %rank
  %fp = getelementptr inbounds i8, ptr %a, i64 {flags}
  %flags = load i32, ptr %fp
  %fl = and i32 %flags, 257
  %ok4 = icmp eq i32 %fl, 257
  %ok23 = and i1 %ok2, %ok3
  %ok = and i1 %ok23, %ok4
  br i1 %ok, label %dimsetup, label %release
dimsetup:
  %dims = call ptr @field(ptr %a, i64 {dims})
  %shat = call i64 @word(ptr %rec, i64 4)
  %dimsat = call i64 @word(ptr %rec, i64 5)
  br label %dimhead
dimhead:
  %j = phi i64 [ 0, %dimsetup ], [ %j1, %dimstore ]
  %dmore = icmp ult i64 %j, %rank
  br i1 %dmore, label %dimbody, label %argstore
dimbody:
  %e = call i64 @word(ptr %dims, i64 %j)
  %wi = add i64 %dimsat, %j
  %want = call i64 @word(ptr %d, i64 %wi)
  %dyn = icmp slt i64 %want, 0
  %eq = icmp eq i64 %want, %e
  %dok = or i1 %dyn, %eq
  br i1 %dok, label %dimstore, label %release
dimstore:
  %si = add i64 %shat, %j
  %sp = getelementptr inbounds i64, ptr %shapes, i64 %si
  store i64 %e, ptr %sp
  %j1 = add i64 %j, 1
  br label %dimhead
argstore:
  %data = call ptr @field(ptr %a, i64 {data})
  %k = call i64 @word(ptr %rec, i64 1)
  %kp = getelementptr inbounds ptr, ptr %args, i64 %k
  store ptr %data, ptr %kp
  %i1 = add i64 %i, 1
  br label %inhead
run:
  %rt = call ptr @pword(ptr %d, i64 9)
  %serial = load i64, ptr %rt
  %serial1 = add i64 %serial, 1
  store i64 %serial1, ptr %rt
  %dirtyp = getelementptr inbounds i64, ptr %rt, i64 2
  store i64 0, ptr %dirtyp
  %main = call ptr @pword(ptr %d, i64 3)
  %results = call ptr @pword(ptr %d, i64 6)
  %rshapes = call ptr @pword(ptr %d, i64 7)
  %err = call ptr @pword(ptr %d, i64 8)
  %ts = call ptr @PyEval_SaveThread()
  %rc = call i32 %main(ptr %args, ptr %shapes, ptr %results, ptr %rshapes, ptr %err, ptr %rt)
  call void @PyEval_RestoreThread(ptr %ts)
  %rc64 = sext i32 %rc to i64
  %rcp = getelementptr inbounds i64, ptr %rt, i64 3
  store i64 %rc64, ptr %rcp
  %failed = icmp ne i32 %rc, 0
  %dirty = load i64, ptr %dirtyp
  %isdirty = icmp ne i64 %dirty, 0
  %limit = call i64 @word(ptr %d, i64 10)
  %nolimit = icmp slt i64 %limit, 0
  %py1 = or i1 %failed, %isdirty
  %py = or i1 %py1, %nolimit
  %nres = call i64 @word(ptr %d, i64 2)
  %resstart = call i64 @word(ptr %d, i64 15)
  br i1 %py, label %finish, label %sizehead
sizehead:
  %r = phi i64 [ 0, %run ], [ %r1, %cntdone ]
  %rmore = icmp ult i64 %r, %nres
  br i1 %rmore, label %sizebody, label %alloc
sizebody:
  %q6 = mul i64 %r, {rres}
  %qi = add i64 %resstart, %q6
  %qrec = getelementptr inbounds i64, ptr %d, i64 %qi
  %qrank = call i64 @word(ptr %qrec, i64 3)
  %qsat = call i64 @word(ptr %qrec, i64 4)
  br label %cnthead
cnthead:
  %c = phi i64 [ 0, %sizebody ], [ %c1, %cntbody ]
  %cnt = phi i64 [ 1, %sizebody ], [ %cnt1, %cntbody ]
  %cmore = icmp ult i64 %c, %qrank
  br i1 %cmore, label %cntread, label %cntdone
cntread:
  %ci = add i64 %qsat, %c
  %ce = call i64 @word(ptr %rshapes, i64 %ci)
  %big = icmp ugt i64 %ce, %limit
  br i1 %big, label %finish, label %cntbody
cntbody:
  %cnt1 = mul i64 %cnt, %ce
  %c1 = add i64 %c, 1
  %over = icmp ugt i64 %cnt1, %limit
  br i1 %over, label %finish, label %cnthead
cntdone:
  %isz = call i64 @word(ptr %qrec, i64 2)
  %nb = mul i64 %cnt, %isz
  %nbp = getelementptr inbounds i64, ptr %qrec, i64 5
  store i64 %nb, ptr %nbp
  %r1 = add i64 %r, 1
  %toobig = icmp ugt i64 %nb, %limit
  br i1 %toobig, label %finish, label %sizehead
alloc:
  %dict = call ptr @PyDict_New()
  %dnull = icmp eq ptr %dict, null
  br i1 %dnull, label %fail, label %rhead
rhead:
  %q = phi i64 [ 0, %alloc ], [ %q1, %set ]
  %qmore = icmp ult i64 %q, %nres
  br i1 %qmore, label %rbody, label %done
rbody:
  %x6 = mul i64 %q, {rres}
  %xi = add i64 %resstart, %x6
  %xrec = getelementptr inbounds i64, ptr %d, i64 %xi
  %xname = load ptr, ptr %xrec
  %xtn64 = call i64 @word(ptr %xrec, i64 1)
  %xtn = trunc i64 %xtn64 to i32
  %xrank64 = call i64 @word(ptr %xrec, i64 3)
  %xrank = trunc i64 %xrank64 to i32
  %xsat = call i64 @word(ptr %xrec, i64 4)
  %xnb = call i64 @word(ptr %xrec, i64 5)
  %xdims = getelementptr inbounds i64, ptr %rshapes, i64 %xsat
  %arr = call ptr @fuse_PyArray_New(ptr %arraytype, i32 %xrank, ptr %xdims, i32 %xtn, ptr null, ptr null, i32 0, i32 0, ptr null)
  %anull = icmp eq ptr %arr, null
  br i1 %anull, label %faildict, label %filled
filled:
  %nz = icmp ne i64 %xnb, 0
  br i1 %nz, label %copy, label %store
copy:
  %dst = call ptr @field(ptr %arr, i64 {data})
  %src = call ptr @pword(ptr %results, i64 %q)
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 %xnb, i1 false)
  br label %store
store:
  %sr = call i32 @PyDict_SetItem(ptr %dict, ptr %xname, ptr %arr)
  call void @Py_DecRef(ptr %arr)
  %sfail = icmp slt i32 %sr, 0
  br i1 %sfail, label %faildict, label %set
set:
  %q1 = add i64 %q, 1
  br label %rhead
done:
  call void @elapsed(ptr %d, ptr %tsbuf, i64 %t0)
  store atomic i64 0, ptr %d release, align 8
  ret ptr %dict
faildict:
  call void @Py_DecRef(ptr %dict)
  br label %fail
fail:
  store atomic i64 0, ptr %d release, align 8
  ret ptr null
finish:
  %fin = call ptr @pword(ptr %d, i64 11)
  %res = call ptr @PyObject_CallObject(ptr %fin, ptr null)
  call void @elapsed(ptr %d, ptr %tsbuf, i64 %t0)
  store atomic i64 0, ptr %d release, align 8
  ret ptr %res
release:
  store atomic i64 0, ptr %d release, align 8
  br label %decline
decline:
  %none = call ptr @pword(ptr %d, i64 13)
  call void @Py_IncRef(ptr %none)
  ret ptr %none
}}
"""


class _MethodDef(ctypes.Structure):
    _fields_ = [
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    ]


_METH_O = 0x0008


def _layout() -> dict[str, int] | None:
    """The C offsets the entry reads (object type, tuple item 0, ndarray fields), verified on probes; None if any
    differs (the entry is then not built and calls take the Python path)."""
    if DATA_OFFSET is None or FLAGS_OFFSET is None:
        return None
    head = object.__basicsize__
    out = {"type": 8, "tuple0": tuple.__basicsize__, "data": DATA_OFFSET, "nd": head + 8, "dims": head + 16}
    out["descr"], out["flags"] = head + 40, FLAGS_OFFSET
    word, i32 = ctypes.c_void_p.from_address, ctypes.c_int.from_address
    probe = np.zeros((2, 3), dtype=np.float32)
    t = (probe, 1)
    if word(id(t) + out["tuple0"]).value != id(probe) or word(id(probe) + out["type"]).value != id(np.ndarray):
        return None
    if word(id(probe) + out["descr"]).value != id(probe.dtype) or i32(id(probe) + out["nd"]).value != 2:
        return None
    dims = word(id(probe) + out["dims"]).value or 0
    if ctypes.c_int64.from_address(dims).value != 2 or ctypes.c_int64.from_address(dims + 8).value != 3:
        return None
    return out


_LAYOUT = _layout()
_lock = threading.Lock()
_built: tuple[JitFunction, _MethodDef] | None = None
_failed = False
_new_function: Any = None


def _array_new_address() -> int:
    """``PyArray_New`` (entry 93 of NumPy's C-API table, fixed by NumPy's ABI) from the ``_ARRAY_API`` capsule."""
    try:
        mu = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # NumPy 1.x
        mu = importlib.import_module("numpy.core._multiarray_umath")
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = get(mu._ARRAY_API, None)
    address = ctypes.c_void_p.from_address(table + 8 * 93).value if table else None
    if not address:
        raise ImportError("NumPy's C-API table has no PyArray_New")
    return int(address)


def _build() -> tuple[JitFunction, _MethodDef] | None:
    """Compile (or load) ``fuse_call`` once per process and its method definition (kept alive with it)."""
    global _built, _new_function, _failed
    with _lock:
        if _built is None and _LAYOUT is not None and not _failed:
            try:
                register_symbol("fuse_PyArray_New", _array_new_address())
                ir = _IR.format(rin=_IN, rres=_RES, monotonic_ns=MONOTONIC_NS_IR, **_LAYOUT)
                jf = cached_runtime("fuse-call 2", ir, "fuse_call", ctypes.CFUNCTYPE(ctypes.c_void_p))
                new = ctypes.pythonapi.PyCFunction_NewEx
            except (JitError, AttributeError, ImportError):  # a Python without these C-API symbols, an odd NumPy
                _failed = True
                return None
            mdef = _MethodDef(b"fuse_call", jf.address, _METH_O, None)
            new.restype = ctypes.py_object
            new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
            _new_function = new
            _built = (jf, mdef)
        return _built


def entry_available() -> bool:
    """Whether this process can build native entries (NumPy's array layout probed as expected)."""
    return _LAYOUT is not None


class NativeEntry:
    """One native entry: the builtin (``call``) and its descriptor words (the builtin holds what they point at)."""

    __slots__ = ("call", "words")

    def __init__(self, call: Callable[[dict[str, Any]], Any], words: np.ndarray):
        self.call = call
        self.words = words

    @property
    def seconds(self) -> float:
        """Wall time of the entry's latest call that ran the kernel (for explain(): read when asked for)."""
        return float(self.words[16]) * 1e-9


def make_entry(
    main: int,
    call_block: Sequence[int],
    inputs: Sequence[tuple[str, int, np.dtype, tuple[int, ...], int]],
    results: Sequence[tuple[str, np.dtype, int, int]],
    finish: Callable[[], Any],
    small: int,
) -> NativeEntry | None:
    """A native entry for one kernel signature, or None where the process cannot build one.

    ``main``: the kernel's address; ``call_block``: its six pointer arguments (a state reserved for this entry);
    ``inputs``: per input (name, arg slot, dtype, static extents with -1 for dynamic ones, offset in arg_shapes);
    ``results``: per export in slot order (name, dtype, rank, offset in result_shapes); ``finish``: the Python
    completion after a run the entry leaves to it (the kernel's return code is in word 3 of ``rt``); ``small``: copy results up to this many bytes (-1: never).
    """
    built = _build()
    if built is None:
        return None
    n_dims = sum(len(s) for _, _, _, s, _ in inputs)
    words = np.zeros(HEAD + _IN * len(inputs) + _RES * len(results) + n_dims, dtype=np.int64)
    keep: list[Any] = [finish, np.ndarray, None, dict]
    words[1:3] = len(inputs), len(results)
    words[3] = main
    words[4:10] = call_block
    words[10] = small
    words[11:14] = id(finish), id(np.ndarray), id(None)
    words[14] = HEAD
    words[15] = HEAD + _IN * len(inputs)
    words[17] = id(dict)
    dims_at = words[15] + _RES * len(results)
    for i, (name, slot, dtype, static, offset) in enumerate(inputs):
        name = str(name)
        keep += [name, dtype]
        at = HEAD + _IN * i
        words[at : at + _IN] = id(name), slot, id(dtype), len(static), offset, dims_at
        words[dims_at : dims_at + len(static)] = static
        dims_at += len(static)
    for r, (name, dtype, rank, offset) in enumerate(results):
        name = str(name)
        keep.append(name)
        at = words[15] + _RES * r
        words[at : at + _RES] = id(name), dtype.num, dtype.itemsize, rank, offset, 0
    _, mdef = built
    call = _new_function(ctypes.addressof(mdef), (words, keep), None)
    return NativeEntry(call, words)
