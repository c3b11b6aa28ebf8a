"""The IR levels ``fuse-opt --emit`` can bring a module to, in lowering order, and how to reach each.

A level is registered with the pipeline that lowers the previous level to it
and the dialect prefixes whose ops mark a module as being at that level:

    register_level("elemwise", "lower-te-to-elemwise", dialects=("elemwise",))

Emitting level L from a module at level K (found from its ops) runs the
lowerings of the levels after K up to L. ``dot`` is not a level: it renders
the module, at whatever level it is, as a Graphviz graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from fuse_mlir.diagnostics import FuseError

DOT = "dot"


@dataclass(frozen=True)
class Level:
    """A registered IR level."""

    name: str
    lowering: str
    description: str
    dialects: tuple[str, ...]


_LEVELS: dict[str, Level] = {}


def register_level(name: str, lowering: str, *, description: str = "", dialects: Sequence[str] = ()) -> None:
    """Add level ``name`` after those registered so far; ``lowering`` is the pipeline from the previous level."""
    if name == DOT:
        raise ValueError("'dot' is reserved for the graph view")
    if name in _LEVELS and _LEVELS[name].lowering != lowering:
        raise ValueError(f"level '{name}' is already registered")
    _LEVELS[name] = Level(name, lowering, description, tuple(dialects))


def all_levels() -> list[Level]:
    """The levels in lowering order (after loading the pass modules and plug-ins, which may register more)."""
    from fuse_mlir.passes.registry import load_plugins

    load_plugins()
    return list(_LEVELS.values())


def get_level(name: str) -> Level:
    """The level ``name``; an unknown name is a :class:`FuseError`."""
    for level in all_levels():
        if level.name == name:
            return level
    raise FuseError(f"unknown level '{name}' (levels: {', '.join(lv.name for lv in all_levels())})")


def module_level(module: ModuleOp) -> str:
    """The level ``module`` is at: the furthest-lowered level with an op of its dialects (else the first)."""
    levels = all_levels()
    names = {op.name.split(".", 1)[0] for op in module.walk()}
    found = levels[0].name
    for level in levels:
        if any(prefix in names for prefix in level.dialects):
            found = level.name
    return found


def lowering_spec(from_level: str, to_level: str) -> str:
    """The pipeline text that lowers a module from ``from_level`` to ``to_level`` (empty if the same)."""
    names = [lv.name for lv in all_levels()]
    start, end = names.index(get_level(from_level).name), names.index(get_level(to_level).name)
    if end < start:
        raise FuseError(f"cannot raise a module from level {from_level} to {to_level}: lowering goes one way")
    return ",".join(lv.lowering for lv in all_levels()[start + 1 : end + 1] if lv.lowering.strip())


register_level(
    "tensor_eq",
    "",
    description="equation-level tensor ops with named indices (the te dialect); where .fuse programs land",
    dialects=("te",),
)
register_level(
    "elemwise",
    "lower-te-to-ew",
    description="positional kernels with scalar bodies (ew.generic), BLAS-able contractions, host calls",
    dialects=("ew",),
)
register_level(
    "loop",
    "lower-ew-to-loop",
    description="loop nests over buffers in func @fuse_main (loop dialect + arith/math), the native ABI's shape",
    dialects=("loop", "func"),  # func: a program with no equations lowers to an empty @fuse_main, no loop op
)
register_level(
    "llvm-dialect",
    "lower-loop-to-llvm",
    description="xDSL's llvm dialect implementing the native entry point (docs/native-abi.md)",
    dialects=("llvm",),
)
