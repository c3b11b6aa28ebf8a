"""``replace_sources`` keeps lowerings whose source shapes and dtypes still hold, and every backend sees new values.

A training loop replaces its weights every step; re-lowering (frontend, grad transform, digests) each time cost
~19 ms a step on examples/train_logreg.py against ~0.3 ms for the rebinding. The class of bug this guards against is
the opposite one: a backend or runner still holding the old arrays after the rebinding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fuse_mlir.frontend.lower as frontend_lower
from fuse_mlir import Program

BACKENDS = ["reference", "llvm", "numba", "jax", "torch"]
SOURCE = 'W[i,j] = "w.npy"\nb[i] = "b.npy"\nY[i] = tanh(W[i,j] X[j] + b[i])\nL = Y[i] Y[i]\nexport Y, L\n'


def _program(tmp_path: Path, n: int = 3, m: int = 4) -> Program:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "w.npy", rng.standard_normal((n, m)))
    np.save(tmp_path / "b.npy", rng.standard_normal(n))
    return Program(SOURCE, str(tmp_path / "p.fuse"), tmp_path)


def _want(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.tanh(w @ x + b)


@pytest.fixture
def lowerings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts frontend lowerings (one element per call of ``lower_program``)."""
    calls: list[int] = []
    real = frontend_lower.lower_program

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(frontend_lower, "lower_program", counted)
    return calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_shapes_keep_the_lowering_and_run_new_values(backend: str, tmp_path: Path, lowerings: list[int]) -> None:
    prog = _program(tmp_path)
    run = prog.compile(backend)
    x = np.linspace(-1.0, 1.0, 4)
    run(X=x)
    first = len(lowerings)
    rng = np.random.default_rng(1)
    for _ in range(6):
        w, b = rng.standard_normal((3, 4)), rng.standard_normal(3)
        prog.replace_sources({"W": w, "b": b})
        out = run(X=x)
        np.testing.assert_allclose(out["Y"], _want(w, b, x), rtol=1e-12)
        np.testing.assert_allclose(out["L"], np.sum(_want(w, b, x) ** 2), rtol=1e-12)
    assert len(lowerings) == first  # no step re-lowered


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_another_shape_or_dtype_lowers_again(backend: str, tmp_path: Path, lowerings: list[int]) -> None:
    prog = _program(tmp_path)
    run = prog.compile(backend)
    run(X=np.ones(4))
    before = len(lowerings)
    w, b = np.arange(10.0).reshape(2, 5) / 10, np.array([0.5, -0.5])
    prog.replace_sources({"W": w, "b": b})
    x = np.linspace(0, 1, 5)
    np.testing.assert_allclose(run(X=x)["Y"], _want(w, b, x), rtol=1e-12)
    assert len(lowerings) == before + 1
    w32 = w.astype(np.float32)
    prog.replace_sources({"W": w32, "b": b})
    np.testing.assert_allclose(run(X=x)["Y"], _want(w32.astype(np.float64), b, x), rtol=1e-6)
    assert len(lowerings) == before + 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_program_rebinds_without_relowering(backend: str, tmp_path: Path, lowerings: list[int]) -> None:
    prog = _program(tmp_path)
    grad = prog.grad("L", ["W", "b"])
    run = grad.compile(backend)
    x = np.linspace(-1.0, 1.0, 4)
    run(X=x)
    first = len(lowerings)
    rng = np.random.default_rng(2)
    for _ in range(4):
        w, b = rng.standard_normal((3, 4)), rng.standard_normal(3)
        grad.replace_sources({"W": w, "b": b})
        out = run(X=x)
        y = _want(w, b, x)
        dz = 2 * y * (1 - y**2)
        np.testing.assert_allclose(out["dL_db"], dz, rtol=1e-10)
        np.testing.assert_allclose(out["dL_dW"], np.outer(dz, x), rtol=1e-10)
    assert len(lowerings) == first
