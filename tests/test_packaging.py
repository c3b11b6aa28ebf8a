"""Packaging conventions (issue 18): a version attribute, the licence text and its SPDX metadata, py.typed, and
a quick-subset marker that pytest knows."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import fuse_mlir
from fuse_mlir.cli.common import version_string

ROOT = Path(__file__).resolve().parent.parent
META = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_attribute_is_the_package_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(\S*)", fuse_mlir.__version__)
    assert META["project"]["dynamic"] == ["version"]
    assert META["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fuse_mlir.__version__"}
    assert version_string("fuse").startswith(f"fuse {fuse_mlir.__version__} (xdsl ")


def test_license_file_and_spdx_metadata() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert META["project"]["license"] == "Apache-2.0"
    assert META["project"]["license-files"] == ["LICENSE"]


def test_py_typed_marker_ships() -> None:
    assert (ROOT / "fuse_mlir" / "py.typed").is_file()
    assert "py.typed" in META["tool"]["setuptools"]["package-data"]["fuse_mlir"]


def test_quick_subset_marker_is_registered() -> None:
    assert any(m.startswith("slow:") for m in META["tool"]["pytest"]["ini_options"]["markers"])


def test_test_extra_leaves_the_frameworks_out_and_explains_the_torch_pin() -> None:
    extras = META["project"]["optional-dependencies"]
    assert not any(r.split("=")[0].split(">")[0] in ("torch", "jax", "numba") for r in extras["test"])
    assert extras["torch"] == ["torch==2.13.0"]
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "CUDA" in text.split('torch = ["torch==2.13.0"]')[0].rsplit("[project.optional-dependencies]", 1)[1]


def test_ci_runs_the_readme_command_and_the_static_checks() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for step in ("README.md", "ruff check .", "ruff format --check .", "mypy", "rm -rf .venv-ci"):
        assert step in ci
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first = readme[readme.index("```bash") + 1 : readme.index("```bash") + 3]
    assert all(line.startswith("python3 -m venv .venv && . .venv/bin/activate && ") for line in first)
    assert first[1].endswith("python -m pip install '.[test]' && python -m pytest -n auto")
