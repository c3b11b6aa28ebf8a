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
``fuse_sgemm`` are NumPy's bundled BLAS (SciPy's ``cython_blas`` when it is not
found; :mod:`.blas`, a symbol provider), registered on first use. Other calls (libm: ``exp``, ``tanh``, ...) resolve in the process.
A declared function that resolves nowhere is a :class:`JitError`, never an
abort inside LLVM.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.stages import record, unrecorded

__all__ = [
    "ENTRY_NAME",
    "FUSE_MAIN_TYPE",
    "LARGE_ENTRY_LINES",
    "JitError",
    "JitFunction",
    "emit_assembly",
    "cached_runtime",
    "codegen_level",
    "jit_compile",
    "jit_units",
    "load_object",
    "load_units",
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
_providers: dict[str, Callable[[], None]] = {}


def _init() -> None:
    global _initialised
    with _lock:
        if not _initialised:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialised = True


def register_symbol_provider(name: str, provide: Callable[[], None]) -> None:
    """Call ``provide`` (idempotent; it registers ``name``) before compiling or loading code that calls ``name``.

    The thread pool (:mod:`.parallel`) registers ``fuse_parallel_for`` this way, so it is built on first use,
    for disk-cached code too, without this module importing it.
    """
    _providers[name] = provide


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


_DECLARE = re.compile(r"^declare [^@\n]*@([A-Za-z_.$][\w.$]*)\(", re.MULTILINE)
_DEFINE = re.compile(r"^define [^@\n]*@([A-Za-z_.$][\w.$]*)\(", re.MULTILINE)
_process = ctypes.CDLL(None)


def _target_machine(opt_level: int) -> llvm.TargetMachine:
    """A target machine for the host CPU and its features, configured for MCJIT (a fresh one: an MCJIT engine
    takes ownership). Its code model is ``jitdefault`` (x86-64: large), because MCJIT's RuntimeDyld places
    code and read-only data independently, so a 32-bit PC-relative reference could be out of range (release
    builds of LLVM do not check it); ``docs/optimisation.md`` gives what that costs in row kernels. The assembly and
    optimised IR that ``fuse-opt`` prints come from the same configuration."""
    _init()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=opt_level,
        codemodel="jitdefault",
        jit=True,
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


MONOTONIC_NS_IR = f"""\
declare i32 @clock_gettime(i32, ptr)

; Nanoseconds on the monotonic clock (%ts: scratch for a struct timespec, two i64).
define internal i64 @fuse_monotonic_ns(ptr %ts) alwaysinline {{
  call i32 @clock_gettime(i32 {time.CLOCK_MONOTONIC}, ptr %ts)
  %s = load i64, ptr %ts
  %np = getelementptr inbounds i64, ptr %ts, i64 1
  %n = load i64, ptr %np
  %ns = mul i64 %s, 1000000000
  %t = add i64 %ns, %n
  ret i64 %t
}}
"""
"""LLVM IR text for the runtime modules that read the clock (the native entry's timings, the pool's polling):
``@fuse_monotonic_ns`` and its ``clock_gettime`` declaration, to paste into a module's text."""


DEEP_NEST_LOOPS = 16
"""Loop depth above which a kernel is optimised at O1 at most (no vectoriser, no non-trivial unswitching).

LLVM's loop passes run once per loop and each walks the loops inside it, so a nest's optimisation time grows
faster than its depth. ``python -m benchmarks.nest_depth`` (cold compile to the end of the first call of
``Y[i0, iN] = A[i0..iN/2] B[iN/2..iN]``, whose nests are about N/2 deep; load 0.9): all at O3, 0.9 s at
N = 24, 2.3 s at 32, 5.2 s at 48, 6.4 s at 60; with this rule 1.0, 1.3, 1.1 and 1.8 s. LLVM's time passes
put most of it in SimpleLoopUnswitch, LICM and IndVarSimplify. A nest this deep has seventeen or more axes,
so almost all of them have tiny extents and vector code buys little there."""


def unit_opt_level(opt_level: int, loop_depth: int) -> int:
    """The level a kernel unit is optimised at: ``opt_level``, or at most 1 for a nest deeper than
    :data:`DEEP_NEST_LOOPS` loops."""
    return min(opt_level, 1) if loop_depth > DEEP_NEST_LOOPS else opt_level


def unit_levels(loop_depths: Sequence[int], opt_level: int, entry_lines: int = 0, checked: bool = False) -> list[int]:
    """The LLVM level of each unit of a program, given the units' loop depths, the entry last: a kernel at
    ``opt_level`` (a nest deeper than :data:`DEEP_NEST_LOOPS` at O1 at most: :func:`unit_opt_level`; in a
    ``checked`` build at O2 at most), the entry (allocations, checks and calls: glue) at O1 at most, which costs
    less, and at O0 when it has more than :data:`LARGE_ENTRY_LINES` lines (``entry_lines``).

    A checked build's kernels stop at O2 because O3 adds LLVM's non-trivial loop unswitching, which copies a
    loop for each loop-invariant bounds check and grew exponentially in them: the checked build of a sum of
    8 / 12 / 16 two-axis inputs compiled in 1.5 / 14 / more than 80 s."""
    last = len(loop_depths) - 1
    entry = 0 if entry_lines > LARGE_ENTRY_LINES else min(opt_level, 1)
    top = min(opt_level, 2) if checked else opt_level
    return [entry if k == last else unit_opt_level(top, d) for k, d in enumerate(loop_depths)]


ENTRY_NAME = "fuse_main"
"""The entry's symbol, ``abi.ENTRY`` (spelt here so that the warm path does not import xDSL's dialects)."""

LARGE_ENTRY_LINES = 20_000
"""Lines of IR above which the entry unit is compiled at O0: its IR is not optimised (:func:`unit_levels`)
and its machine code comes from FastISel and the fast register allocator (:func:`codegen_level`).

The entry is glue: argument loads, a branch per shape check, allocations and one call per kernel. Each
input's pointer and extents live from the top to the kernel calls that read them, and LLVM grows faster
than linearly in such a function: its O3 code generator (machine sinking, DAG instruction selection, greedy
allocation, stack-slot colouring) about as the square, and its O1 pipeline's InstCombine too. Entries at
O1 with O3 code (``python -m benchmarks.compile_scaling``, load about 1): a sum of 250 / 500 / 1,000
two-axis inputs (``--wide``; 8,800 / 17,500 / 35,000 lines) 0.25 / 0.66 / 2.34 s; programs of 100 / 400 /
800 equations (12,400 / 50,200 / 100,400 lines) 0.30 / 1.69 / 4.77 s. At O0: 0.10 s at 1,000 inputs, 0.26 s
at 2,000; 0.06 / 0.28 / 0.61 s for the programs. The O0 entry costs more per call (its values spilled to
the stack): on the 400-equation program's small shapes a call took 112 µs against 103 µs. Below the
threshold the entry keeps O1 and O3 code, so most programs' calls are unchanged."""


def codegen_level(ir: str, entry: str) -> int:
    """The code generator's level for one unit: 3, or 0 for an entry (defining ``entry``) of more than
    :data:`LARGE_ENTRY_LINES` lines."""
    if ir.count("\n") > LARGE_ENTRY_LINES and entry in _DEFINE.findall(ir):
        return 0
    return 3


def unit_listing(units: Sequence[tuple[str, int]], *, assembly: bool) -> list[str]:
    """Each unit (IR text, level) optimised, as LLVM IR text or, with ``assembly``, as host assembly, exactly
    as :func:`jit_units` compiles it: the unit's own pipeline level, code generated by the JIT's O3 target
    machine (``fuse-opt --emit=llvm-ir-opt`` and ``--emit=asm`` print these)."""
    texts = []
    with _lock:
        tm = _target_machine(3)
        for ir, level in units:
            mod = _parse(ir, tm)
            _optimise(mod, tm, level)
            cg = tm if codegen_level(ir, ENTRY_NAME) == 3 else _target_machine(0)
            texts.append(cg.emit_assembly(mod) if assembly else str(mod))
    return texts


def optimize_ir(ir: str, *, opt_level: int = 3) -> str:
    """The IR after the ``O<opt_level>`` pipeline for the host CPU (what the JIT would compile)."""
    with _lock:
        tm = _target_machine(opt_level)
        mod = _parse(ir, tm)
        _optimise(mod, tm, opt_level)
        return str(mod)


def emit_assembly(ir: str, *, opt_level: int = 3) -> str:
    """The host assembly of the optimised module, generated as the JIT generates it (its code model: on x86-64
    the large one, so constant-pool addresses are ``movabsq`` immediates, not RIP-relative operands; the
    default code model would print a different, faster-looking loop than the one that runs)."""
    with _lock:
        tm = _target_machine(opt_level)
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
    units: tuple[str, ...] = ()  # the unit keys it was linked from (jit_units), else empty

    @property
    def compile_seconds(self) -> float:
        """Total wall time of parse + optimise + machine code."""
        return sum(self.timings.values())


@functools.cache
def native_ldexp() -> bool:
    """Whether the host has AVX-512F, whose ``vscalefpd``/``vscalefps`` LLVM turns a vector ``llvm.ldexp`` into
    (elsewhere LLVM unrolls it into scalar code, so ``mathx.ldexp`` lowers to two multiplies instead). The choice
    follows the host like the rest of the machine code, so :func:`target_fingerprint` covers it."""
    _init()
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


DEFAULT_LLC_BYTES = 32 << 20
"""The last-level cache size assumed where the host does not report one (Linux reports it in sysfs)."""


def last_level_cache_bytes() -> int:
    """The size of the host's largest (last-level) cache, from ``/sys/devices/system/cpu/cpu0/cache``."""
    best = 0
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or DEFAULT_LLC_BYTES


@functools.cache
def streaming_min_bytes() -> int:
    """The least buffer size for which marked stores stream past the caches (``lower-loop-to-llvm``'s
    ``streaming-min-bytes``): the last-level cache size on x86-64 hosts, where a buffer that large cannot stay
    cached anyway and a streaming store saves the read-for-ownership of each line (docs/optimisation.md);
    0 (never) elsewhere. ``FUSE_STREAMING_MIN_BYTES`` (read once per process) overrides it: ``0`` turns
    streaming stores off, a small value makes every marked store of an aligned row stream (the tests use
    that). :func:`target_fingerprint` covers it."""
    text = os.environ.get("FUSE_STREAMING_MIN_BYTES", "").strip()
    if text:
        if not text.isdigit():
            raise FuseError(f"FUSE_STREAMING_MIN_BYTES must be a byte count (0: off), got {text!r}")
        return int(text)
    _init()
    if not llvm.get_default_triple().startswith("x86_64"):
        return 0
    return last_level_cache_bytes()


@functools.cache
def target_fingerprint() -> str:
    """What machine code depends on besides the IR: triple, host CPU name and features, last-level cache size
    (:func:`streaming_min_bytes`), LLVM and llvmlite versions."""
    import llvmlite

    _init()
    features = llvm.get_host_cpu_features().flatten()
    version = ".".join(map(str, llvm.llvm_version_info))
    host = f"{llvm.get_default_triple()}|{llvm.get_host_cpu_name()}|{features}|llc {streaming_min_bytes()}"
    return f"{host}|llvm {version}|{llvmlite.__version__}"


def _external_symbols(ir: str) -> tuple[str, ...]:
    return tuple(sorted({n for n in _DECLARE.findall(ir) if not n.startswith("llvm.")}))


def _resolve(symbols: tuple[str, ...]) -> None:
    """Every declared non-intrinsic function must resolve (an unresolved one would abort inside LLVM)."""
    for name in symbols:
        provide = _providers.get(name)
        if provide is not None:  # built on first use (the thread pool), also for disk-cached code
            provide()
        if name in _symbols:
            continue
        if not hasattr(_process, name):
            raise JitError(f"the kernel calls @{name}, which is neither registered nor found in the process")


def jit_compile(
    ir: str,
    *,
    name: str = ENTRY_NAME,
    opt_level: int = 3,
    fn_type: Any = FUSE_MAIN_TYPE,
    keep_object: bool = False,
) -> JitFunction:
    """Optimise ``ir`` and compile it to machine code; return the function ``name`` as ``fn_type``."""
    symbols = _external_symbols(ir)
    _resolve(symbols)
    with _lock:
        t0 = time.perf_counter()
        tm = _target_machine(opt_level)
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
    obj: bytes, symbols: tuple[str, ...], *, name: str = ENTRY_NAME, fn_type: Any = FUSE_MAIN_TYPE
) -> JitFunction:
    """Link an object made by :func:`jit_compile` (``keep_object``) into a new engine; return ``name`` from it."""
    _resolve(symbols)
    t0 = time.perf_counter()
    jf = _link([obj], symbols, name, fn_type)
    seconds = time.perf_counter() - t0
    record("llvm-load", seconds)
    jf.timings = {"load": seconds}
    jf.object_code = obj
    return jf


def cached_runtime(tag: str, ir: str, name: str, fn_type: Any = FUSE_MAIN_TYPE) -> JitFunction:
    """The runtime's own code (``ir``, entry ``name``): from the disk cache (kind ``runtime``, keyed by ``tag``,
    the target and the IR) when present, else compiled at O2 and stored. A JIT compile costs tens of
    milliseconds per process; loading the object, about one."""
    from .diskcache import read_entry, write_entry

    key = hashlib.sha256(f"{tag}|{target_fingerprint()}\n{ir}".encode()).hexdigest()
    entry = read_entry(key, "runtime")
    if entry is not None:
        try:
            with unrecorded():
                return load_object(entry[1], tuple(entry[0]["symbols"]), name=name, fn_type=fn_type)
        except (JitError, KeyError, TypeError):
            pass
    with unrecorded():
        jf = jit_compile(ir, name=name, opt_level=2, fn_type=fn_type, keep_object=True)
    if jf.object_code is not None:
        write_entry(key, {"symbols": list(jf.symbols)}, jf.object_code, "runtime")
    return jf


UNIT_STATS: Counter[str] = Counter()
"""Compilation units (kernels and entries) ``compiled`` by LLVM, or ``reused`` from memory or disk: for tests."""

_UNITS: dict[str, bytes] = {}  # object code by unit key, this process (at most _UNITS_MAX; none if FUSE_CACHE_MAX=0)
_UNITS_MAX = 4096


def unit_key(ir: str, opt_level: int) -> str:
    """The cache key of one unit's object code: its IR, the optimisation level and the target."""
    return hashlib.sha256(f"fuse-unit 1|{target_fingerprint()}|O{opt_level}\n{ir}".encode()).hexdigest()


def _unit_object(ir: str, opt_level: int, tm: llvm.TargetMachine, timings: dict[str, float], entry: str) -> bytes:
    """Parse, optimise and generate code for one unit (under the caller's lock); the ELF object. ``tm`` is
    the JIT's O3 target machine; a large entry's code is generated at O0 (:func:`codegen_level`)."""
    t0 = time.perf_counter()
    mod = _parse(ir, tm)
    t1 = time.perf_counter()
    _optimise(mod, tm, opt_level)
    t2 = time.perf_counter()
    obj = (tm if codegen_level(ir, entry) == 3 else _target_machine(0)).emit_object(mod)
    t3 = time.perf_counter()
    for k, dt in (("parse", t1 - t0), ("optimize", t2 - t1), ("codegen", t3 - t2)):
        timings[k] = timings.get(k, 0.0) + dt
        record(f"llvm-{k}", dt)
    return bytes(obj)


def jit_units(
    units: list[tuple[str, int]],
    *,
    name: str = ENTRY_NAME,
    fn_type: Any = FUSE_MAIN_TYPE,
    cache: bool = True,
) -> JitFunction:
    """Compile units of IR (text, optimisation level) separately and link them into one engine.

    Each unit's object code is kept by its key (:func:`unit_key`) in memory
    and, with ``cache``, on disk (kind ``units``): a unit compiled once, in
    this process or an earlier one, is never optimised again. The result's
    ``units`` are the keys, in order, from which :func:`load_units` links the
    same code again.
    """
    from .diskcache import read_entry, write_entry

    defined = {n for ir, _ in units for n in _DEFINE.findall(ir)}
    symbols = tuple(sorted({s for ir, _ in units for s in _external_symbols(ir)} - defined))
    _resolve(symbols)
    from fuse_mlir.backends.memcache import max_entries

    keep = max_entries() > 0  # FUSE_CACHE_MAX=0: nothing compiled stays in memory
    timings: dict[str, float] = {}
    keys, objects = [], []
    with _lock:
        tm = _target_machine(3)
        for ir, level in units:
            key = unit_key(ir, level)
            obj = _UNITS.get(key) if cache else None
            if obj is None and cache:
                entry = read_entry(key, "units")
                obj = entry[1] if entry is not None else None
            if obj is None:
                UNIT_STATS["compiled"] += 1
                obj = _unit_object(ir, level, tm, timings, name)
                if cache:
                    write_entry(key, {"symbols": list(_external_symbols(ir))}, obj, "units")
            else:
                UNIT_STATS["reused"] += 1
            if cache and keep:
                if len(_UNITS) >= _UNITS_MAX:
                    _UNITS.pop(next(iter(_UNITS)))
                _UNITS[key] = obj
            keys.append(key)
            objects.append(obj)
        t0 = time.perf_counter()
        jf = _link(objects, symbols, name, fn_type)
        timings["link"] = time.perf_counter() - t0
    record("llvm-link", timings["link"])
    jf.timings = timings
    jf.units = tuple(keys)
    return jf


def _link(objects: list[bytes], symbols: tuple[str, ...], name: str, fn_type: Any) -> JitFunction:
    """One MCJIT engine holding ``objects`` (their symbols resolve among each other); ``name`` from it."""
    with _lock:
        tm = _target_machine(0)
        empty = llvm.parse_assembly("")
        empty.triple = tm.triple
        empty.data_layout = str(tm.target_data)
        engine = llvm.create_mcjit_compiler(empty, tm)
        try:
            for obj in objects:
                engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        except RuntimeError as err:
            raise JitError(f"cannot load machine code (a damaged cache entry?): {err}") from None
        engine.finalize_object()
        address = engine.get_function_address(name)
    if not address:
        raise JitError(f"the machine code defines no function @{name}")
    return JitFunction(fn_type(address), address, engine, {}, None, symbols)


def load_units(
    keys: list[str], symbols: tuple[str, ...], *, name: str = ENTRY_NAME, fn_type: Any = FUSE_MAIN_TYPE
) -> JitFunction:
    """Link the units stored under ``keys`` (memory, else disk) into a new engine; a JitError when one is missing
    or damaged (the caller then compiles again)."""
    from .diskcache import read_entry

    _resolve(symbols)
    t0 = time.perf_counter()
    objects = []
    for key in keys:
        obj = _UNITS.get(key)
        if obj is None:
            entry = read_entry(key, "units")
            if entry is None:
                raise JitError(f"compilation unit {key[:12]} is not in the cache")
            obj = entry[1]
        objects.append(obj)
    jf = _link(objects, symbols, name, fn_type)
    jf.timings = {"load": time.perf_counter() - t0}
    record("llvm-load", jf.timings["load"])
    jf.units = tuple(keys)
    UNIT_STATS["reused"] += len(keys)
    return jf
