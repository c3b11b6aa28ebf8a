"""lit configuration for fuse_mlir's FileCheck tests (``lit tests/lit -v``).

``%fuse-opt`` and ``%fuse`` run the command-line tools with the interpreter
that runs lit (``python -m fuse_mlir.cli.fuse_opt``), so the suite works in any
virtual environment; that interpreter's folder also goes first on PATH so
``filecheck`` resolves. ``%repo`` is the repository root and ``%pythonpath`` the
module path the tools get. Test outputs go to ``build/lit`` (git-ignored).
"""

# ruff: noqa: F821  (lit injects ``config`` and ``lit_config``)

import os
import shlex
import sys

import lit.formats

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

config.name = "fuse_mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".fuse", ".mlir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(REPO_ROOT, "build", "lit")

python = shlex.quote(sys.executable)
# Test this checkout even where the package is not installed (or installed elsewhere).
pythonpath = os.pathsep.join(p for p in [REPO_ROOT, os.environ.get("PYTHONPATH", "")] if p)
# Longest first: lit applies substitutions in order, and %fuse is a prefix of %fuse-opt
# (%python of %pythonpath). %pythonpath serves tests that extend the module path
# (``env PYTHONPATH=%t/site:%pythonpath ...``, e.g. for a plug-in).
config.substitutions.append(("%fuse-opt", f"{python} -m fuse_mlir.cli.fuse_opt"))
config.substitutions.append(("%fuse", f"{python} -m fuse_mlir.cli.fuse"))
config.substitutions.append(("%pythonpath", shlex.quote(pythonpath)))
config.substitutions.append(("%python", python))
config.substitutions.append(("%repo", shlex.quote(REPO_ROOT)))

bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bin_dir, config.environment.get("PATH", os.defpath)])
config.environment["PYTHONPATH"] = pythonpath
for var in ("FUSE_DEBUG", "HOME", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
