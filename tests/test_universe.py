"""fuse_mlir's xDSL universe: xdsl-opt (any xDSL tool) reads our dialects and runs our passes.

The entry point is declared in pyproject.toml; these tests check that the
universe merges with xDSL's own without a clash (a clash would break every
xDSL tool in the environment), that its pass list is the registry's, and run
``xdsl-opt``'s driver on our IR with the multiverse it would discover once the
package is installed.
"""

from __future__ import annotations

import io
import sys
import tomllib
from pathlib import Path

import pytest
from xdsl.universe import XDSL_UNIVERSE, Universe

from fuse_mlir.passes.registry import all_passes
from fuse_mlir.universe import FUSE_UNIVERSE, PASSES, universe_name

ROOT = Path(__file__).resolve().parent.parent


def _multiverse() -> Universe:
    """What ``Universe.get_multiverse`` returns with xDSL and fuse_mlir installed (raises on a clash, as it does)."""
    merged = Universe(
        all_dialects=dict(XDSL_UNIVERSE.all_dialects),
        all_passes=dict(XDSL_UNIVERSE.all_passes),
        all_targets=dict(XDSL_UNIVERSE.all_targets),
    )
    for name, dialect in FUSE_UNIVERSE.all_dialects.items():
        assert name not in merged.all_dialects, f"dialect {name} clashes with xDSL's"
        merged.all_dialects[name] = dialect
    for name, pass_ in FUSE_UNIVERSE.all_passes.items():
        assert name not in merged.all_passes, f"pass {name} clashes with xDSL's"
        merged.all_passes[name] = pass_
    return merged


def test_entry_point_is_declared() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["entry-points"]["xdsl.universe"] == {"fuse_mlir": "fuse_mlir.universe:FUSE_UNIVERSE"}
    assert isinstance(FUSE_UNIVERSE, Universe)


def test_universe_lists_every_builtin_pass_without_clashes() -> None:
    builtin = sorted(p.name for p in all_passes() if p.origin == "fuse_mlir" and not p.name.startswith("test-"))
    assert sorted(PASSES) == builtin
    merged = _multiverse()
    for name in PASSES:
        cls = merged.all_passes[universe_name(name)]()
        assert cls.name == universe_name(name)
    for name in ("te", "ew", "loop"):
        assert merged.all_dialects[name]().name == name


def test_xdsl_opt_reads_our_ir_and_runs_our_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from xdsl.xdsl_opt_main import xDSLOptMain

    from fuse_mlir.program import Program

    path = tmp_path / "prog.mlir"
    path.write_text(Program("A[i,j] = X[i,j] + 1\nY[i] = A[i,j]\nexport Y").to_mlir())
    monkeypatch.setattr(Universe, "get_multiverse", staticmethod(_multiverse))
    out = io.StringIO()
    monkeypatch.setattr(sys, "argv", ["xdsl-opt", str(path), "-p", "fuse-canonicalize,lower-te-to-ew"])
    monkeypatch.setattr(sys, "stdout", out)
    xDSLOptMain().run()
    assert "ew.generic" in out.getvalue() and "te.export" in out.getvalue()
