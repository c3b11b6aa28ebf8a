"""The one-way layering of the package (README's module map) holds: ``lint-imports`` keeps every contract.

The contracts live in pyproject.toml (``[tool.importlinter]``): a layers contract (no module imports a layer
above it, function-level and TYPE_CHECKING imports included) and an acyclic-siblings contract (no import cycle
between the modules of a package). The suite runs the real tool, so a new upward import fails here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports() -> str | None:
    """The ``lint-imports`` executable beside this interpreter, else on PATH (None: import-linter missing)."""
    beside = Path(sys.executable).parent / "lint-imports"
    return str(beside) if beside.exists() else shutil.which("lint-imports")


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_import_contracts_kept() -> None:
    exe = _lint_imports()
    if exe is None:
        pytest.skip("import-linter is not installed (pip install '.[dev]')")
    proc = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(_contracts())} kept, 0 broken" in proc.stdout


def test_every_top_level_module_has_a_layer() -> None:
    """A new top-level module or package must be placed in the layers, or the contract would not see it."""
    (layers,) = [c["layers"] for c in _contracts() if c["type"] == "layers"]
    named = {m.strip() for layer in layers for m in layer.replace(":", "|").split("|")}
    package = ROOT / "fuse_mlir"
    found = {f"fuse_mlir.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py"}
    found |= {f"fuse_mlir.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert found - named == set(), "modules missing from [tool.importlinter] layers"
    assert named - found == set(), "layers naming modules that do not exist"
