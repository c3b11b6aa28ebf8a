"""ns/element of the vectorised math (expand-math) against libm (``strict``) and NumPy, per function and dtype.

    python -m benchmarks.vecmath_speed            # 1M elements, both dtypes, a Markdown table
    python -m benchmarks.vecmath_speed --n 200000 --dtypes float32 --functions exp,sin

Unary/binary math ops come from :func:`benchmarks.math_probe.math_kernel`
(expm1 and log1p are not .fuse builtins); ``sigmoid`` (``sig(x, T=1)``) and
``gelu`` are compiled .fuse programs, whose libm-based version is
``compile(strict=True)``. Times are the best of interleaved repeats (on a
shared machine the minimum is the stable estimate of a kernel's cost; a
median drifts with the load), single-threaded, on inputs in a typical range
for each function.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from benchmarks.math_probe import math_kernel
from fuse_mlir import Program

RANGES: dict[str, tuple[float, float]] = {
    "exp": (-20.0, 20.0),
    "expm1": (-2.0, 2.0),
    "log": (1e-3, 1e3),
    "log1p": (-0.5, 10.0),
    "tanh": (-5.0, 5.0),
    "sigmoid": (-10.0, 10.0),
    "gelu": (-5.0, 5.0),
    "sin": (-100.0, 100.0),
    "cos": (-100.0, 100.0),
    "pow": (0.1, 10.0),
    "sqrt": (0.0, 100.0),
}
PROGRAMS = {"sigmoid": "Z[i] = sig(X[i], T=1.0)", "gelu": "Z[i] = gelu(X[i])"}


def _numpy(fn: str) -> Callable[..., np.ndarray]:
    if fn == "sigmoid":
        return lambda x: 1.0 / (1.0 + np.exp(-x))
    if fn == "gelu":
        c = np.sqrt(2.0 / np.pi)
        return lambda x: 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3)))
    if fn == "pow":
        return np.power
    return getattr(np, fn)


def _fuse(fn: str, dtype: np.dtype, strict: bool) -> Callable[..., np.ndarray]:
    if fn in PROGRAMS:
        runner = Program(PROGRAMS[fn]).compile("llvm", strict=strict)
        return lambda x: runner(X=x)["Z"]
    return math_kernel(fn, dtype, strict=strict)


def measure(fn: str, dtype: np.dtype, n: int, repeats: int) -> dict[str, float]:
    """Best-of-repeats ns/element of fuse (expanded), fuse strict (libm) and NumPy for ``fn`` on ``n`` elements."""
    rng = np.random.default_rng(0)
    lo, hi = RANGES[fn]
    args = [rng.uniform(lo, hi, n).astype(dtype)]
    if fn == "pow":
        args.append(rng.uniform(-5.0, 5.0, n).astype(dtype))
    impls = {"expanded": _fuse(fn, dtype, False), "libm": _fuse(fn, dtype, True), "numpy": _numpy(fn)}
    times: dict[str, list[float]] = {k: [] for k in impls}
    for f in impls.values():
        f(*args)  # warm up (page faults, lazy binding)
    for _ in range(repeats):
        for name, f in impls.items():
            t0 = time.perf_counter()
            f(*args)
            times[name].append(time.perf_counter() - t0)
    return {k: min(v) / n * 1e9 for k, v in times.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="elements per call (default 1M)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--functions", default=",".join(RANGES))
    a = ap.parse_args(argv)
    print(f"ns/element, n = {a.n}, best of {a.repeats}\n")
    print("| function | dtype | expanded | libm (strict) | NumPy | libm / expanded | NumPy / expanded |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for fn in a.functions.split(","):
        for dt in a.dtypes.split(","):
            r = measure(fn, np.dtype(dt), a.n, a.repeats)
            e = r["expanded"]
            print(
                f"| {fn} | {dt} | {e:.2f} | {r['libm']:.2f} | {r['numpy']:.2f} | "
                f"{r['libm'] / e:.1f}× | {r['numpy'] / e:.1f}× |",
                flush=True,
            )


if __name__ == "__main__":
    main()
