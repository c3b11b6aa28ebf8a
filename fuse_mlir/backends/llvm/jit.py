"""Compile LLVM IR text to machine code with llvmlite (LLVM's new pass manager, O3, host CPU).

- :func:`optimize_ir` / :func:`emit_assembly`: the optimised IR text or the
  host assembly of a module (for ``fuse-opt --emit=llvm-ir|asm``);
- :func:`jit_compile`: one MCJIT engine per kernel, returning a
  :class:`JitFunction` whose ``fn`` is a ctypes function for ``fuse_main``
  (with ``keep_object``, also the machine code MCJIT generated, as an ELF
  object, and the external symbols it needs);
- :func:`load_object`: the same from such an object (the disk cache: no
  parsing, optimisation or code generation).

The module is given the host's triple and data layout, optimised by the
default ``O<n>`` module pipeline with loop and SLP vectorisation and loop
unrolling on, for the host CPU name and features (AVX2/AVX-512 where present).

External symbols: the runtime registers its callbacks (``fuse_alloc``,
``fuse_host_call``) with :func:`register_symbol`; ``fuse_dgemm`` and
``fuse_sgemm`` are SciPy's BLAS (``scipy.linalg.cython_blas``), registered on
first use. Other calls (libm: ``exp``, ``tanh``, ...) resolve in the process.
A declared function that resolves nowhere is a :class:`JitError`, never an
abort inside LLVM.
"""

from __future__ import annotations

import ctypes
import functools
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from fuse_mlir.stages import record

__all__ = [
    "FUSE_MAIN_TYPE",
    "JitError",
    "JitFunction",
    "emit_assembly",
    "jit_compile",
    "load_object",
    "target_fingerprint",
    "optimize_ir",
    "register_symbol",
]

FUSE_MAIN_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_void_p,  # void **args
    ctypes.c_void_p,  # int64_t *arg_shapes
    ctypes.c_void_p,  # void **results
    ctypes.c_void_p,  # int64_t *result_shapes
    ctypes.c_void_p,  # int64_t *err
    ctypes.c_void_p,  # void *rt
)
"""The C type of ``fuse_main`` (docs/native-abi.md)."""


class JitError(RuntimeError):
    """LLVM rejected the IR, or a symbol it needs cannot be resolved."""


_lock = threading.RLock()
_initialised = False
_symbols: dict[str, int] = {}
_keepalive: list[Any] = []


def _init() -> None:
    global _initialised
    with _lock:
        if not _initialised:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialised = True


def register_symbol(name: str, address: int, keepalive: Any = None) -> None:
    """Make ``name`` resolve to ``address`` in every module compiled afterwards (``keepalive`` is kept forever)."""
    _init()
    with _lock:
        llvm.add_symbol(name, address)
        _symbols[name] = address
        if keepalive is not None:
            _keepalive.append(keepalive)


def _capsule_pointer(capsule: object) -> int:
    """The C pointer inside a PyCapsule (Cython's ``__pyx_capi__`` entries)."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ptr = get_pointer(capsule, get_name(capsule))
    if not ptr:
        raise JitError("cannot read a BLAS function pointer from scipy.linalg.cython_blas")
    return int(ptr)


def _ensure_blas() -> None:
    with _lock:
        if "fuse_dgemm" in _symbols and "fuse_sgemm" in _symbols:
            return
        from scipy.linalg import cython_blas

        capi = cython_blas.__pyx_capi__  # type: ignore[attr-defined]
        register_symbol("fuse_dgemm", _capsule_pointer(capi["dgemm"]))
        register_symbol("fuse_sgemm", _capsule_pointer(capi["sgemm"]))


_DECLARE = re.compile(r"^declare [^@\n]*@([A-Za-z_.$][\w.$]*)\(", re.MULTILINE)
_process = ctypes.CDLL(None)


def _target_machine(opt_level: int, jit: bool) -> llvm.TargetMachine:
    """A target machine for the host CPU and its features (a fresh one: an MCJIT engine takes ownership)."""
    _init()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=opt_level,
        codemodel="jitdefault" if jit else "default",
        jit=jit,
    )


def _parse(ir: str, tm: llvm.TargetMachine) -> llvm.ModuleRef:
    try:
        mod = llvm.parse_assembly(ir)
        mod.verify()
    except RuntimeError as err:
        raise JitError(f"LLVM rejected the IR: {err}") from None
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return mod


def _optimise(mod: llvm.ModuleRef, tm: llvm.TargetMachine, opt_level: int) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    vectorise = opt_level >= 2
    pto.loop_vectorization = vectorise
    pto.slp_vectorization = vectorise
    pto.loop_interleaving = vectorise
    pto.loop_unrolling = opt_level >= 1
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


def optimize_ir(ir: str, *, opt_level: int = 3) -> str:
    """The IR after the ``O<opt_level>`` pipeline for the host CPU (what the JIT would compile)."""
    with _lock:
        tm = _target_machine(opt_level, jit=False)
        mod = _parse(ir, tm)
        _optimise(mod, tm, opt_level)
        return str(mod)


def emit_assembly(ir: str, *, opt_level: int = 3) -> str:
    """The host assembly of the optimised module."""
    with _lock:
        tm = _target_machine(opt_level, jit=False)
        mod = _parse(ir, tm)
        _optimise(mod, tm, opt_level)
        return tm.emit_assembly(mod)


@dataclass
class JitFunction:
    """A compiled kernel: ``fn`` is ``fuse_main`` as a ctypes function; the engine keeps the code alive.

    ``object_code`` (when asked for) is the relocatable object MCJIT loaded
    and ``symbols`` the external functions it calls, enough for
    :func:`load_object` to rebuild the kernel in another process.
    """

    fn: Any
    address: int
    engine: llvm.ExecutionEngine
    timings: dict[str, float] = field(default_factory=dict)
    object_code: bytes | None = None
    symbols: tuple[str, ...] = ()

    @property
    def compile_seconds(self) -> float:
        """Total wall time of parse + optimise + machine code."""
        return sum(self.timings.values())


@functools.cache
def target_fingerprint() -> str:
    """What machine code depends on besides the IR: triple, host CPU name and features, LLVM and llvmlite versions."""
    import llvmlite

    _init()
    features = llvm.get_host_cpu_features().flatten()
    version = ".".join(map(str, llvm.llvm_version_info))
    return f"{llvm.get_default_triple()}|{llvm.get_host_cpu_name()}|{features}|llvm {version}|{llvmlite.__version__}"


def _external_symbols(ir: str) -> tuple[str, ...]:
    return tuple(sorted({n for n in _DECLARE.findall(ir) if not n.startswith("llvm.")}))


def _resolve(symbols: tuple[str, ...]) -> None:
    """Every declared non-intrinsic function must resolve (an unresolved one would abort inside LLVM)."""
    for name in symbols:
        if name in ("fuse_dgemm", "fuse_sgemm"):
            _ensure_blas()
        if name == "fuse_parallel_for":  # the thread pool is compiled on first use (also for disk-cached code)
            from .parallel import ensure_pool

            ensure_pool()
        if name in _symbols:
            continue
        if not hasattr(_process, name):
            raise JitError(f"the kernel calls @{name}, which is neither registered nor found in the process")


def jit_compile(
    ir: str,
    *,
    name: str = "fuse_main",
    opt_level: int = 3,
    fn_type: Any = FUSE_MAIN_TYPE,
    keep_object: bool = False,
) -> JitFunction:
    """Optimise ``ir`` and compile it to machine code; return the function ``name`` as ``fn_type``."""
    symbols = _external_symbols(ir)
    _resolve(symbols)
    with _lock:
        t0 = time.perf_counter()
        tm = _target_machine(opt_level, jit=True)
        mod = _parse(ir, tm)
        t1 = time.perf_counter()
        _optimise(mod, tm, opt_level)
        t2 = time.perf_counter()
        engine = llvm.create_mcjit_compiler(mod, tm)
        objects: list[bytes] = []
        if keep_object:
            engine.set_object_cache(lambda _module, buf: objects.append(bytes(buf)), None)
        engine.finalize_object()
        address = engine.get_function_address(name)
        t3 = time.perf_counter()
    if not address:
        raise JitError(f"the module defines no function @{name}")
    timings = {"parse": t1 - t0, "optimize": t2 - t1, "codegen": t3 - t2}
    for stage_name, seconds in timings.items():
        record(f"llvm-{stage_name}", seconds)
    obj = objects[0] if len(objects) == 1 else None
    return JitFunction(fn_type(address), address, engine, timings, obj, symbols)


def load_object(
    obj: bytes, symbols: tuple[str, ...], *, name: str = "fuse_main", fn_type: Any = FUSE_MAIN_TYPE
) -> JitFunction:
    """Link an object made by :func:`jit_compile` (``keep_object``) into a new engine; return ``name`` from it."""
    _resolve(symbols)
    with _lock:
        t0 = time.perf_counter()
        tm = _target_machine(0, jit=True)
        empty = llvm.parse_assembly("")
        empty.triple = tm.triple
        empty.data_layout = str(tm.target_data)
        engine = llvm.create_mcjit_compiler(empty, tm)
        try:
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        except RuntimeError as err:
            raise JitError(f"cannot load cached machine code: {err}") from None
        engine.finalize_object()
        address = engine.get_function_address(name)
        t1 = time.perf_counter()
    if not address:
        raise JitError(f"the cached object defines no function @{name}")
    record("llvm-load", t1 - t0)
    return JitFunction(fn_type(address), address, engine, {"load": t1 - t0}, obj, symbols)
