"""Compile time of each workload's program: fuse_mlir's llvm backend cold and warm, and the peers' jit compilers.

Run with ``python -m pytest benchmarks/test_bench_compile.py --benchmark-only``.
Compiles use the workloads' small inputs (fuse_mlir's kernels do not depend
on extents; the peers specialise on shapes but compile at the same cost).

- fuse-cold: ``Program(src)`` + lowering + ``compile_program(cache=False)``;
- fuse-warm: the same, the in-memory kernel cache hit;
- jax: ``jax.jit(f).lower(*args).compile()`` after ``jax.clear_caches()``;
- numba / numba-parallel: first call of a fresh dispatcher (compile + a tiny run);
- torch-compile: first call after ``torch._dynamo.reset()`` (Inductor's on-disk cache may be warm).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks.peers import (
    DTYPES,
    Unavailable,
    arg_names,
    fresh_function,
    import_jax,
    import_torch,
    jax_formulas,
    make_inputs,
    numba_kernels,
    numba_out,
    torch_formulas,
)
from benchmarks.workloads import WORKLOADS, Workload
from fuse_mlir import Program
from fuse_mlir.backends.llvm.executor import CompiledProgram, compile_program

CASES = [(w, dtype) for w in WORKLOADS for dtype in DTYPES]
IDS = [f"{w.name}-{dtype}" for w, dtype in CASES]


def _small(w: Workload, dtype: str) -> dict[str, np.ndarray]:
    return make_inputs(w, dtype, small=True)


def _fuse_compile(w: Workload, dtypes: dict[str, np.dtype], cache: bool) -> CompiledProgram:
    return compile_program(Program(w.source).lower(dtypes).module, cache=cache)


@pytest.mark.parametrize(("w", "dtype"), CASES, ids=IDS)
def test_fuse_cold(benchmark, w: Workload, dtype: str) -> None:
    """Parse, lower and compile with the kernel cache off."""
    dtypes = {k: v.dtype for k, v in _small(w, dtype).items()}
    benchmark.group = f"compile-{w.name}-{dtype}"
    compiled = benchmark.pedantic(_fuse_compile, args=(w, dtypes, False), rounds=3, iterations=1)
    benchmark.extra_info["passes_and_llvm_ms"] = round(compiled.compile_seconds * 1e3, 2)


@pytest.mark.parametrize(("w", "dtype"), CASES, ids=IDS)
def test_fuse_warm(benchmark, w: Workload, dtype: str) -> None:
    """Parse and lower, then hit the in-memory kernel cache."""
    dtypes = {k: v.dtype for k, v in _small(w, dtype).items()}
    _fuse_compile(w, dtypes, True)
    benchmark.group = f"compile-{w.name}-{dtype}"
    benchmark(_fuse_compile, w, dtypes, True)


@pytest.mark.parametrize(("w", "dtype"), CASES, ids=IDS)
def test_jax(benchmark, w: Workload, dtype: str) -> None:
    """jax.jit trace, lower and XLA compile."""
    try:
        jax = import_jax()
    except Unavailable as e:
        pytest.skip(str(e))
    inputs = _small(w, dtype)
    args = [jax.device_put(inputs[n]) for n in arg_names(w)]
    f = jax_formulas()[w.name]

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        jax.clear_caches()
        return (jax.jit(fresh_function(f)),), {}

    benchmark.group = f"compile-{w.name}-{dtype}"
    benchmark.pedantic(lambda fn: fn.lower(*args).compile(), setup=setup, rounds=3, iterations=1)


@pytest.mark.parametrize("parallel", [False, True], ids=["numba", "numba-parallel"])
@pytest.mark.parametrize(("w", "dtype"), CASES, ids=IDS)
def test_numba(benchmark, w: Workload, dtype: str, parallel: bool) -> None:
    """First call of a fresh Numba dispatcher (type inference, LLVM, a tiny run)."""
    try:
        numba_kernels(np.dtype(dtype), parallel)
    except Unavailable as e:
        pytest.skip(str(e))
    inputs = _small(w, dtype)
    args = [inputs[n] for n in arg_names(w)]
    out = numba_out(w.name, inputs)
    if out is not None:
        args.append(out)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (numba_kernels(np.dtype(dtype), parallel)[w.name],), {}

    benchmark.group = f"compile-{w.name}-{dtype}"
    benchmark.pedantic(lambda kernel: kernel(*args), setup=setup, rounds=3, iterations=1)


@pytest.mark.parametrize(("w", "dtype"), CASES, ids=IDS)
def test_torch_compile(benchmark, w: Workload, dtype: str) -> None:
    """First call of torch.compile (Dynamo trace + Inductor codegen + C++ build or cache load)."""
    try:
        torch = import_torch()
    except Unavailable as e:
        pytest.skip(str(e))
    inputs = _small(w, dtype)
    args = [torch.from_numpy(inputs[n]) for n in arg_names(w)]
    f = torch_formulas()[w.name]

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        torch._dynamo.reset()
        return (torch.compile(fresh_function(f), dynamic=False),), {}

    try:
        fn = setup()[0][0]
        fn(*args)
    except Exception as e:  # no working C++ toolchain etc.: skip, don't fail
        pytest.skip(f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    benchmark.group = f"compile-{w.name}-{dtype}"
    benchmark.pedantic(lambda fn: fn(*args), setup=setup, rounds=2, iterations=1)
