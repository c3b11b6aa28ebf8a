"""The native thread pool behind parallel loop nests: ``fuse_parallel_for`` and the thread settings.

Kernels run a parallel region by calling

```c
int32_t fuse_parallel_for(int32_t (*chunk)(void *env, int64_t c, int64_t *err), void *env, int64_t n,
                          int64_t *err);
```

which runs ``chunk(env, c, err_c)`` for every ``c`` in ``[0, n)`` and returns
when all are done: chunk 0 and any chunk no worker can take on the calling
thread, the others on persistent worker threads (worker ``c`` runs chunk ``c``).
A chunk returns 0 or an error code with its details in ``err_c[0..2]``; the
region returns the code of the first failing chunk in chunk order (its details
copied to ``err``), else 0, so errors are reported as a serial run would. The pool is
a small LLVM IR module compiled once per process by llvmlite; its workers are
POSIX threads that poll for the next region for the spin time (:func:`set_spin`,
``FUSE_SPIN_US``, default 100 µs: a wake-up costs tens of microseconds, more in a
virtual machine) and then sleep on a condition variable; the caller waits for
the last worker the same way. They are started lazily up to the largest region
seen, run with every signal blocked (Python's handlers stay on Python's
threads), and are never left running work:
the caller waits for every chunk before it returns, whatever the chunks report
(chunk functions return their error codes through ``env``, never unwind).

A worker woken from its sleep may be put by the kernel's scheduler on the CPU
its caller runs on (measured on this project's 2-CPU virtual machine: about half
of the regions after a 10 ms pause). It would then wait there until the caller
has claimed every chunk, and the region would run on one core. So a caller that
woke a sleeping worker yields its CPU once (``sched_yield``) before it claims
chunks, and a worker that joins a region on the caller's CPU (``sched_getcpu``)
moves itself off it: it narrows its CPU mask to the other allowed CPUs for one
``sched_setaffinity`` call, which migrates it, then restores the mask. Where
the C library lacks these calls (not Linux), they are stubs that fail and the
worker stays where it is.

Only one region runs on the pool at a time: a region started while another is
running (a second Python thread calling a kernel, or a chunk that itself holds a
region) runs all its chunks in order on its own thread (``trylock``), so there
is no deadlock, and the results are the same because the chunking is (a
serial run stops at the first failing chunk). After
``os.fork`` the child re-initialises the pool (its threads did not survive).

Settings: :func:`default_threads` (``FUSE_NUM_THREADS``, else the CPUs this
process may run on), :func:`default_spin_us` and :func:`default_parallel_min`
(``FUSE_PARALLEL_MIN``, the least amount of work, in innermost iterations, that
a region is split for).
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.targets import CHUNKS_PER_THREAD

from .jit import MONOTONIC_NS_IR, JitError, JitFunction, cached_runtime, register_symbol, register_symbol_provider

__all__ = [
    "MAX_CHUNKS",
    "MAX_THREADS",
    "SCHEDULER_CALLS",
    "default_parallel_min",
    "default_spin_us",
    "default_threads",
    "ensure_pool",
    "parallel_for_address",
    "pool_ir",
    "pool_workers",
    "resolve",
    "set_spin",
]

MAX_THREADS = 1024
"""The most threads a kernel may be compiled for."""

MAX_CHUNKS = MAX_THREADS * CHUNKS_PER_THREAD
"""The most chunks one region may have (the pool's result tables); a larger region runs serially."""

_SLOT = 512  # bytes reserved for each pthread object (glibc needs 40 or 48)
_CPU_WORDS = 16  # 64-bit words of the CPU masks the pool reads and sets (glibc's cpu_set_t: 1024 CPUs)

SCHEDULER_CALLS = {
    "sched_getcpu": ("i32 @sched_getcpu()", "ret i32 -1"),
    "sched_yield": ("i32 @sched_yield()", "ret i32 -1"),
    "sched_getaffinity": ("i32 @sched_getaffinity(i32 %pid, i64 %size, ptr %set)", "ret i32 -1"),
    "sched_setaffinity": ("i32 @sched_setaffinity(i32 %pid, i64 %size, ptr %set)", "ret i32 -1"),
}
"""The scheduler calls the pool uses to move a worker off the caller's CPU (Linux, glibc): each is declared when
the process provides it, else defined as a stub that fails (the worker then stays where it is)."""

DEFAULT_SPIN_US = 100
"""How long, in microseconds, a pool thread keeps polling for the next region before it sleeps (``FUSE_SPIN_US``)."""

_MACHINE = platform.machine().lower()
if _MACHINE in ("x86_64", "amd64", "i386", "i686"):
    _PAUSE, _PAUSE_DECL = "call void @llvm.x86.sse2.pause()", "declare void @llvm.x86.sse2.pause()"
elif _MACHINE in ("aarch64", "arm64"):
    _PAUSE, _PAUSE_DECL = "call void @llvm.aarch64.hint(i32 1)", "declare void @llvm.aarch64.hint(i32)"
else:
    _PAUSE, _PAUSE_DECL = "", ""

_POOL_IR = f"""
@pool_m = internal global [{_SLOT} x i8] zeroinitializer, align 64
@pool_work = internal global [{_SLOT} x i8] zeroinitializer, align 64
@pool_done = internal global [{_SLOT} x i8] zeroinitializer, align 64
@pool_region = internal global [{_SLOT} x i8] zeroinitializer, align 64
@pool_gen = internal global i64 0
@pool_nworkers = internal global i64 0
@pool_active = internal global i64 0
@pool_busy = internal global i64 0
@pool_open = internal global i64 0
@pool_n = internal global i64 0
@pool_next = internal global i64 0, align 64
@pool_spin_ns = internal global i64 0, align 8
@pool_caller_cpu = internal global i32 -1
@pool_sleepers = internal global i64 0
@pool_fn = internal global ptr null
@pool_env = internal global ptr null
@pool_start = internal global [{MAX_THREADS + 1} x i64] zeroinitializer
@pool_rc = internal global [{MAX_CHUNKS} x i32] zeroinitializer
@pool_err = internal global [{3 * MAX_CHUNKS} x i64] zeroinitializer

declare i32 @pthread_mutex_init(ptr, ptr)
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_trylock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_init(ptr, ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_signal(ptr)
declare i32 @pthread_cond_broadcast(ptr)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i32 @pthread_sigmask(i32, ptr, ptr)
declare i32 @sigfillset(ptr)
{{AFFINITY_DECLS}}
{MONOTONIC_NS_IR}
{_PAUSE_DECL}

define void @fuse_pool_init() {{
entry:
  call i32 @pthread_mutex_init(ptr @pool_m, ptr null)
  call i32 @pthread_mutex_init(ptr @pool_region, ptr null)
  call i32 @pthread_cond_init(ptr @pool_work, ptr null)
  call i32 @pthread_cond_init(ptr @pool_done, ptr null)
  store i64 0, ptr @pool_gen
  store i64 0, ptr @pool_nworkers
  store i64 0, ptr @pool_active
  store i64 0, ptr @pool_busy
  store i64 0, ptr @pool_open
  store i64 0, ptr @pool_sleepers
  ret void
}}

define i64 @fuse_pool_workers() {{
entry:
  call i32 @pthread_mutex_lock(ptr @pool_m)
  %n = load i64, ptr @pool_nworkers
  call i32 @pthread_mutex_unlock(ptr @pool_m)
  ret i64 %n
}}

; Claim chunks of the open region (an atomic counter) and run them until none is left.
define internal void @fuse_pool_claim(ptr %fn, ptr %env, i64 %n) {{
entry:
  br label %claim
claim:
  %c = atomicrmw add ptr @pool_next, i64 1 monotonic
  %more = icmp slt i64 %c, %n
  br i1 %more, label %run, label %done
run:
  call void @fuse_pool_chunk(ptr %fn, ptr %env, i64 %c)
  br label %claim
done:
  ret void
}}

define internal ptr @fuse_pool_worker(ptr %arg) {{
entry:
  %id = ptrtoint ptr %arg to i64
  call i32 @pthread_mutex_lock(ptr @pool_m)
  %sp = getelementptr inbounds [{MAX_THREADS + 1} x i64], ptr @pool_start, i64 0, i64 %id
  %seen0 = load i64, ptr %sp
  br label %wait
wait:
  %seen = phi i64 [ %seen0, %entry ], [ %seen, %sleep ], [ %g, %after ]
  %g = load atomic i64, ptr @pool_gen monotonic, align 8
  %same = icmp eq i64 %g, %seen
  br i1 %same, label %sleep, label %go
sleep:
  %s0 = load i64, ptr @pool_sleepers
  %s1 = add i64 %s0, 1
  store i64 %s1, ptr @pool_sleepers
  call i32 @pthread_cond_wait(ptr @pool_work, ptr @pool_m)
  %s2 = load i64, ptr @pool_sleepers
  %s3 = sub i64 %s2, 1
  store i64 %s3, ptr @pool_sleepers
  br label %wait
go:
  %open = load i64, ptr @pool_open
  %act = load i64, ptr @pool_active
  %wanted = icmp sle i64 %id, %act
  %isopen = icmp ne i64 %open, 0
  %part = and i1 %wanted, %isopen
  br i1 %part, label %join, label %after
join:
  %b = load atomic i64, ptr @pool_busy monotonic, align 8
  %b1 = add i64 %b, 1
  store atomic i64 %b1, ptr @pool_busy monotonic, align 8
  %fn = load ptr, ptr @pool_fn
  %env = load ptr, ptr @pool_env
  %n = load i64, ptr @pool_n
  %caller = load i32, ptr @pool_caller_cpu
  call i32 @pthread_mutex_unlock(ptr @pool_m)
  call void @fuse_pool_leave(i32 %caller)
  call void @fuse_pool_claim(ptr %fn, ptr %env, i64 %n)
  call i32 @pthread_mutex_lock(ptr @pool_m)
  %l = load atomic i64, ptr @pool_busy monotonic, align 8
  %l1 = sub i64 %l, 1
  store atomic i64 %l1, ptr @pool_busy release, align 8
  %z = icmp eq i64 %l1, 0
  br i1 %z, label %signal, label %after
signal:
  call i32 @pthread_cond_signal(ptr @pool_done)
  br label %after
after:
  call i32 @pthread_mutex_unlock(ptr @pool_m)
  call i1 @fuse_pool_poll(ptr @pool_gen, i64 %g, i1 false)
  call i32 @pthread_mutex_lock(ptr @pool_m)
  br label %wait
}}

; A worker that woke up on the CPU the caller runs on (where it would wait until the caller's own chunks are
; done) moves off it: it narrows its CPU mask to the others for one sched_setaffinity call, which migrates it,
; and restores the mask at once. Nothing happens when it runs elsewhere, or no other CPU is allowed.
define internal void @fuse_pool_leave(i32 %caller) {{
entry:
  %set = alloca [{_CPU_WORDS} x i64], align 8
  %narrow = alloca [{_CPU_WORDS} x i64], align 8
  %me = call i32 @sched_getcpu()
  %same = icmp eq i32 %me, %caller
  %known = icmp sge i32 %me, 0
  %inset = icmp slt i32 %me, {64 * _CPU_WORDS}
  %a = and i1 %same, %known
  %colocated = and i1 %a, %inset
  br i1 %colocated, label %read, label %done
read:
  %grc = call i32 @sched_getaffinity(i32 0, i64 {8 * _CPU_WORDS}, ptr %set)
  %gok = icmp eq i32 %grc, 0
  br i1 %gok, label %copy, label %done
copy:
  call void @llvm.memcpy.p0.p0.i64(ptr %narrow, ptr %set, i64 {8 * _CPU_WORDS}, i1 false)
  %me64 = zext i32 %me to i64
  %w = lshr i64 %me64, 6
  %b = and i64 %me64, 63
  %wp = getelementptr inbounds i64, ptr %narrow, i64 %w
  %word = load i64, ptr %wp
  %bit = shl i64 1, %b
  %mask = xor i64 %bit, -1
  %cleared = and i64 %word, %mask
  store i64 %cleared, ptr %wp
  br label %scan
scan:
  %k = phi i64 [ 0, %copy ], [ %k1, %scan ]
  %any = phi i64 [ 0, %copy ], [ %any1, %scan ]
  %kp = getelementptr inbounds i64, ptr %narrow, i64 %k
  %kw = load i64, ptr %kp
  %any1 = or i64 %any, %kw
  %k1 = add i64 %k, 1
  %end = icmp eq i64 %k1, {_CPU_WORDS}
  br i1 %end, label %check, label %scan
check:
  %other = icmp ne i64 %any1, 0
  br i1 %other, label %move, label %done
move:
  %src = call i32 @sched_setaffinity(i32 0, i64 {8 * _CPU_WORDS}, ptr %narrow)
  %mok = icmp eq i32 %src, 0
  br i1 %mok, label %restore, label %done
restore:
  call i32 @sched_setaffinity(i32 0, i64 {8 * _CPU_WORDS}, ptr %set)
  br label %done
done:
  ret void
}}

; Poll *%p (acquire) until it equals %v (%equal) or differs from it (not %equal), for at most the spin time:
; whether it did. The pool's threads call it, holding no lock, before they block on a condition variable.
define internal i1 @fuse_pool_poll(ptr %p, i64 %v, i1 %equal) {{
entry:
  %ts = alloca [2 x i64], align 8
  %t0 = call i64 @fuse_monotonic_ns(ptr %ts)
  br label %spin
spin:
  %now = load atomic i64, ptr %p acquire, align 8
  %same = icmp eq i64 %now, %v
  %met = icmp eq i1 %same, %equal
  br i1 %met, label %done, label %tick
tick:
  {_PAUSE}
  %t = call i64 @fuse_monotonic_ns(ptr %ts)
  %spent = sub i64 %t, %t0
  %limit = load atomic i64, ptr @pool_spin_ns monotonic, align 8
  %more = icmp slt i64 %spent, %limit
  br i1 %more, label %spin, label %done
done:
  %r = phi i1 [ true, %spin ], [ false, %tick ]
  ret i1 %r
}}

define void @fuse_pool_set_spin(i64 %ns) {{
entry:
  store atomic i64 %ns, ptr @pool_spin_ns monotonic, align 8
  ret void
}}

; Chunk %c of the region that holds the pool: its code and details go to the pool's tables.
define internal void @fuse_pool_chunk(ptr %fn, ptr %env, i64 %c) {{
entry:
  %e3 = mul i64 %c, 3
  %err = getelementptr inbounds i64, ptr @pool_err, i64 %e3
  %rc = call i32 %fn(ptr %env, i64 %c, ptr %err)
  %rp = getelementptr inbounds i32, ptr @pool_rc, i64 %c
  store i32 %rc, ptr %rp
  ret void
}}

; All chunks in order on this thread, stopping at the first that fails (its details go to %err).
define internal i32 @fuse_pool_serial(ptr %fn, ptr %env, i64 %n, ptr %err) {{
entry:
  br label %head
head:
  %c = phi i64 [ 0, %entry ], [ %c1, %body ]
  %more = icmp slt i64 %c, %n
  br i1 %more, label %body, label %done
body:
  %rc = call i32 %fn(ptr %env, i64 %c, ptr %err)
  %c1 = add i64 %c, 1
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %head, label %failed
failed:
  ret i32 %rc
done:
  ret i32 0
}}

define i32 @fuse_parallel_for(ptr %fn, ptr %env, i64 %n, i64 %threads, ptr %err) {{
entry:
  %set = alloca [64 x i64], align 16
  %old = alloca [64 x i64], align 16
  %tid = alloca i64, align 8
  %few = icmp slt i64 %n, 2
  %alone = icmp slt i64 %threads, 2
  %small = or i1 %few, %alone
  br i1 %small, label %serial, label %try
serial:
  %src = call i32 @fuse_pool_serial(ptr %fn, ptr %env, i64 %n, ptr %err)
  ret i32 %src
try:
  %big0 = icmp sgt i64 %n, {MAX_CHUNKS}
  br i1 %big0, label %serial, label %trylock
trylock:
  %trc = call i32 @pthread_mutex_trylock(ptr @pool_region)
  %busy = icmp ne i32 %trc, 0
  br i1 %busy, label %serial, label %locked
locked:
  call i32 @pthread_mutex_lock(ptr @pool_m)
  %t0 = call i64 @llvm.smin.i64(i64 %threads, i64 %n)
  %t1 = call i64 @llvm.smin.i64(i64 %t0, i64 {MAX_THREADS})
  %want = sub i64 %t1, 1
  %have0 = load i64, ptr @pool_nworkers
  %grow = icmp slt i64 %have0, %want
  br i1 %grow, label %mask, label %publish
mask:
  call i32 @sigfillset(ptr %set)
  call i32 @pthread_sigmask(i32 0, ptr %set, ptr %old)
  br label %spawn
spawn:
  %have = phi i64 [ %have0, %mask ], [ %have1, %started ]
  %more = icmp slt i64 %have, %want
  br i1 %more, label %create, label %unmask
create:
  %id = add i64 %have, 1
  %gen0 = load atomic i64, ptr @pool_gen monotonic, align 8
  %sp = getelementptr inbounds [{MAX_THREADS + 1} x i64], ptr @pool_start, i64 0, i64 %id
  store i64 %gen0, ptr %sp
  %arg = inttoptr i64 %id to ptr
  %crc = call i32 @pthread_create(ptr %tid, ptr null, ptr @fuse_pool_worker, ptr %arg)
  %ok = icmp eq i32 %crc, 0
  br i1 %ok, label %started, label %unmask
started:
  %t = load i64, ptr %tid
  call i32 @pthread_detach(i64 %t)
  store i64 %id, ptr @pool_nworkers
  %have1 = add i64 %have, 1
  br label %spawn
unmask:
  call i32 @pthread_sigmask(i32 2, ptr %old, ptr null)
  br label %publish
publish:
  %nw = load i64, ptr @pool_nworkers
  %fewer = icmp slt i64 %nw, %want
  %act = select i1 %fewer, i64 %nw, i64 %want
  store ptr %fn, ptr @pool_fn
  store ptr %env, ptr @pool_env
  store i64 %n, ptr @pool_n
  store atomic i64 0, ptr @pool_next monotonic, align 64
  store i64 %act, ptr @pool_active
  store i64 1, ptr @pool_open
  %ccpu = call i32 @sched_getcpu()
  store i32 %ccpu, ptr @pool_caller_cpu
  %g = load atomic i64, ptr @pool_gen monotonic, align 8
  %g1 = add i64 %g, 1
  store atomic i64 %g1, ptr @pool_gen release, align 8
  %asleep = load i64, ptr @pool_sleepers
  call i32 @pthread_cond_broadcast(ptr @pool_work)
  call i32 @pthread_mutex_unlock(ptr @pool_m)
  %woke = icmp ne i64 %asleep, 0
  br i1 %woke, label %yield, label %work
yield:
  call i32 @sched_yield()
  br label %work
work:
  call void @fuse_pool_claim(ptr %fn, ptr %env, i64 %n)
  call i32 @pthread_mutex_lock(ptr @pool_m)
  store i64 0, ptr @pool_open
  %inside0 = load atomic i64, ptr @pool_busy monotonic, align 8
  %finished0 = icmp eq i64 %inside0, 0
  br i1 %finished0, label %scan, label %await
await:
  call i32 @pthread_mutex_unlock(ptr @pool_m)
  %finished1 = call i1 @fuse_pool_poll(ptr @pool_busy, i64 0, i1 true)
  br i1 %finished1, label %scan_head, label %relock
relock:
  call i32 @pthread_mutex_lock(ptr @pool_m)
  br label %join
join:
  %inside = load atomic i64, ptr @pool_busy acquire, align 8
  %finished = icmp eq i64 %inside, 0
  br i1 %finished, label %scan, label %block
block:
  call i32 @pthread_cond_wait(ptr @pool_done, ptr @pool_m)
  br label %join
scan:
  call i32 @pthread_mutex_unlock(ptr @pool_m)
  br label %scan_head
scan_head:
  %c = phi i64 [ 0, %scan ], [ 0, %await ], [ %c1, %scan_next ]
  %cmore = icmp slt i64 %c, %n
  br i1 %cmore, label %scan_body, label %out
scan_body:
  %rp = getelementptr inbounds i32, ptr @pool_rc, i64 %c
  %rc = load i32, ptr %rp
  %good = icmp eq i32 %rc, 0
  br i1 %good, label %scan_next, label %report
scan_next:
  %c1 = add i64 %c, 1
  br label %scan_head
report:
  %e3 = mul i64 %c, 3
  %ep = getelementptr inbounds i64, ptr @pool_err, i64 %e3
  call void @llvm.memcpy.p0.p0.i64(ptr %err, ptr %ep, i64 24, i1 false)
  br label %out
out:
  %res = phi i32 [ 0, %scan_head ], [ %rc, %report ]
  call i32 @pthread_mutex_unlock(ptr @pool_region)
  ret i32 %res
}}

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare i64 @llvm.smin.i64(i64, i64)
"""

_LIBC_SYMBOLS = (
    "pthread_mutex_init",
    "pthread_mutex_lock",
    "pthread_mutex_trylock",
    "pthread_mutex_unlock",
    "pthread_cond_init",
    "pthread_cond_wait",
    "pthread_cond_signal",
    "pthread_cond_broadcast",
    "pthread_create",
    "pthread_detach",
    "pthread_sigmask",
    "sigfillset",
    "clock_gettime",
)


def pool_ir(provided: set[str] | frozenset[str] = frozenset(SCHEDULER_CALLS)) -> str:
    """The pool's LLVM IR, declaring the scheduler calls of :data:`SCHEDULER_CALLS` the process ``provided`` and
    defining the others as stubs that fail."""
    parts = [
        f"declare {sig}" if name in provided else f"define internal {sig} {{\n  {stub}\n}}"
        for name, (sig, stub) in SCHEDULER_CALLS.items()
    ]
    return _POOL_IR.replace("{AFFINITY_DECLS}", "\n".join(parts))


_lock = threading.Lock()
_pool: JitFunction | None = None
_init_fn: ctypes._CFuncPtr | None = None  # type: ignore[name-defined]
_workers_fn: ctypes._CFuncPtr | None = None  # type: ignore[name-defined]
_spin_fn: ctypes._CFuncPtr | None = None  # type: ignore[name-defined]
_spin_us: int | None = None  # set_spin's value; None: the default, read when the pool starts


def _reinit_after_fork() -> None:
    if _init_fn is not None:
        _init_fn()
        _apply_spin()


def _apply_spin() -> None:
    if _spin_fn is not None:
        _spin_fn(1000 * (default_spin_us() if _spin_us is None else _spin_us))


def ensure_pool() -> None:
    """Compile the pool once per process and register ``fuse_parallel_for`` for the kernels (idempotent)."""
    global _pool, _init_fn, _workers_fn, _spin_fn
    with _lock:
        if _pool is not None:
            return

        process = ctypes.CDLL(None)
        for name in _LIBC_SYMBOLS:
            try:
                address = ctypes.cast(getattr(process, name), ctypes.c_void_p).value
            except AttributeError:
                raise JitError(f"the thread pool needs {name}, which this process does not provide") from None
            register_symbol(name, address or 0)
        found: set[str] = set()
        for name in SCHEDULER_CALLS:
            fn = getattr(process, name, None)
            address = ctypes.cast(fn, ctypes.c_void_p).value if fn is not None else None
            if address:
                register_symbol(name, address)
                found.add(name)
        jit = cached_runtime("fuse-pool 4", pool_ir(found), "fuse_parallel_for", ctypes.CFUNCTYPE(ctypes.c_int32))
        void = ctypes.CFUNCTYPE(None)
        _init_fn = void(jit.engine.get_function_address("fuse_pool_init"))
        _workers_fn = ctypes.CFUNCTYPE(ctypes.c_int64)(jit.engine.get_function_address("fuse_pool_workers"))
        _spin_fn = ctypes.CFUNCTYPE(None, ctypes.c_int64)(jit.engine.get_function_address("fuse_pool_set_spin"))
        _init_fn()
        _apply_spin()
        register_symbol("fuse_parallel_for", jit.address, jit)
        os.register_at_fork(after_in_child=_reinit_after_fork)
        _pool = jit


def parallel_for_address() -> int:
    """The address of ``fuse_parallel_for`` (compiling the pool on first use): for callers outside kernels."""
    ensure_pool()
    assert _pool is not None
    return int(_pool.address)


def pool_workers() -> int:
    """How many worker threads the pool has started in this process (0 before the first parallel region)."""
    return int(_workers_fn()) if _workers_fn is not None else 0


def _env_int(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise FuseError(f"{name} must be an integer, got {text!r}") from None


def default_threads() -> int:
    """``FUSE_NUM_THREADS`` if set, else the number of CPUs this process may run on."""
    n = _env_int("FUSE_NUM_THREADS")
    if n is not None:
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_spin_us() -> int:
    """``FUSE_SPIN_US`` if set, else :data:`DEFAULT_SPIN_US`: how long an idle pool thread polls before sleeping."""
    n = _env_int("FUSE_SPIN_US")
    if n is None:
        return DEFAULT_SPIN_US
    if n < 0:
        raise FuseError(f"FUSE_SPIN_US must be a non-negative integer (microseconds), got {n}")
    return n


def set_spin(microseconds: int | None) -> None:
    """Let idle pool threads poll for ``microseconds`` before sleeping (0: sleep at once; None: the default).

    The pool's workers, after a region, and the caller, waiting for the last
    worker to finish, poll for this long before they block on a condition
    variable: a wake-up costs tens of microseconds (more in a virtual
    machine), so back-to-back calls start their threads at once; the price is
    at most this much CPU time per thread after the last region.
    """
    global _spin_us
    if microseconds is not None and (
        isinstance(microseconds, bool) or not isinstance(microseconds, int) or microseconds < 0
    ):
        raise FuseError(f"the pool's spin time must be a non-negative integer (microseconds), got {microseconds!r}")
    with _lock:
        _spin_us = microseconds
        _apply_spin()


def default_parallel_min() -> int:
    """``FUSE_PARALLEL_MIN`` if set, else the llvm lowering's ``PARALLEL_MIN``."""
    n = _env_int("FUSE_PARALLEL_MIN")
    if n is None:
        from fuse_mlir.targets import PARALLEL_MIN

        return PARALLEL_MIN
    return n


def resolve(threads: object, parallel_min: object) -> tuple[int, int]:
    """The thread count and split threshold a kernel is compiled for (None: the defaults); bad values are FuseErrors."""
    t = default_threads() if threads is None else threads
    m = default_parallel_min() if parallel_min is None else parallel_min
    if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= MAX_THREADS:
        raise FuseError(f"threads must be an integer from 1 to {MAX_THREADS}, got {t!r}")
    if isinstance(m, bool) or not isinstance(m, int) or m < 0:
        raise FuseError(f"parallel_min must be a non-negative integer, got {m!r}")
    return t, m


register_symbol_provider("fuse_parallel_for", ensure_pool)
