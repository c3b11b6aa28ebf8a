"""Every implementation of the benchmark workloads: fuse_mlir's llvm backend and its peers.

An implementation is prepared for one workload and one set of inputs: its
inputs are converted (torch tensors, JAX device arrays), it is compiled and
run once (the first call, timed as ``first_call_seconds``), and its answer is
checked against the workload's NumPy formula evaluated in float64. A peer
that is not installed, or cannot handle the workload here, raises
``Unavailable``; a wrong answer raises ``Mismatch`` instead of being timed.

The peers are written the way their users write them: NumPy and JAX/torch
as array formulas, Numba as explicit loops (``prange`` with
``parallel=True, fastmath=True`` for the parallel variant, preallocated
outputs where an output array is natural).
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from benchmarks.workloads import BY_NAME, Workload

# fuse_mlir's own backends: llvm, then the hand-offs (the same program run by torch, jax and numba).
HANDOFFS: dict[str, tuple[str, dict[str, Any]]] = {
    "fuse-torch": ("torch", {"mode": "eager"}),
    "fuse-torch-compile": ("torch", {"mode": "compile"}),
    "fuse-jax": ("jax", {}),
    "fuse-numba": ("numba", {"parallel": True}),
}
IMPLEMENTATIONS: tuple[str, ...] = (
    "fuse-llvm",
    "fuse-llvm-O0",
    *HANDOFFS,
    "numpy",
    "numba",
    "numba-parallel",
    "numba-fastmath",
    "jax",
    "torch",
    "torch-compile",
    "pytensor",
)
OURS: tuple[str, ...] = ("fuse-llvm", "fuse-llvm-O0")  # fuse-llvm-O0: no fusion, no inplace (the passes' effect)
PEERS: tuple[str, ...] = tuple(i for i in IMPLEMENTATIONS if not i.startswith("fuse-"))
DTYPES: tuple[str, ...] = ("float64", "float32")
TORCH_THREADS = 2


class Unavailable(Exception):
    """The implementation cannot run here (not installed, or failed to compile)."""


class Mismatch(Exception):
    """The implementation's answer differs from the NumPy formula."""


@dataclass
class Prepared:
    """An implementation bound to one workload's inputs, compiled, warmed up and checked."""

    name: str
    call: Callable[[], object]
    to_numpy: Callable[[object], np.ndarray]
    first_call_seconds: float


# -- inputs and the reference ------------------------------------------------


def small_sizes() -> bool:
    """Whether ``FUSE_BENCH_SMALL`` asks for the workloads' small inputs (a quick smoke run)."""
    return os.environ.get("FUSE_BENCH_SMALL", "") not in ("", "0")


def make_inputs(workload: Workload, dtype: str, small: bool = False, seed: int = 0) -> dict[str, np.ndarray]:
    """The workload's inputs at full (or small) size, deterministic in ``seed``."""
    return workload.inputs(np.random.default_rng(seed), np.dtype(dtype), small)


@functools.lru_cache(maxsize=1)
def cached_inputs(name: str, dtype: str, small: bool) -> dict[str, np.ndarray]:
    """``make_inputs`` for the most recent (workload, dtype) only (consecutive benchmarks share it)."""
    return make_inputs(BY_NAME[name], dtype, small)


def arg_names(workload: Workload) -> list[str]:
    """The input names in the order of the workload's NumPy formula's parameters."""
    return list(inspect.signature(workload.numpy).parameters)


def reference(workload: Workload, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The NumPy formula evaluated in float64 (float inputs upcast), the answer every implementation must give."""
    up = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    return np.asarray(workload.numpy(**up))


@functools.lru_cache(maxsize=1)
def cached_reference(name: str, dtype: str, small: bool) -> np.ndarray:
    """``reference`` on ``cached_inputs(name, dtype, small)``."""
    return reference(BY_NAME[name], cached_inputs(name, dtype, small))


def tolerance(dtype: np.dtype) -> float:
    """Allowed error relative to ``max(|reference|, 1)``."""
    return 1e-8 if np.dtype(dtype) == np.float64 else 2e-3


def check(name: str, workload: Workload, got: np.ndarray, want: np.ndarray, dtype: np.dtype) -> None:
    """Raise ``Mismatch`` unless ``got`` has ``want``'s shape and values within ``tolerance``."""
    got = np.asarray(got)
    if got.shape != want.shape:
        raise Mismatch(f"{name} on {workload.name}: shape {got.shape}, expected {want.shape}")
    if not np.all(np.isfinite(got)):
        raise Mismatch(f"{name} on {workload.name}: non-finite values")
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1.0)
    err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0
    if err > tolerance(dtype):
        raise Mismatch(f"{name} on {workload.name} ({np.dtype(dtype).name}): relative error {err:.3g}")


def pytensor_function(name: str, args: list[np.ndarray]) -> Callable[..., Any]:
    """The workload as a compiled PyTensor function of the NumPy arrays ``args`` (Unavailable if not installed)."""
    try:
        import pytensor
        import pytensor.tensor as pt
    except Exception as e:
        raise Unavailable(f"pytensor not importable: {e}") from None
    xs = [pt.tensor(dtype=str(a.dtype), shape=(None,) * a.ndim) for a in args]

    def softmax(x):
        e = pt.exp(x - pt.max(x, axis=1, keepdims=True))
        return e / pt.sum(e, axis=1, keepdims=True)

    def lse(x):
        m = pt.max(x, axis=1, keepdims=True)
        return pt.log(pt.sum(pt.exp(x - m), axis=1)) + m[:, 0]

    formulas: dict[str, Callable[..., Any]] = {
        "exp_mul_add": lambda X, Y2, Z: pt.exp(X) * Y2 + Z,
        "sum_exp_mul_add": lambda X, Y2, Z: pt.sum(pt.exp(X) * Y2 + Z),
        "row_softmax": softmax,
        "row_logsumexp": lse,
        "relu_matmul_bias": lambda W, X, B: pt.maximum(pt.dot(W, X) + B[:, None], 0),
        "gather_sum": lambda X, Idx: pt.sum(X[Idx]),
        "row_variance": lambda X: pt.var(X, axis=1),
        "contract3": lambda A, B: pt.tensordot(A, B, axes=([1, 2], [0, 1])),
        "call_overhead": lambda X, Y2, Z: pt.sum(pt.exp(X) * Y2 + Z),
    }
    return pytensor.function(xs, formulas[name](*xs))


# -- optional peers ----------------------------------------------------------


@functools.cache
def import_numba() -> ModuleType:
    try:
        import numba
    except Exception as e:  # any import failure means the peer is absent
        raise Unavailable(f"numba not importable: {e}") from None
    return numba


@functools.cache
def import_jax() -> ModuleType:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
    except Exception as e:
        raise Unavailable(f"jax not importable: {e}") from None
    jax.config.update("jax_enable_x64", True)
    return jax


@functools.cache
def import_torch() -> ModuleType:
    try:
        import torch
    except Exception as e:
        raise Unavailable(f"torch not importable: {e}") from None
    torch.set_num_threads(TORCH_THREADS)
    try:
        import torch._dynamo

        torch._dynamo.config.cache_size_limit = 64  # one compiled graph per (workload, dtype, shape)
        if hasattr(torch._dynamo.config, "recompile_limit"):
            torch._dynamo.config.recompile_limit = 64
    except Exception:  # torch.compile is then reported unavailable on use
        pass
    return torch


def versions() -> dict[str, str]:
    """Versions of NumPy and the peers (``absent`` for those that do not import)."""
    out = {"numpy": np.__version__}
    for name, get in (("numba", import_numba), ("jax", import_jax), ("torch", import_torch)):
        try:
            out[name] = get().__version__
        except Unavailable:
            out[name] = "absent"
    try:
        import llvmlite

        out["llvmlite"] = llvmlite.__version__
    except ImportError:
        out["llvmlite"] = "absent"
    return out


# -- Numba kernels -----------------------------------------------------------


def numba_kernels(dtype: np.dtype, parallel: bool, fastmath: bool | None = None) -> dict[str, Callable[..., Any]]:
    """Fresh Numba dispatchers for every workload (compiled on first call) for ``dtype``.

    Each call gives new dispatchers, so the first call's time is a real compile.
    Accumulators start at ``dtype``'s zero so float32 loops stay float32.
    ``fastmath`` (default: as ``parallel``) lets LLVM reassociate and vectorise the reductions.
    """
    nb = import_numba()
    fast = parallel if fastmath is None else fastmath
    jit = nb.njit(parallel=True, fastmath=fast) if parallel else nb.njit(fastmath=fast)
    prange = nb.prange
    zero = np.dtype(dtype).type(0)
    cast = np.dtype(dtype).type

    @jit
    def exp_mul_add(X, Y2, Z, out):
        for i in prange(X.shape[0]):
            out[i] = np.exp(X[i]) * Y2[i] + Z[i]
        return out

    @jit
    def sum_exp_mul_add(X, Y2, Z):
        s = zero
        for i in prange(X.shape[0]):
            s += np.exp(X[i]) * Y2[i] + Z[i]
        return s

    @jit
    def row_softmax(X, out):
        R, C = X.shape
        for r in prange(R):
            m = X[r, 0]
            for c in range(1, C):
                m = max(m, X[r, c])
            s = zero
            for c in range(C):
                e = np.exp(X[r, c] - m)
                out[r, c] = e
                s += e
            for c in range(C):
                out[r, c] /= s
        return out

    @jit
    def row_logsumexp(X, out):
        R, C = X.shape
        for r in prange(R):
            m = X[r, 0]
            for c in range(1, C):
                m = max(m, X[r, c])
            s = zero
            for c in range(C):
                s += np.exp(X[r, c] - m)
            out[r] = np.log(s) + m
        return out

    @jit
    def relu_matmul_bias(W, X, B):
        Y = W @ X
        for i in prange(Y.shape[0]):
            for b in range(Y.shape[1]):
                v = Y[i, b] + B[i]
                Y[i, b] = v if v > zero else zero
        return Y

    @jit
    def gather_sum(X, Idx):
        s = zero
        for n in prange(Idx.shape[0]):
            s += X[Idx[n]]
        return s

    @jit
    def row_variance(X, out):
        R, C = X.shape
        for r in prange(R):
            s = zero
            for c in range(C):
                s += X[r, c]
            m = s / cast(C)
            v = zero
            for c in range(C):
                d = X[r, c] - m
                v += d * d
            out[r] = v / cast(C)
        return out

    @nb.njit  # one BLAS call: parallel=True has nothing to parallelise (and warns)
    def contract3(A, B):
        n_i, n_j, n_k = A.shape
        return A.reshape(n_i, n_j * n_k) @ B.reshape(n_j * n_k, B.shape[2])

    return {
        "exp_mul_add": exp_mul_add,
        "sum_exp_mul_add": sum_exp_mul_add,
        "row_softmax": row_softmax,
        "row_logsumexp": row_logsumexp,
        "relu_matmul_bias": relu_matmul_bias,
        "gather_sum": gather_sum,
        "row_variance": row_variance,
        "contract3": contract3,
        "call_overhead": sum_exp_mul_add,
    }


def numba_out(name: str, inputs: dict[str, np.ndarray]) -> np.ndarray | None:
    """The preallocated output a Numba user would pass, or None when the kernel returns a scalar or allocates."""
    if name in ("exp_mul_add", "row_softmax"):
        x = inputs["X"]
        return np.empty_like(x)
    if name in ("row_logsumexp", "row_variance"):
        x = inputs["X"]
        return np.empty(x.shape[0], dtype=x.dtype)
    return None


# -- array-library formulas (JAX, torch) -------------------------------------


def jax_formulas() -> dict[str, Callable[..., Any]]:
    """The workloads as jax.numpy formulas (positional arguments in the NumPy formula's order)."""
    jax = import_jax()
    jnp = jax.numpy

    def sum_exp(X, Y2, Z):
        return (jnp.exp(X) * Y2 + Z).sum()

    return {
        "exp_mul_add": lambda X, Y2, Z: jnp.exp(X) * Y2 + Z,
        "sum_exp_mul_add": sum_exp,
        "row_softmax": lambda X: jax.nn.softmax(X, axis=1),
        "row_logsumexp": lambda X: jax.nn.logsumexp(X, axis=1),
        "relu_matmul_bias": lambda W, X, B: jax.nn.relu(W @ X + B[:, None]),
        "gather_sum": lambda X, Idx: X[Idx].sum(),
        "row_variance": lambda X: X.var(axis=1),
        "contract3": lambda A, B: jnp.tensordot(A, B, axes=([1, 2], [0, 1])),
        "call_overhead": sum_exp,
    }


def torch_formulas() -> dict[str, Callable[..., Any]]:
    """The workloads as torch formulas (positional arguments in the NumPy formula's order)."""
    torch = import_torch()

    def sum_exp(X, Y2, Z):
        return (torch.exp(X) * Y2 + Z).sum()

    return {
        "exp_mul_add": lambda X, Y2, Z: torch.exp(X) * Y2 + Z,
        "sum_exp_mul_add": sum_exp,
        "row_softmax": lambda X: torch.softmax(X, dim=1),
        "row_logsumexp": lambda X: torch.logsumexp(X, dim=1),
        "relu_matmul_bias": lambda W, X, B: torch.relu(W @ X + B[:, None]),
        "gather_sum": lambda X, Idx: X[Idx].sum(),
        "row_variance": lambda X: torch.var(X, dim=1, correction=0),
        "contract3": lambda A, B: torch.tensordot(A, B, dims=([1, 2], [0, 1])),
        "call_overhead": sum_exp,
    }


def fresh_function(f: Callable[..., Any]) -> Callable[..., Any]:
    """A new function object with ``f``'s behaviour, so jit caches keyed on the function start empty."""

    def g(*args: Any) -> Any:
        return f(*args)

    return g


# -- binding -----------------------------------------------------------------


def _bind(
    impl: str, workload: Workload, inputs: dict[str, np.ndarray]
) -> tuple[Callable[[], object], Callable[[object], np.ndarray]]:
    """The zero-argument timed call and the conversion of its result to NumPy."""
    names = arg_names(workload)
    args = [inputs[n] for n in names]
    if impl in OURS:
        from fuse_mlir import Program

        runner = Program(workload.source).compile("llvm", opt_level=0 if impl.endswith("-O0") else 2)
        return (lambda: runner(**inputs)), (lambda r: np.asarray(r[workload.output]))  # type: ignore[index]
    if impl in HANDOFFS:
        from fuse_mlir import FuseError, Program

        backend, options = HANDOFFS[impl]
        if impl == "fuse-torch-compile":
            import_torch()._dynamo.reset()
        try:
            handoff = Program(workload.source).compile(backend, **options)
        except FuseError as e:  # the framework is not installed
            raise Unavailable(str(e)) from e
        return (lambda: handoff(**inputs)), (lambda r: np.asarray(r[workload.output]))  # type: ignore[index]
    if impl == "numpy":
        return (lambda: workload.numpy(**inputs)), np.asarray
    if impl in ("numba", "numba-parallel", "numba-fastmath"):
        kernel = numba_kernels(args[0].dtype, impl != "numba", fastmath=impl == "numba-fastmath")[workload.name]
        out = numba_out(workload.name, inputs)
        if out is not None:
            return (lambda: kernel(*args, out)), np.asarray
        return (lambda: kernel(*args)), np.asarray
    if impl == "jax":
        jax = import_jax()
        fn = jax.jit(fresh_function(jax_formulas()[workload.name]))
        jargs = [jax.device_put(a) for a in args]
        return (lambda: fn(*jargs).block_until_ready()), np.asarray
    if impl in ("torch", "torch-compile"):
        torch = import_torch()
        targs = [torch.from_numpy(a) for a in args]
        fn = fresh_function(torch_formulas()[workload.name])
        if impl == "torch-compile":
            torch._dynamo.reset()  # Dynamo caches per code object: start empty so the first call compiles
            fn = torch.compile(fn, dynamic=False)
        return (lambda: fn(*targs)), (lambda r: r.numpy())  # type: ignore[attr-defined]
    if impl == "pytensor":
        fn = pytensor_function(workload.name, args)
        return (lambda: fn(*args)), np.asarray
    raise ValueError(f"unknown implementation {impl!r}; known: {', '.join(IMPLEMENTATIONS)}")


def prepare(impl: str, workload: Workload, inputs: dict[str, np.ndarray], want: np.ndarray | None = None) -> Prepared:
    """``impl`` bound to ``inputs``, run once (compile + warm-up) and checked against the float64 reference.

    Raises ``Unavailable`` when the implementation cannot run here and
    ``Mismatch`` when its answer is wrong. ``want`` is the reference when
    the caller already has it.
    """
    dtype = next(v.dtype for v in inputs.values() if v.dtype.kind == "f")
    call, to_numpy = _bind(impl, workload, inputs)
    t0 = time.perf_counter()
    try:
        result = call()
    except Exception as e:  # a peer that fails here (e.g. no C++ toolchain) is reported, not fatal
        if impl in OURS:
            raise
        raise Unavailable(
            f"{impl} failed on {workload.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        ) from e
    first = time.perf_counter() - t0
    got = to_numpy(result)
    check(impl, workload, got, reference(workload, inputs) if want is None else want, dtype)
    call()  # second warm-up: page in buffers, settle caches
    return Prepared(impl, call, to_numpy, first)
