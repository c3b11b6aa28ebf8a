"""``python -m benchmarks.transpose``: nests that read an input across its rows, against NumPy and torch.

A result contiguous along one axis computed from an input contiguous along
another (``Y[j, i] = X[i, j]``, the permuting copies before a batched GEMM, a
sum with a transposed operand) runs in 8 x 8 tiles (``TRANSPOSE_TILE`` in
``fuse_mlir/passes/conversions/lower_ew_to_loop.py``). This times those
programs with fresh outputs in interleaved rounds, in one process, against
NumPy (``np.ascontiguousarray`` of a transposed view, or the sum) and torch
(``.permute(...).contiguous()``) when it is installed.

Options: ``--dtypes`` (default ``float64,float32``), ``--cases`` (names containing any of these
comma-separated words, e.g. ``ijb,1000``), ``--quick``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Case:
    """One program, its inputs' shapes and the NumPy expression it computes."""

    name: str
    source: str
    shapes: dict[str, tuple[int, ...]]
    numpy: Callable[..., np.ndarray]
    perm: tuple[int, ...] | None  # the permutation torch applies to the one input, None: a sum


CASES = (
    Case(
        "T 4096x4096", "Y[j, i] = X[i, j]\nexport Y", {"X": (4096, 4096)}, lambda X: np.ascontiguousarray(X.T), (1, 0)
    ),
    Case(
        "T 1000x1000", "Y[j, i] = X[i, j]\nexport Y", {"X": (1000, 1000)}, lambda X: np.ascontiguousarray(X.T), (1, 0)
    ),
    Case(
        "ijb -> bij (128,128,32)",
        "T[b, i, j] = A[i, j, b]\nexport T",
        {"A": (128, 128, 32)},
        lambda A: np.ascontiguousarray(A.transpose(2, 0, 1)),
        (2, 0, 1),
    ),
    Case(
        "bik -> ikb (32,128,128)",
        "C[i, k, b] = T[b, i, k]\nexport C",
        {"T": (32, 128, 128)},
        lambda T: np.ascontiguousarray(T.transpose(1, 2, 0)),
        (1, 2, 0),
    ),
    Case(
        "X + Y^T 2048x2048",
        "Z[i, j] = X[i, j] + Y[j, i]\nexport Z",
        {"X": (2048, 2048), "Y": (2048, 2048)},
        lambda X, Y: X + Y.T,
        None,
    ),
)


def _torch_call(case: Case, inputs: dict[str, np.ndarray]) -> Callable[[], object] | None:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    ts = [torch.from_numpy(v) for v in inputs.values()]
    if case.perm is None:
        return lambda: ts[0] + ts[1].t()
    return lambda: ts[0].permute(*case.perm).contiguous()


def main(argv: Sequence[str] | None = None) -> int:
    """Print one Markdown table: median ms per call of fuse, NumPy and torch, per case and dtype."""
    from benchmarks.measure import FULL, QUICK, interleaved_medians
    from fuse_mlir import Program

    ap = argparse.ArgumentParser(prog="python -m benchmarks.transpose", description=__doc__)
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--cases", default="")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    words = [w for w in args.cases.split(",") if w]
    cases = [c for c in CASES if not words or any(w in c.name for w in words)]
    if not cases:
        ap.error(f"no case matches {args.cases!r}; the cases are: {', '.join(c.name for c in CASES)}")
    dtypes = args.dtypes.split(",")
    for d in dtypes:
        if d not in ("float64", "float32"):
            ap.error(f"unknown dtype {d!r}; choose from float64, float32")
    budget = QUICK if args.quick else FULL
    rng = np.random.default_rng(0)
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}\n")
    print("| program | dtype | fuse | numpy | torch | numpy / fuse |")
    print("|---|---|---:|---:|---:|---:|")
    for case in cases:
        for dtype in dtypes:
            inputs = {k: rng.standard_normal(s).astype(dtype) for k, s in case.shapes.items()}
            run = Program(case.source).compile("llvm")
            got = next(iter(run(**inputs).values()))
            np.testing.assert_array_equal(got, case.numpy(*inputs.values()))
            calls: dict[str, Callable[[], object]] = {
                "fuse": lambda run=run, inputs=inputs: run(**inputs),
                "numpy": lambda case=case, inputs=inputs: case.numpy(*inputs.values()),
            }
            torch_call = _torch_call(case, inputs)
            if torch_call is not None:
                calls["torch"] = torch_call
            med = interleaved_medians(calls, budget)
            cells = [f"{med[k] * 1e3:.3g}" if k in med else "n/a" for k in ("fuse", "numpy", "torch")]
            print(f"| {case.name} | {dtype} | " + " | ".join(cells) + f" | {med['numpy'] / med['fuse']:.2f} |")
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.2f}; median ms per call, fresh outputs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
