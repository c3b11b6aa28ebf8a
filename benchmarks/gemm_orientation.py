"""``python -m benchmarks.gemm_orientation``: float64 GEMMs written the way round BLAS runs faster, against as written.

A two-factor float64 product whose result has its short side contiguous
(``Y[i, b] = W[i, j] X[j, b]`` with ``b`` small) runs OpenBLAS the slow way
round; the per-shape plan then has the GEMM write ``[b, i]`` and copies it
(``fuse_mlir/gemm.py``: ``LONG_CONTIGUOUS``, ``orientation_cost``). This
times each program and shape with that planning on (the default) and off
(``LONG_CONTIGUOUS`` emptied while the runner is made, so nothing is
planned), both in one process in interleaved rounds, with NumPy's
``W @ X`` (+ bias and relu) beside them; ``off / on`` > 1 means the plan
pays. Large skinny products gain, small or nearly square ones must not
lose.

A second table times what planning per shape costs a call whose shapes change: ``relu(W@X+B)`` with ``W``
64 × 64 and ``X`` 64 × ``b`` for a run of new ``b`` (each call the first of its shape), then calls cycling
through those shapes again, on and off alternating call by call (median microseconds per call). A new shape
that plans as an earlier one runs that variant's native entry (``ShapeDispatch``), so ``on`` should stay within
a few microseconds of ``off``.

Options: ``--shapes`` (``i,j,b`` triples separated by ``;``), ``--quick``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence

import numpy as np

from benchmarks.blas_env import describe, reexec

PROGRAMS: dict[str, tuple[str, Callable[..., np.ndarray]]] = {
    "W@X": ("Y[i, b] = W[i, j] X[j, b]\nexport Y", lambda W, X, B: W @ X),
    "relu(W@X+B)": (
        "Y[i, b] = relu(W[i, j] X[j, b] + B[i])\nexport Y",
        lambda W, X, B: np.maximum(W @ X + B[:, None], 0),
    ),
}

SHAPES = "4096,4096,256;4096,1024,64;2048,2048,128;1500,1500,10;3000,300,64;512,512,64;512,512,16;1024,4096,512"


def main(argv: Sequence[str] | None = None) -> int:
    """Print one Markdown table: median ms per call with orientation planning on and off, and NumPy's."""
    from benchmarks.measure import FULL, QUICK, interleaved_medians
    from fuse_mlir import Program, gemm

    ap = argparse.ArgumentParser(prog="python -m benchmarks.gemm_orientation", description=__doc__)
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    try:
        shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";") if s]
    except ValueError:
        ap.error(f"--shapes wants i,j,b triples separated by ';', got {args.shapes!r}")
    if any(len(s) != 3 or min(s) < 1 for s in shapes):
        ap.error(f"--shapes wants positive i,j,b triples, got {args.shapes!r}")
    budget = QUICK if args.quick else FULL
    rng = np.random.default_rng(0)
    print(f"OpenBLAS environment: {describe()}; load average (1 min) before: {os.getloadavg()[0]:.2f}\n")
    print("| program | i × j @ j × b | fuse on | fuse off | numpy | off / on | numpy / on |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, (src, numpy_fn) in PROGRAMS.items():
        for i, j, b in shapes:
            ins = {"W": rng.standard_normal((i, j)), "X": rng.standard_normal((j, b)), "B": rng.standard_normal(i)}
            used = {k: v for k, v in ins.items() if f"{k}[" in src}
            saved = dict(gemm.LONG_CONTIGUOUS)
            gemm.LONG_CONTIGUOUS.clear()
            try:
                off = Program(src).compile("llvm", cache=False)
                off(**used)
            finally:
                gemm.LONG_CONTIGUOUS.update(saved)
            on = Program(src).compile("llvm", cache=False)
            want = numpy_fn(**ins)
            for runner in (on, off):
                np.testing.assert_allclose(runner(**used)["Y"], want, rtol=1e-9, atol=1e-9)
            calls = {
                "on": functools.partial(on, **used),
                "off": functools.partial(off, **used),
                "numpy": functools.partial(numpy_fn, **ins),
            }
            t = interleaved_medians(calls, budget)
            print(
                f"| {name} | {i} × {j} @ {j} × {b} | {1e3 * t['on']:.3g} | {1e3 * t['off']:.3g} | "
                f"{1e3 * t['numpy']:.3g} | {t['off'] / t['on']:.2f} | {t['numpy'] / t['on']:.2f} |",
                flush=True,
            )
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.2f}; median ms per call (float64, fresh outputs)")
    changing_shapes(50 if args.quick else 400)
    return 0


def changing_shapes(n: int) -> None:
    """Print median microseconds per call of ``relu(W@X+B)`` over ``n`` new shapes, then cycling through them."""
    import time

    from fuse_mlir import Program, gemm

    src, numpy_fn = PROGRAMS["relu(W@X+B)"]
    rng = np.random.default_rng(1)
    w, bias = rng.standard_normal((64, 64)), rng.standard_normal(64)
    xs = [rng.standard_normal((64, b)) for b in range(9, 9 + n)]
    saved = dict(gemm.LONG_CONTIGUOUS)
    gemm.LONG_CONTIGUOUS.clear()
    try:
        off = Program(src).compile("llvm", cache=False)
        off(W=w, X=xs[0][:, :1], B=bias)
    finally:
        gemm.LONG_CONTIGUOUS.update(saved)
    on = Program(src).compile("llvm", cache=False)
    on(W=w, X=xs[0][:, :1], B=bias)
    times: dict[tuple[str, str], list[float]] = {}
    for phase in ("first call of a new shape", "cycling through seen shapes"):
        for k, x in enumerate(xs):
            pair = (("on", on), ("off", off))
            for label, runner in pair if k % 2 else pair[::-1]:  # alternating: the first to read x fetches it
                t0 = time.perf_counter()
                y = runner(W=w, X=x, B=bias)["Y"]
                times.setdefault((phase, label), []).append(time.perf_counter() - t0)
                if phase.startswith("first"):
                    np.testing.assert_allclose(y, numpy_fn(W=w, X=x, B=bias), rtol=1e-9, atol=1e-9)
    print(f"\n`relu(W@X+B)`, W 64 × 64, X 64 × b for {n} values of b (float64), median µs per call:\n")
    print("| calls | fuse on | fuse off | on − off |")
    print("|---|---:|---:|---:|")
    for phase in ("first call of a new shape", "cycling through seen shapes"):
        on_us, off_us = (1e6 * float(np.median(times[(phase, k)])) for k in ("on", "off"))
        print(f"| {phase} | {on_us:.1f} | {off_us:.1f} | {on_us - off_us:+.1f} |")


if __name__ == "__main__":
    reexec("benchmarks.gemm_orientation", sys.argv[1:])  # OpenBLAS reads its environment when NumPy loads it
    raise SystemExit(main())
