"""lit configuration for fuse_mlir's FileCheck tests (``lit tests/lit -v``).

``%fuse-opt`` and ``%fuse`` run the command-line tools with the interpreter
that runs lit (``python -m fuse_mlir.cli.fuse_opt``), so the suite works in any
virtual environment; that interpreter's folder also goes first on PATH so
``filecheck`` resolves. Test outputs go to ``build/lit`` (git-ignored).
"""

# ruff: noqa: F821  (lit injects ``config`` and ``lit_config``)

import os
import shlex
import sys

import lit.formats

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

config.name = "fuse_mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".fuse", ".mlir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(REPO_ROOT, "build", "lit")

python = shlex.quote(sys.executable)
# Longest first: lit applies substitutions in order, and %fuse is a prefix of %fuse-opt.
config.substitutions.append(("%fuse-opt", f"{python} -m fuse_mlir.cli.fuse_opt"))
config.substitutions.append(("%fuse", f"{python} -m fuse_mlir.cli.fuse"))
config.substitutions.append(("%python", python))

bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bin_dir, config.environment.get("PATH", os.defpath)])
# Test this checkout even where the package is not installed (or installed elsewhere).
config.environment["PYTHONPATH"] = os.pathsep.join(p for p in [REPO_ROOT, os.environ.get("PYTHONPATH", "")] if p)
for var in ("FUSE_DEBUG", "HOME", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
