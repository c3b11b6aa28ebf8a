"""The benchmark workloads of DESIGN.md §6 as `.fuse` programs, with inputs and NumPy formulas.

Each workload names its program, how to build inputs at a given scale and
dtype, and the NumPy expression the peers are measured against. The
benchmark suite and the correctness checks share these definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    """A named program with an input builder and a NumPy reference."""

    name: str
    source: str
    inputs: Callable[[np.random.Generator, np.dtype, bool], dict[str, np.ndarray]]
    numpy: Callable[..., np.ndarray]
    output: str


def _vec(n_full: int, n_small: int, *names: str):
    def build(rng: np.random.Generator, dtype: np.dtype, small: bool) -> dict[str, np.ndarray]:
        n = n_small if small else n_full
        return {k: rng.standard_normal(n).astype(dtype) for k in names}

    return build


def _mat(shape_full, shape_small, *names: str):
    def build(rng: np.random.Generator, dtype: np.dtype, small: bool) -> dict[str, np.ndarray]:
        shape = shape_small if small else shape_full
        return {k: rng.standard_normal(shape).astype(dtype) for k in names}

    return build


def _mlp(rng: np.random.Generator, dtype: np.dtype, small: bool) -> dict[str, np.ndarray]:
    n, b = (64, 8) if small else (4096, 256)
    return {
        "W": (rng.standard_normal((n, n)) / np.sqrt(n)).astype(dtype),
        "X": rng.standard_normal((n, b)).astype(dtype),
        "B": rng.standard_normal(n).astype(dtype),
    }


def _gather(rng: np.random.Generator, dtype: np.dtype, small: bool) -> dict[str, np.ndarray]:
    n, m = (1000, 100) if small else (10_000_000, 1_000_000)
    return {"X": rng.standard_normal(m).astype(dtype), "Idx": rng.integers(0, m, n)}


def _contract3(rng: np.random.Generator, dtype: np.dtype, small: bool) -> dict[str, np.ndarray]:
    i, j, k, n = (8, 4, 4, 8) if small else (256, 64, 64, 256)
    return {"A": rng.standard_normal((i, j, k)).astype(dtype), "B": rng.standard_normal((j, k, n)).astype(dtype)}


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _lse(x):
    m = x.max(1, keepdims=True)
    return np.log(np.exp(x - m).sum(1)) + m[:, 0]


WORKLOADS: list[Workload] = [
    Workload(
        "exp_mul_add",
        "Y[i] = exp(X[i]) Y2[i] + Z[i]\nexport Y",
        _vec(10_000_000, 1000, "X", "Y2", "Z"),
        lambda X, Y2, Z: np.exp(X) * Y2 + Z,
        "Y",
    ),
    Workload(
        "sum_exp_mul_add",
        "S = exp(X[i]) Y2[i] + Z[i]\nexport S",
        _vec(10_000_000, 1000, "X", "Y2", "Z"),
        lambda X, Y2, Z: (np.exp(X) * Y2 + Z).sum(),
        "S",
    ),
    Workload(
        "row_softmax",
        "Y[r, c.] = softmax(X[r, c])\nexport Y",
        _mat((4096, 4096), (16, 32), "X"),
        lambda X: _softmax(X),
        "Y",
    ),
    Workload(
        "row_logsumexp",
        "L[r] = logsumexp(X[r, c])\nexport L",
        _mat((4096, 4096), (16, 32), "X"),
        lambda X: _lse(X),
        "L",
    ),
    Workload(
        "relu_matmul_bias",
        "Y[i, b] = relu(W[i, j] X[j, b] + B[i])\nexport Y",
        _mlp,
        lambda W, X, B: np.maximum(W @ X + B[:, None], 0),
        "Y",
    ),
    Workload("gather_sum", "S = X[Idx[n]]\nexport S", _gather, lambda X, Idx: X[Idx].sum(), "S"),
    Workload(
        "row_variance",
        "M[r] avg= X[r, c]\nV[r] avg= (X[r, c] - M[r]) ** 2\nexport V",
        _mat((4096, 4096), (16, 32), "X"),
        lambda X: X.var(1),
        "V",
    ),
    Workload(
        "contract3",
        "C[i, l] = A[i, j, k] B[j, k, l]\nexport C",
        _contract3,
        lambda A, B: np.tensordot(A, B, axes=([1, 2], [0, 1])),
        "C",
    ),
    Workload(
        "call_overhead",
        "S = exp(X[i]) Y2[i] + Z[i]\nexport S",
        _vec(1000, 1000, "X", "Y2", "Z"),
        lambda X, Y2, Z: (np.exp(X) * Y2 + Z).sum(),
        "S",
    ),
]

BY_NAME = {w.name: w for w in WORKLOADS}
