"""Run time of every workload × dtype × implementation with pytest-benchmark, grouped side by side.

Run with ``python -m pytest benchmarks/test_bench_workloads.py --benchmark-only``
(``FUSE_BENCH_SMALL=1`` for the small inputs). Each implementation is
compiled, warmed up and checked against the NumPy formula before timing; a
peer that is not installed is skipped, a wrong answer fails the test. No
timing is asserted.
"""

from __future__ import annotations

import pytest

from benchmarks.bounds import bound
from benchmarks.peers import (
    DTYPES,
    IMPLEMENTATIONS,
    Mismatch,
    Unavailable,
    cached_inputs,
    cached_reference,
    prepare,
    small_sizes,
)
from benchmarks.workloads import BY_NAME, WORKLOADS

# Workload outermost, implementation innermost: consecutive tests share one input set.
CASES = [(w.name, dtype, impl) for w in WORKLOADS for dtype in DTYPES for impl in IMPLEMENTATIONS]


@pytest.mark.parametrize(("workload", "dtype", "impl"), CASES, ids=["-".join(c) for c in CASES])
def test_workload(benchmark, workload: str, dtype: str, impl: str) -> None:
    """Time one implementation on one workload after checking its answer once."""
    w = BY_NAME[workload]
    small = small_sizes()
    inputs = cached_inputs(workload, dtype, small)
    want = cached_reference(workload, dtype, small)
    try:
        prepared = prepare(impl, w, inputs, want)
    except Unavailable as e:
        pytest.skip(str(e))
    except Mismatch as e:
        pytest.fail(str(e))
    benchmark.group = f"{workload}-{dtype}"
    benchmark.extra_info["implementation"] = impl
    benchmark.extra_info["first_call_ms"] = round(prepared.first_call_seconds * 1e3, 3)
    b = bound(workload, inputs, want.astype(dtype), dtype)
    if b is not None:
        benchmark.extra_info["bound_ms"] = round(b.seconds * 1e3, 4)
        benchmark.extra_info["bound_kind"] = b.kind
    benchmark(prepared.call)
