"""The llvm backend's executor: tensor_eq → elemwise → (fusion) → loop → LLVM → machine code, cached.

One native kernel is built per tensor_eq module (that is, per program and
input dtype signature; extents stay symbolic). Kernels are cached in memory
and on disk (:mod:`fuse_mlir.backends.llvm.diskcache`) by a sha256 of the
module's text, the backend options, the target CPU and the compiler versions,
so two programs with the same structure share one kernel, a second call
compiles nothing, and a second process only loads machine code.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fuse_mlir.backends.llvm.arena import StatePool, install_allocator
from fuse_mlir.backends.llvm.parallel import resolve as resolve_threads
from fuse_mlir.backends.llvm.runtime import KernelSpec, NativeKernel
from fuse_mlir.backends.memcache import BoundedCache
from fuse_mlir.backends.outputs import check_out
from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.lowered import Lowered, RunResult
from fuse_mlir.targets import checked_build, normalise_opt_level

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

# Imports of xDSL, the dialects and the pass machinery are inside the functions that build code: a warm start
# (every kernel on disk) loads machine code without them (docs/runtime.md, start-up).


@dataclass
class CompiledProgram:
    """A native kernel and how its slots map to the program's names."""

    kernel: NativeKernel
    arg_names: list[tuple[str, str]]  # (name, kind) per non-constant argument slot, in slot order
    results: list[tuple[str, str, str, Loc | None, int]]  # (name, kind, value name, loc, sink index)
    loop_module: ModuleOp | None  # None when loaded from the disk cache (no pass ran)
    compile_seconds: float  # compiling, or loading from disk
    from_disk: bool = False


_CACHE: BoundedCache[CompiledProgram] = BoundedCache()  # LRU, at most $FUSE_CACHE_MAX entries
_LOCK = threading.Lock()

STATS: Counter[str] = Counter()
"""Programs ``compiled`` (passes and LLVM ran), ``loaded`` from the disk cache, and in-memory ``reused``: for
tests and reports."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with Python's cyclic garbage collector off (back on afterwards, if it was on).

    Lowering builds hundreds of thousands of IR objects; the collector's
    repeated scans of that growing heap made compile time quadratic in the
    program's size (more than half the Python time at 200 equations).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _tables(loop_module: ModuleOp) -> tuple[list[tuple[str, str]], list[list[Any]]]:
    """The non-constant argument (name, kind) list and the result entries (JSON-able lists) of a loop module."""
    from fuse_mlir.dialects.abi import LoopAbi

    abi = LoopAbi.read(loop_module)
    results = [[r.name, r.kind, r.tensor, r.loc, r.sink] for r in abi.results or ()]
    return [(a.name, a.kind) for a in abi.args or () if a.kind != "constant"], results


def _result_table(raw: list[list[Any]]) -> list[tuple[str, str, str, Loc | None, int]]:
    return [(n, kind, v, Loc.decode(loc) if loc else None, int(i)) for n, kind, v, loc, i in raw]


def _key(
    te_digest: str,
    strict: bool,
    opt_level: str,
    donate: Sequence[str],
    pipeline: str | None,
    threads: int,
    parallel_min: int,
    check_bounds: bool = False,
) -> str:
    from fuse_mlir.backends.llvm.diskcache import code_version
    from fuse_mlir.backends.llvm.jit import target_fingerprint

    head = (
        f"fuse-kernel 1|{code_version()}|{target_fingerprint()}|strict={strict}|opt_level={opt_level}"
        f"|donate={','.join(sorted(donate))}|pipeline={pipeline}|threads={threads}|parallel_min={parallel_min}|opt=3"
        f"|check_bounds={check_bounds}\n"
    )
    return hashlib.sha256(head.encode() + te_digest.encode()).hexdigest()


def _load(key: str, strict: bool) -> CompiledProgram | None:
    """The program stored on disk under ``key``, or None (absent, corrupt, or its code does not load)."""
    from fuse_mlir.backends.llvm.diskcache import read_entry
    from fuse_mlir.backends.llvm.jit import JitError, load_object, load_units

    t0 = time.perf_counter()
    entry = read_entry(key)
    if entry is None:
        return None
    header, obj = entry
    try:
        spec = KernelSpec.from_json(header["spec"])
        install_allocator()  # the code links against the native fuse_alloc
        if "units" in header:  # linked from separately compiled units, each in the cache under its own key
            jit = load_units([str(k) for k in header["units"]], tuple(header["symbols"]))
        else:
            jit = load_object(obj, tuple(header["symbols"]))
        args = [(str(n), str(k)) for n, k in header["args"]]
        results = _result_table(header["results"])
    except (JitError, KeyError, TypeError, ValueError):
        return None
    kernel = NativeKernel.from_parts(spec, jit, strict=strict)
    return CompiledProgram(kernel, args, results, None, time.perf_counter() - t0, from_disk=True)


def _store(key: str, compiled: CompiledProgram, raw_results: list[list[Any]]) -> None:
    from fuse_mlir.backends.llvm.diskcache import write_entry

    jit = compiled.kernel.jit
    if jit.object_code is None and not jit.units:
        return
    try:
        header = {
            "spec": compiled.kernel.spec.to_json(),
            "symbols": list(jit.symbols),
            "args": [list(a) for a in compiled.arg_names],
            "results": raw_results,
        }
    except TypeError:  # a host-call parameter JSON cannot hold: keep it in memory only
        return
    if jit.units:
        header["units"] = list(jit.units)
    write_entry(key, header, jit.object_code or b"")


def compile_program(
    te_module: ModuleOp | Lowered,
    *,
    strict: bool = False,
    opt_level: str | int = "O2",
    donate: Sequence[str] = (),
    pipeline: str | None = None,
    cache: bool = True,
    threads: int = 1,
    parallel_min: int | None = None,
    check_bounds: bool = False,
) -> CompiledProgram:
    """The native program for a tensor_eq module: from the in-memory cache, else the disk cache, else compiled.

    The key covers everything that changes the code: the module (the sha256 of its text:
    :meth:`Lowered.te_digest`, known without the module on a warm start), ``strict``,
    the optimisation level, the donated inputs (in-place decisions depend on
    them), a custom ``pipeline``, and the thread settings (``threads`` > 1
    splits parallel loop nests whose work reaches ``parallel_min``), and
    ``check_bounds`` (the checked build). ``cache=False`` skips both caches (and stores nothing).
    Given a :class:`Lowered`, its module is touched only when the kernel must be compiled.
    """
    if parallel_min is None:
        from fuse_mlir.targets import PARALLEL_MIN

        parallel_min = PARALLEL_MIN
    opt = normalise_opt_level(opt_level)
    donated = sorted(donate)
    key = ""
    if cache:
        if isinstance(te_module, Lowered):
            digest = te_module.te_digest()
        else:
            from fuse_mlir.ir import module_digest

            digest = module_digest(te_module)
        key = _key(digest, strict, opt, donated, pipeline, threads, parallel_min, check_bounds)
        with _LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            STATS["reused"] += 1
            return hit
        hit = _load(key, strict)
        if hit is not None:
            STATS["loaded"] += 1
            with _LOCK:
                return _CACHE.setdefault(key, hit)
    from fuse_mlir.passes.lowering import lower_to_loop

    module = te_module.module if isinstance(te_module, Lowered) else te_module
    STATS["compiled"] += 1
    t0 = time.perf_counter()
    with gc_paused():  # the tables and the cache entry too: they walk the whole loop module
        loop_module = lower_to_loop(
            module, opt_level=opt, strict=strict, donate=donated, pipeline=pipeline, check_bounds=check_bounds
        )
        kernel = NativeKernel(loop_module, strict=strict, keep_object=cache, threads=threads, parallel_min=parallel_min)
        args, raw_results = _tables(loop_module)
        compiled = CompiledProgram(kernel, args, _result_table(raw_results), loop_module, time.perf_counter() - t0)
        if cache:
            _store(key, compiled, raw_results)
    if cache:
        with _LOCK:
            compiled = _CACHE.setdefault(key, compiled)
    return compiled


class _Bound:
    """One compiled program as one runner calls it: slot order, its own arena pool, donation and output tables."""

    __slots__ = (
        "donated",
        "entry",
        "exports",
        "fixed",
        "input_at",
        "kernel",
        "pool",
        "prog",
        "result_index",
        "sources",
    )

    def __init__(self, prog: CompiledProgram, lowered: Lowered, donate: frozenset[str]):
        self.prog = prog
        self.kernel = prog.kernel
        self.pool = StatePool(prog.kernel)
        self.fixed: list[Any] = [None if kind == "input" else lowered.sources[n] for n, kind in prog.arg_names]
        self.input_at = [(k, n) for k, (n, kind) in enumerate(prog.arg_names) if kind == "input"]
        self.sources = [a for a in self.fixed if a is not None]
        self.donated = {n: True for n in donate}
        self.exports = [(r, name) for r, (name, kind, _, _, _) in enumerate(prog.results) if kind == "export"]
        self.result_index = {name: r for r, name in self.exports}
        self.entry: Any = False  # the native entry (runtime.NativeKernel.native_entry): False until asked for


@dataclass
class NativeExecutor:
    """Runs lowered programs as native code.

    ``strict`` keeps IEEE order and libm; ``opt_level`` picks the llvm
    target's pipeline (O0: no fusion or inplace; O2: the default);
    ``pipeline`` (pass pipeline text) replaces the target's pipeline;
    ``cache`` uses the in-memory and disk compile caches. Each executor (one per
    runner) keeps its own buffer arenas; ``reuse_outputs`` leaves exported
    results in them too, so a call's results are overwritten by the next call
    (like a preallocated ``out``). ``donate`` names inputs whose arrays the
    program may overwrite (JAX-style donation): the inplace pass lets kernels
    write into them, and their buffers may back the allocations a loop
    module's ``fuse.reuse`` pairs them with; any other input is never written.

    ``threads`` (default ``FUSE_NUM_THREADS``, else the CPUs available) and
    ``parallel_min`` (default ``FUSE_PARALLEL_MIN``, else 65536) set how parallel
    loop nests are split (docs/threads.md). ``check_bounds`` (default
    ``FUSE_CHECK_BOUNDS``) builds checked kernels: every load and store tests
    its positions against its buffer (docs/runtime.md).
    """

    strict: bool = False
    opt_level: str | int = "O2"
    pipeline: str | None = None
    cache: bool = True
    reuse_outputs: bool = False
    donate: Sequence[str] = ()
    threads: int | None = None
    parallel_min: int | None = None
    check_bounds: bool | None = None
    # Per lowering, held weakly: a lowering that is gone (a gradient program re-lowered after replace_sources, say)
    # takes its entries with it, and a new one never finds an old one's by a reused id.
    compiled: weakref.WeakKeyDictionary[Lowered, CompiledProgram] = field(default_factory=weakref.WeakKeyDictionary)
    supports_out: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.opt_level = normalise_opt_level(self.opt_level)
        if isinstance(self.donate, str):
            self.donate = (self.donate,)
        self.donate = tuple(sorted(self.donate))
        self._donate = frozenset(self.donate)
        self._bound: weakref.WeakKeyDictionary[Lowered, _Bound] = weakref.WeakKeyDictionary()
        self.threads, self.parallel_min = resolve_threads(self.threads, self.parallel_min)
        self.check_bounds = checked_build(self.check_bounds)

    @property
    def warm_start(self) -> bool:
        """Runners may take lowerings from the warm start index (fuse_mlir.lowering_cache): with the caches on, a
        kernel on disk is found from the lowering's digest alone, so a warm run builds no IR."""
        return bool(self.cache)

    def program_for(self, lowered: Lowered) -> CompiledProgram:
        key = lowered
        if key not in self.compiled:
            unknown = sorted(self._donate - {s.name for s in lowered.inputs})
            if unknown:
                raise FuseError(
                    f"donate names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} not an input of the program"
                )
            self.compiled[key] = compile_program(
                lowered,
                strict=self.strict,
                opt_level=self.opt_level,
                donate=self.donate,
                pipeline=self.pipeline,
                cache=self.cache,
                threads=self.threads or 1,
                parallel_min=self.parallel_min,
                check_bounds=bool(self.check_bounds),
            )
        return self.compiled[key]

    def prepare(self, lowered: Lowered) -> None:
        """Compile (or load from a cache) the kernel for ``lowered`` ahead of its call, so it is timed apart."""
        self._bind(lowered)

    def _bind(self, lowered: Lowered) -> _Bound:
        b = self._bound.get(lowered)
        if b is None:
            b = self._bound[lowered] = _Bound(self.program_for(lowered), lowered, self._donate)
        return b

    def _run(self, b: _Bound, inputs: Mapping[str, Any], out: Mapping[str, Any] | None) -> list[np.ndarray]:
        args = list(b.fixed)
        for k, name in b.input_at:
            args[k] = inputs[name]
        outs = None
        if out:
            spec = b.kernel.spec
            dtypes = {name: spec.result_dtypes[r] for r, name in b.exports}
            checked = check_out(out, dtypes, [a for a in args if isinstance(a, np.ndarray)])
            outs = [None] * len(b.prog.results)
            for name, buf in checked.items():
                outs[b.result_index[name]] = buf
        return b.kernel(args, out=outs, donated=b.donated, keep_outputs=self.reuse_outputs, pool=b.pool)

    def __call__(
        self, lowered: Lowered, arrays: dict[str, np.ndarray], out: Mapping[str, Any] | None = None
    ) -> RunResult:
        b = self._bind(lowered)
        outputs = self._run(b, arrays, out)
        result = RunResult({})
        sinks: dict[int, tuple[str, dict[str, np.ndarray], Loc | None]] = {}
        for (name, kind, value_name, loc, index), value in zip(b.prog.results, outputs):
            if kind == "export":
                result.exports[name] = value
            else:
                sinks.setdefault(index, (name, {}, loc))[1][value_name] = value
        for index in sorted(sinks):
            path, values, loc = sinks[index]
            value = next(iter(values.values())) if len(values) == 1 else values
            result.sinks.append((path, value, loc))
        return result

    def bind(
        self, lowered: Lowered
    ) -> Callable[[Mapping[str, Any], Mapping[str, Any] | None], dict[str, np.ndarray] | None] | None:
        """A direct call for one signature: inputs by name to exports, or None when they do not fit it.

        The returned function takes the same names as the validated call it
        was made for; it returns None (the caller then takes the general path)
        when ``out`` is given or an input is not a plain array of the dtype and
        rank the kernel was compiled for. The kernel still checks every array
        (static extents in Python, layout in ``fuse_enter``, dynamic extents in
        the native code). None when the program writes sinks.
        """
        b = self._bind(lowered)
        if len(b.exports) != len(b.prog.results) or b.donated:
            return None  # sinks, or donated inputs (Runner.run copies those that are read-only or aliased)
        kernel, pool, donated, keep = b.kernel, b.pool, b.donated, self.reuse_outputs
        free, fixed, exports = pool.free, b.fixed, b.exports
        gate = [(name, kernel._slots[k].dtype, kernel._slots[k].rank) for k, name in b.input_at]
        at = [k for k, _ in b.input_at]
        only_inputs = at == list(range(len(fixed)))
        nd = np.ndarray

        def call(inputs: Mapping[str, Any], out: Mapping[str, Any] | None) -> dict[str, np.ndarray] | None:
            if out:
                return None
            args = []
            for name, dtype, rank in gate:
                a = inputs[name]
                if type(a) is not nd or a.dtype is not dtype or a.ndim != rank:
                    return None
                args.append(a)
            if not only_inputs:
                full = list(fixed)
                for k, a in zip(at, args):
                    full[k] = a
                args = full
            state = free.pop() if free else pool.take()
            try:
                values = kernel._run(state, args, None, donated, keep)
            finally:
                state.end()
                free.append(state)
            return {name: values[r] for r, name in exports}

        return call

    def bind_native(self, lowered: Lowered) -> Any:
        """The native entry for one signature (:class:`fuse_mlir.backends.llvm.entry.NativeEntry`): ``call`` with
        the keyword dict of a call returns the exports, or None when it declines (the caller then takes the general
        path); ``seconds`` is its latest call's wall time.

        None where the direct path has none (sinks, donated inputs), the program reads sources, or the process
        cannot build one. Built once per lowering and executor; it checks every array natively (type, dtype,
        rank, static extents, layout) and leaves anything else to the Python path.
        """
        b = self._bind(lowered)
        ok = len(b.exports) == len(b.prog.results) and not b.donated and not b.sources
        if b.entry is False:
            b.entry = b.kernel.native_entry(b.exports, self.reuse_outputs, b.pool) if ok else None
        return b.entry
