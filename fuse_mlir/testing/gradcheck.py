"""Central finite-difference checks of ``Program.grad`` (used by the tests and docs/autodiff.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fuse_mlir.program import Program


def numeric_grad(
    program: Program, of: str, name: str, inputs: Mapping[str, np.ndarray], h: float = 1e-6, backend: str = "reference"
) -> np.ndarray:
    """d of / d name by central differences of ``program`` run on ``backend`` (``name`` must be an input)."""
    run = program.compile(backend)
    base = {
        k: np.array(v, dtype=np.float64, copy=True) if np.asarray(v).dtype.kind == "f" else v for k, v in inputs.items()
    }
    x = base[name]
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        up = float(run(**base)[of])
        x[idx] = old - h
        down = float(run(**base)[of])
        x[idx] = old
        out[idx] = (up - down) / (2 * h)
    return out


def check_grad(
    source: str,
    of: str,
    wrt: Sequence[str],
    inputs: Mapping[str, np.ndarray],
    *,
    backend: str = "reference",
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> dict[str, np.ndarray]:
    """Assert that ``Program(source).grad(of, wrt)`` on ``backend`` matches central differences; its results."""
    p = Program(source)
    g = p.grad(of, wrt).compile(backend)(**inputs)
    np.testing.assert_allclose(g[of], p.compile("reference")(**inputs)[of], rtol=1e-12, atol=1e-12)
    for name in wrt:
        want = numeric_grad(p, of, name, inputs)
        got = g[f"d{of}_d{name}"]
        assert got.shape == np.shape(inputs[name]), (name, got.shape)
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale + 1e-6 * scale, err_msg=name)
    return g
