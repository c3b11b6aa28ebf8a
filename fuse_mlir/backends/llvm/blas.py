"""The BLAS behind ``loop.gemm``: ``fuse_dgemm``/``fuse_sgemm`` without importing SciPy.

Kernels call ``fuse_dgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`` (and the ``s``
twin) with the Fortran ABI and 32-bit integers. NumPy ships its own OpenBLAS (``numpy.libs`` in a wheel,
``numpy/.libs`` in older ones, or whatever BLAS its ``_multiarray_umath`` loaded): :func:`find_library`
finds it among the libraries this process has loaded, then in those folders. An LP64 library
(``dgemm_``) is registered as is; an ILP64 one (NumPy's ``scipy_dgemm_64_``, 64-bit integers) gets a
small LLVM IR adapter that widens the integer arguments, compiled once and kept in the disk cache
(kind ``runtime``) like the allocator. Only when NumPy's BLAS cannot be found does SciPy's
``cython_blas`` serve (importing SciPy costs about 0.2 s, which is why it is the fallback).

By default ``fuse_dgemm``/``fuse_sgemm`` are that BLAS itself, threaded by OpenBLAS: the same threads
NumPy's own products use, so a program that mixes NumPy and fuse products keeps one set of BLAS threads.
``FUSE_GEMM_SPLIT=1`` (read once, when the symbols are registered) makes them split a large product over
fuse's own thread pool (:mod:`.parallel`) instead: column (or row) slabs of C that the pool threads take
in turn from a shared counter, each a single-threaded BLAS call (OpenBLAS's thread count is 1 while split
products run and is restored after). The split wins on a loaded machine (the MLP training step of
``benchmarks/grad.py`` took 160-195 ms with OpenBLAS's threads at load 6 and 28 ms split) and ties on a
quiet one (7.08 vs 6.80 ms, float32, load 0.5), but loses 2x when NumPy ran a threaded product just
before: OpenBLAS's workers then still spin on the cores the pool needs (``relu(W@x+b)`` float32 4096 x
4096 x 256 right after a NumPy matmul: 46 ms unsplit, 93 ms split), hence the default.
:func:`split_gemms` builds the wrappers on demand (tests check them whatever the setting).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .jit import _capsule_pointer, cached_runtime, register_symbol, register_symbol_provider
from .parallel import default_threads, ensure_pool

__all__ = ["ensure_blas", "find_library", "register_blas", "split_gemms"]

# Names tried in order: (dgemm, sgemm, integer width).
_FLAVOURS = (
    ("scipy_dgemm_64_", "scipy_sgemm_64_", 64),
    ("dgemm_64_", "sgemm_64_", 64),
    ("dgemm_", "sgemm_", 32),
)

_ADAPTER_IR = """
declare void @{blas}(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr)

define void @{name}(ptr %ta, ptr %tb, ptr %m, ptr %n, ptr %k, ptr %alpha, ptr %a, ptr %lda, ptr %b,
                    ptr %ldb, ptr %beta, ptr %c, ptr %ldc) nounwind {{
entry:
  %w = alloca [6 x i64], align 8
  %m32 = load i32, ptr %m
  %n32 = load i32, ptr %n
  %k32 = load i32, ptr %k
  %lda32 = load i32, ptr %lda
  %ldb32 = load i32, ptr %ldb
  %ldc32 = load i32, ptr %ldc
  %p0 = getelementptr i64, ptr %w, i64 0
  %p1 = getelementptr i64, ptr %w, i64 1
  %p2 = getelementptr i64, ptr %w, i64 2
  %p3 = getelementptr i64, ptr %w, i64 3
  %p4 = getelementptr i64, ptr %w, i64 4
  %p5 = getelementptr i64, ptr %w, i64 5
  %m64 = sext i32 %m32 to i64
  %n64 = sext i32 %n32 to i64
  %k64 = sext i32 %k32 to i64
  %lda64 = sext i32 %lda32 to i64
  %ldb64 = sext i32 %ldb32 to i64
  %ldc64 = sext i32 %ldc32 to i64
  store i64 %m64, ptr %p0
  store i64 %n64, ptr %p1
  store i64 %k64, ptr %p2
  store i64 %lda64, ptr %p3
  store i64 %ldb64, ptr %p4
  store i64 %ldc64, ptr %p5
  call void @{blas}(ptr %ta, ptr %tb, ptr %p0, ptr %p1, ptr %p2, ptr %alpha, ptr %a, ptr %p3, ptr %b, ptr %p4,
                    ptr %beta, ptr %c, ptr %p5)
  ret void
}}
"""


PARALLEL_GEMM_FLOPS = 1 << 20
"""Products with fewer multiply-adds (m n k) run as one BLAS call on the caller's thread."""

SLABS_PER_THREAD = 4
"""Slabs per pool thread: the threads take them in turn from a shared counter, so one thread that the OS
preempts (a loaded machine) delays the product by one slab, not by its whole share."""

MIN_SLAB = 32
"""The fewest columns (rows) of C per slab: narrower BLAS calls lose more to packing than they balance."""

_THREAD_FNS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)
"""OpenBLAS's thread-count setters and getters (a BLAS without them keeps its own threading)."""

_SPLIT_IR = """
declare void @{serial}(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr)
{thread_decls}

define internal i32 @{name}_slab(ptr %env, i64 %c, ptr %err) nounwind {{
entry:
  %pa = getelementptr ptr, ptr %env, i64 0
  %ta = load ptr, ptr %pa
  %pb = getelementptr ptr, ptr %env, i64 1
  %tb = load ptr, ptr %pb
  %pm = getelementptr ptr, ptr %env, i64 2
  %m = load ptr, ptr %pm
  %pn = getelementptr ptr, ptr %env, i64 3
  %n = load ptr, ptr %pn
  %pk = getelementptr ptr, ptr %env, i64 4
  %k = load ptr, ptr %pk
  %palpha = getelementptr ptr, ptr %env, i64 5
  %alpha = load ptr, ptr %palpha
  %pA = getelementptr ptr, ptr %env, i64 6
  %a = load ptr, ptr %pA
  %plda = getelementptr ptr, ptr %env, i64 7
  %lda = load ptr, ptr %plda
  %pB = getelementptr ptr, ptr %env, i64 8
  %b = load ptr, ptr %pB
  %pldb = getelementptr ptr, ptr %env, i64 9
  %ldb = load ptr, ptr %pldb
  %pbeta = getelementptr ptr, ptr %env, i64 10
  %beta = load ptr, ptr %pbeta
  %pC = getelementptr ptr, ptr %env, i64 11
  %cc = load ptr, ptr %pC
  %pldc = getelementptr ptr, ptr %env, i64 12
  %ldc = load ptr, ptr %pldc
  %psplit = getelementptr i64, ptr %env, i64 13
  %split_n = load i64, ptr %psplit
  %pstep = getelementptr i64, ptr %env, i64 14
  %step = load i64, ptr %pstep
  %ptotal = getelementptr i64, ptr %env, i64 15
  %total = load i64, ptr %ptotal
  %next = getelementptr i64, ptr %env, i64 16
  %size = alloca i32, align 4
  %lda32 = load i32, ptr %lda
  %lda64 = sext i32 %lda32 to i64
  %ldb32 = load i32, ptr %ldb
  %ldb64 = sext i32 %ldb32 to i64
  %ldc32 = load i32, ptr %ldc
  %ldc64 = sext i32 %ldc32 to i64
  %is_n = icmp ne i64 %split_n, 0
  br label %take
take:
  %i = atomicrmw add ptr %next, i64 1 monotonic
  %lo = mul i64 %i, %step
  %left = sub i64 %total, %lo
  %none = icmp sle i64 %left, 0
  br i1 %none, label %done, label %work
work:
  %short = icmp slt i64 %left, %step
  %cnt = select i1 %short, i64 %left, i64 %step
  %cnt32 = trunc i64 %cnt to i32
  store i32 %cnt32, ptr %size
  br i1 %is_n, label %cols, label %rows
cols:
  %tbc = load i8, ptr %tb
  %tbN = icmp eq i8 %tbc, 78
  %tbn = icmp eq i8 %tbc, 110
  %tbplain = or i1 %tbN, %tbn
  %boffN = mul i64 %lo, %ldb64
  %boff = select i1 %tbplain, i64 %boffN, i64 %lo
  %b2 = getelementptr {ety}, ptr %b, i64 %boff
  %coffc = mul i64 %lo, %ldc64
  %c2 = getelementptr {ety}, ptr %cc, i64 %coffc
  call void @{serial}(ptr %ta, ptr %tb, ptr %m, ptr %size, ptr %k, ptr %alpha, ptr %a, ptr %lda, ptr %b2,
                      ptr %ldb, ptr %beta, ptr %c2, ptr %ldc)
  br label %take
rows:
  %tac = load i8, ptr %ta
  %taN = icmp eq i8 %tac, 78
  %tan = icmp eq i8 %tac, 110
  %taplain = or i1 %taN, %tan
  %aoffT = mul i64 %lo, %lda64
  %aoff = select i1 %taplain, i64 %lo, i64 %aoffT
  %a2 = getelementptr {ety}, ptr %a, i64 %aoff
  %c3 = getelementptr {ety}, ptr %cc, i64 %lo
  call void @{serial}(ptr %ta, ptr %tb, ptr %size, ptr %n, ptr %k, ptr %alpha, ptr %a2, ptr %lda, ptr %b,
                      ptr %ldb, ptr %beta, ptr %c3, ptr %ldc)
  br label %take
done:
  ret i32 0
}}

define void @{name}(ptr %ta, ptr %tb, ptr %m, ptr %n, ptr %k, ptr %alpha, ptr %a, ptr %lda, ptr %b,
                    ptr %ldb, ptr %beta, ptr %c, ptr %ldc) nounwind {{
entry:
  %m32 = load i32, ptr %m
  %n32 = load i32, ptr %n
  %k32 = load i32, ptr %k
  %m64 = sext i32 %m32 to i64
  %n64 = sext i32 %n32 to i64
  %k64 = sext i32 %k32 to i64
  %mn = mul i64 %m64, %n64
  %mnk = mul i64 %mn, %k64
  %small = icmp slt i64 %mnk, {min_flops}
  %one = icmp sle i64 {threads}, 1
  %serial_only = or i1 %small, %one
  br i1 %serial_only, label %direct, label %split
direct:
  call void @{serial}(ptr %ta, ptr %tb, ptr %m, ptr %n, ptr %k, ptr %alpha, ptr %a, ptr %lda, ptr %b,
                      ptr %ldb, ptr %beta, ptr %c, ptr %ldc)
  ret void
split:
  %by_n = icmp sge i64 %n64, %m64
  %total = select i1 %by_n, i64 %n64, i64 %m64
  %t1 = add i64 %total, {slabs_minus_1}
  %step0 = sdiv i64 %t1, {slabs}
  %narrow = icmp slt i64 %step0, {min_slab}
  %step = select i1 %narrow, i64 {min_slab}, i64 %step0
  %s1 = add i64 %total, %step
  %s2 = sub i64 %s1, 1
  %nslabs = sdiv i64 %s2, %step
  %few = icmp slt i64 %nslabs, {threads}
  %chunks = select i1 %few, i64 %nslabs, i64 {threads}
  %env = alloca [17 x i64], align 8
  %e0 = getelementptr ptr, ptr %env, i64 0
  store ptr %ta, ptr %e0
  %e1 = getelementptr ptr, ptr %env, i64 1
  store ptr %tb, ptr %e1
  %e2 = getelementptr ptr, ptr %env, i64 2
  store ptr %m, ptr %e2
  %e3 = getelementptr ptr, ptr %env, i64 3
  store ptr %n, ptr %e3
  %e4 = getelementptr ptr, ptr %env, i64 4
  store ptr %k, ptr %e4
  %e5 = getelementptr ptr, ptr %env, i64 5
  store ptr %alpha, ptr %e5
  %e6 = getelementptr ptr, ptr %env, i64 6
  store ptr %a, ptr %e6
  %e7 = getelementptr ptr, ptr %env, i64 7
  store ptr %lda, ptr %e7
  %e8 = getelementptr ptr, ptr %env, i64 8
  store ptr %b, ptr %e8
  %e9 = getelementptr ptr, ptr %env, i64 9
  store ptr %ldb, ptr %e9
  %e10 = getelementptr ptr, ptr %env, i64 10
  store ptr %beta, ptr %e10
  %e11 = getelementptr ptr, ptr %env, i64 11
  store ptr %c, ptr %e11
  %e12 = getelementptr ptr, ptr %env, i64 12
  store ptr %ldc, ptr %e12
  %e13 = getelementptr i64, ptr %env, i64 13
  %by_n64 = zext i1 %by_n to i64
  store i64 %by_n64, ptr %e13
  %e14 = getelementptr i64, ptr %env, i64 14
  store i64 %step, ptr %e14
  %e15 = getelementptr i64, ptr %env, i64 15
  store i64 %total, ptr %e15
  %e16 = getelementptr i64, ptr %env, i64 16
  store i64 0, ptr %e16
  %err = alloca [3 x i64], align 8
{threads_off}
  %rc = call i32 @fuse_parallel_for(ptr @{name}_slab, ptr %env, i64 %chunks, ptr %err)
{threads_on}
  ret void
}}
"""

_THREAD_GLOBALS = """
@fuse_blas_depth = internal global i64 0
@fuse_blas_saved = internal global i32 1
declare i32 @fuse_blas_get_threads()
declare void @fuse_blas_set_threads(i32)"""
"""How many split products are running (in any thread) and the BLAS thread count to restore after the last."""

_THREADS_OFF = """  %depth0 = atomicrmw add ptr @fuse_blas_depth, i64 1 seq_cst
  %first = icmp eq i64 %depth0, 0
  br i1 %first, label %save, label %run
save:
  %old = call i32 @fuse_blas_get_threads()
  store atomic i32 %old, ptr @fuse_blas_saved seq_cst, align 4
  call void @fuse_blas_set_threads(i32 1)
  br label %run
run:"""
_THREADS_ON = """  %depth1 = atomicrmw sub ptr @fuse_blas_depth, i64 1 seq_cst
  %last = icmp eq i64 %depth1, 1
  br i1 %last, label %restore, label %out
restore:
  %saved = load atomic i32, ptr @fuse_blas_saved seq_cst, align 4
  call void @fuse_blas_set_threads(i32 %saved)
  br label %out
out:"""
"""The first split product to start sets BLAS to one thread, the last to finish restores it: two Python threads
calling kernels at once never leave BLAS single-threaded (short of one starting exactly as the other ends,
which costs only speed)."""


def _split_gemms(serial_d: str, serial_s: str, thread_control: bool) -> dict[str, int]:
    """Compile (or load) ``fuse_dgemm``/``fuse_sgemm``: the pool-split wrappers around ``serial_d``/``serial_s``."""
    ensure_pool()
    threads = default_threads()
    decls = "declare i32 @fuse_parallel_for(ptr, ptr, i64, ptr)"
    if thread_control:
        decls += _THREAD_GLOBALS
    ir = "".join(
        _SPLIT_IR.format(
            name=name,
            serial=serial,
            ety=ety,
            thread_decls=decls if name == "fuse_dgemm" else "",
            threads=threads,
            slabs=SLABS_PER_THREAD * threads,
            slabs_minus_1=SLABS_PER_THREAD * threads - 1,
            min_slab=MIN_SLAB,
            min_flops=PARALLEL_GEMM_FLOPS,
            threads_off=_THREADS_OFF if thread_control else "",
            threads_on=_THREADS_ON if thread_control else "",
        )
        for name, serial, ety in (("fuse_dgemm", serial_d, "double"), ("fuse_sgemm", serial_s, "float"))
    )
    jf = cached_runtime("fuse-blas-split 3", ir, "fuse_dgemm")
    _KEEP.append(jf)
    return {"fuse_dgemm": jf.address, "fuse_sgemm": jf.engine.get_function_address("fuse_sgemm")}


def _loaded_libraries() -> Iterator[str]:
    """Shared objects mapped into this process whose name says BLAS (from ``/proc/self/maps``; Linux)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    seen: set[str] = set()
    for line in lines:
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        name = os.path.basename(path).lower()
        if path.startswith("/") and ".so" in name and "blas" in name and path not in seen:
            seen.add(path)
            yield path


def _bundled_libraries() -> Iterator[str]:
    """BLAS libraries shipped inside the NumPy installation (``numpy.libs``, ``numpy/.libs``)."""
    import numpy

    root = Path(numpy.__file__).resolve().parent
    for folder in (root.parent / "numpy.libs", root / ".libs", root / "_core" / ".libs"):
        if folder.is_dir():
            for p in sorted(folder.iterdir()):
                if "blas" in p.name.lower() and (".so" in p.name or p.suffix in (".dylib", ".dll")):
                    yield str(p)


def find_library() -> tuple[ctypes.CDLL, str, str, int] | None:
    """NumPy's BLAS as (library, dgemm name, sgemm name, integer width), or None when none is found."""
    for path in (*_loaded_libraries(), *_bundled_libraries()):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for d, s, width in _FLAVOURS:
            if hasattr(lib, d) and hasattr(lib, s):
                return lib, d, s, width
    return None


def _address(lib: ctypes.CDLL, name: str) -> int:
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0


def _adapters(dgemm: str, sgemm: str) -> dict[str, int]:
    """Compile (or load from the disk cache) the ILP64 adapters; their addresses by name."""
    ir = _ADAPTER_IR.format(name="fuse_dgemm_serial", blas=dgemm) + _ADAPTER_IR.format(
        name="fuse_sgemm_serial", blas=sgemm
    )
    jf = cached_runtime("fuse-blas 2", ir, "fuse_dgemm_serial")
    _KEEP.append(jf)
    return {"fuse_dgemm_serial": jf.address, "fuse_sgemm_serial": jf.engine.get_function_address("fuse_sgemm_serial")}


_KEEP: list[object] = []


def _register_thread_control(lib: ctypes.CDLL) -> bool:
    """Register OpenBLAS's thread-count setter and getter as ``fuse_blas_set_threads``/``..._get_threads``."""
    for setter, getter in _THREAD_FNS:
        if hasattr(lib, setter) and hasattr(lib, getter):
            register_symbol("fuse_blas_set_threads", _address(lib, setter))
            register_symbol("fuse_blas_get_threads", _address(lib, getter))
            return True
    return False


GEMM_SPLIT_ENV = "FUSE_GEMM_SPLIT"
"""Set to 1 to split large products over fuse's pool (the module docstring says when that pays)."""


@dataclass
class _Registered:
    """What :func:`register_blas` found, for the pool-split wrappers built later (once per process)."""

    thread_control: bool = False  # whether OpenBLAS's thread count can be set while split products run
    split: dict[str, int] = field(default_factory=dict)  # the split wrappers' addresses, once built


_REGISTERED = _Registered()


def register_blas() -> str:
    """Register ``fuse_dgemm``/``fuse_sgemm`` for the kernels; returns where they came from (for messages).

    NumPy's BLAS first (``FUSE_BLAS=scipy`` forces SciPy's), else ``scipy.linalg.cython_blas``; registered as
    is, or wrapped by the pool split when ``FUSE_GEMM_SPLIT=1`` (the module docstring).
    """
    found = find_library() if os.environ.get("FUSE_BLAS", "").lower() != "scipy" else None
    serial: dict[str, int]
    if found is not None:
        lib, dgemm, sgemm, width = found
        _KEEP.append(lib)
        if width == 32:
            serial = {"fuse_dgemm_serial": _address(lib, dgemm), "fuse_sgemm_serial": _address(lib, sgemm)}
        else:
            register_symbol(dgemm, _address(lib, dgemm))
            register_symbol(sgemm, _address(lib, sgemm))
            serial = _adapters(dgemm, sgemm)
        control = _register_thread_control(lib)
        where = f"numpy ({lib._name}, {dgemm})"
    else:
        from scipy.linalg import cython_blas

        capi = cython_blas.__pyx_capi__
        serial = {
            "fuse_dgemm_serial": _capsule_pointer(capi["dgemm"]),
            "fuse_sgemm_serial": _capsule_pointer(capi["sgemm"]),
        }
        control = False
        where = "scipy.linalg.cython_blas"
    for name, addr in serial.items():
        register_symbol(name, addr)
    _REGISTERED.thread_control = control
    if os.environ.get(GEMM_SPLIT_ENV, "0") not in ("", "0"):
        chosen = _build_split()
        where += ", split over fuse's pool"
    else:
        chosen = {"fuse_dgemm": serial["fuse_dgemm_serial"], "fuse_sgemm": serial["fuse_sgemm_serial"]}
    for name, addr in chosen.items():
        register_symbol(name, addr)
    return where


def _build_split() -> dict[str, int]:
    """The pool-split wrappers' addresses by name, built once (the serial symbols must be registered)."""
    if not _REGISTERED.split:
        _REGISTERED.split.update(_split_gemms("fuse_dgemm_serial", "fuse_sgemm_serial", _REGISTERED.thread_control))
    return _REGISTERED.split


def split_gemms() -> dict[str, int]:
    """The pool-split ``fuse_dgemm``/``fuse_sgemm`` wrappers' addresses, built on first use whatever the setting."""
    ensure_blas()
    with _lock:
        return dict(_build_split())


_lock = threading.Lock()


def ensure_blas() -> None:
    """Register the BLAS symbols once (the JIT calls this before compiling or loading code that calls them)."""
    with _lock:
        if not _registered:
            _registered.append(register_blas())


_registered: list[str] = []
register_symbol_provider("fuse_dgemm", ensure_blas)
register_symbol_provider("fuse_sgemm", ensure_blas)
