"""The BLAS behind ``loop.gemm``: ``fuse_dgemm``/``fuse_sgemm`` without importing SciPy.

Kernels call ``fuse_dgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`` (and the ``s``
twin) with the Fortran ABI and 32-bit integers. NumPy ships its own OpenBLAS (``numpy.libs`` in a wheel,
``numpy/.libs`` in older ones, or whatever BLAS its ``_multiarray_umath`` loaded): :func:`find_library`
finds it among the libraries this process has loaded, then in those folders. An LP64 library
(``dgemm_``) is registered as is; an ILP64 one (NumPy's ``scipy_dgemm_64_``, 64-bit integers) gets a
small LLVM IR adapter that widens the integer arguments, compiled once and kept in the disk cache
(kind ``runtime``) like the allocator. Only when NumPy's BLAS cannot be found does SciPy's
``cython_blas`` serve (importing SciPy costs about 0.2 s, which is why it is the fallback).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from .jit import _capsule_pointer, cached_runtime, register_symbol, register_symbol_provider

__all__ = ["ensure_blas", "find_library", "register_blas"]

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
    ir = _ADAPTER_IR.format(name="fuse_dgemm", blas=dgemm) + _ADAPTER_IR.format(name="fuse_sgemm", blas=sgemm)
    jf = cached_runtime("fuse-blas 1", ir, "fuse_dgemm")
    _KEEP.append(jf)
    return {"fuse_dgemm": jf.address, "fuse_sgemm": jf.engine.get_function_address("fuse_sgemm")}


_KEEP: list[object] = []


def register_blas() -> str:
    """Register ``fuse_dgemm``/``fuse_sgemm`` for the kernels; returns where they came from (for messages).

    NumPy's BLAS first (``FUSE_BLAS=scipy`` forces SciPy's), else ``scipy.linalg.cython_blas``.
    """
    found = find_library() if os.environ.get("FUSE_BLAS", "").lower() != "scipy" else None
    if found is not None:
        lib, dgemm, sgemm, width = found
        _KEEP.append(lib)
        if width == 32:
            register_symbol("fuse_dgemm", _address(lib, dgemm))
            register_symbol("fuse_sgemm", _address(lib, sgemm))
        else:
            register_symbol(dgemm, _address(lib, dgemm))
            register_symbol(sgemm, _address(lib, sgemm))
            for name, addr in _adapters(dgemm, sgemm).items():
                register_symbol(name, addr)
        return f"numpy ({lib._name}, {dgemm})"
    from scipy.linalg import cython_blas

    capi = cython_blas.__pyx_capi__
    register_symbol("fuse_dgemm", _capsule_pointer(capi["dgemm"]))
    register_symbol("fuse_sgemm", _capsule_pointer(capi["sgemm"]))
    return "scipy.linalg.cython_blas"


_lock = threading.Lock()


def ensure_blas() -> None:
    """Register the BLAS symbols once (the JIT calls this before compiling or loading code that calls them)."""
    with _lock:
        if not _registered:
            _registered.append(register_blas())


_registered: list[str] = []
register_symbol_provider("fuse_dgemm", ensure_blas)
register_symbol_provider("fuse_sgemm", ensure_blas)
