"""Gradients of every shipped example (a scalar loss added) against central differences, and the
training examples (examples/train_mlp.py, examples/train_logreg.py) reaching their stated accuracy."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from fuse_mlir.diagnostics import FuseError
from fuse_mlir.dialects import tensor_eq as te
from fuse_mlir.program import Program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def with_loss(path: Path) -> tuple[Program, list[str]] | None:
    """The example with ``GradLoss`` (the sum of squares of its float exports) added; its float sources."""
    base = Program.from_file(path)
    lowered = base.lower()
    terms = []
    for name, v in zip(te.names_of(lowered.module.body.block.last_op.names), lowered.module.body.block.last_op.values):
        if te.dtype_of(v).kind == "f":
            idx = ", ".join(f"_x{k}" for k in range(v.type.get_num_dims()))
            ref = f"{name}[{idx}]" if idx else name
            terms.append(f"{ref} {ref}")
    sources = [n for n, a in base.source_arrays().items() if np.asarray(a).dtype.kind == "f"]
    if not terms or not sources:
        return None
    text = path.read_text() + "\n" + "\n".join(f"GradLoss = {t}" for t in terms) + "\nexport GradLoss\n"
    return Program(text, str(path), path.parent), sources


def _examples() -> list:
    return [pytest.param(p, id=p.name) for p in sorted(EXAMPLES.glob("*.fuse"))]


@pytest.mark.parametrize("path", _examples())
def test_example_gradients_match_directional_differences(path: Path) -> None:
    made = with_loss(path)
    if made is None:
        pytest.skip("no float export depending on a float source")
    prog, sources = made
    try:
        grad = prog.grad("GradLoss", sources)
    except FuseError as e:
        pytest.skip(f"not differentiable: {e.message}")  # e.g. a program with no path from a source to a float
    rng = np.random.default_rng(0)
    original = {n: np.array(a, dtype=np.float64) for n, a in prog.source_arrays().items() if n in sources}
    # Moved a little off the data's round numbers, so no point sits on a kink (relu at 0, a case threshold).
    base = {n: a + 0.01 * rng.normal(size=a.shape) for n, a in original.items()}
    grad.replace_sources(base)
    out = grad.compile("llvm")()
    ref = grad.compile("reference")()
    for name in sources:
        np.testing.assert_allclose(out[f"dGradLoss_d{name}"], ref[f"dGradLoss_d{name}"], rtol=1e-9, atol=1e-12)
        v = rng.normal(size=base[name].shape)
        h = 1e-6

        def at(t: float, name: str = name, v: np.ndarray = v) -> float:
            prog.replace_sources({**base, name: base[name] + t * v})
            return float(prog.compile("reference")()["GradLoss"])

        numeric = (at(h) - at(-h)) / (2 * h)
        analytic = float(np.sum(out[f"dGradLoss_d{name}"] * v))
        scale = max(1.0, abs(numeric), float(np.sum(np.abs(out[f"dGradLoss_d{name}"] * v))))
        assert abs(numeric - analytic) <= 1e-6 * scale, (name, numeric, analytic)
    prog.replace_sources(original)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_train_mlp_reaches_its_accuracy() -> None:
    loss, acc = _load("train_mlp").train(n=150, steps=60)
    assert acc >= 0.95 and loss < 0.2


def test_train_logreg_separates_the_samples() -> None:
    loss, acc = _load("train_logreg").train(steps=60, lr=5.0)
    assert acc == 1.0 and loss < 0.3
