"""fuse_mlir's dialects and passes for every xDSL tool (``xdsl-opt`` and friends), through ``xdsl.universe``.

xDSL discovers plug-ins by the ``xdsl.universe`` entry point group (declared in
``pyproject.toml``): each names a :class:`~xdsl.universe.Universe` of dialect
and pass factories. Every xDSL tool in the environment loads this module, so
it imports nothing heavy: the factories import their dialect or pass when
xDSL asks for it. Names are fixed here rather than read from the pass
registry (which imports every pass) and are checked against it by the tests.

xDSL refuses two universes defining one name, so our passes whose names xDSL
already has (``canonicalize``, ``cse``, ``dce``) are offered under a ``fuse-``
prefix: ``xdsl-opt -p fuse-canonicalize`` runs ours, ``-p canonicalize``
xDSL's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe

# dialect name -> (module, attribute)
DIALECTS: dict[str, tuple[str, str]] = {
    "te": ("fuse_mlir.dialects.tensor_eq", "TensorEq"),
    "ew": ("fuse_mlir.dialects.elemwise", "Elemwise"),
    "loop": ("fuse_mlir.dialects.loop", "Loop"),
}

# Our pass names that xDSL's own universe already defines: exported with the prefix below.
XDSL_CLASHES = frozenset({"canonicalize", "cse", "dce"})
PREFIX = "fuse-"

# Every built-in pass of fuse_mlir.passes, by its registry name (tests/test_universe.py keeps this in step).
PASSES = (
    "block-checks",
    "canonicalize",
    "check-bounds",
    "contract-order",
    "cse",
    "dce",
    "dedup",
    "demand",
    "expand-math",
    "freeze",
    "fuse",
    "fuse-rows",
    "grad",
    "inplace",
    "lower-ew-to-loop",
    "lower-loop-to-llvm",
    "lower-te-to-ew",
    "monte-carlo",
    "pipeline-rows",
    "semi-naive",
    "streaming-stores",
)


def universe_name(pass_name: str) -> str:
    """The name a pass of ours has in xDSL's universe."""
    return PREFIX + pass_name if pass_name in XDSL_CLASHES else pass_name


def _dialect(module: str, attr: str) -> Callable[[], Dialect]:
    return lambda: getattr(importlib.import_module(module), attr)


def _pass(name: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        from fuse_mlir.passes.registry import get_pass

        cls = get_pass(name).cls
        if name not in XDSL_CLASHES:
            return cls
        # xDSL's pipeline parser looks a pass up by the name it is spelt with and builds it from that spec,
        # which must carry the class's own name: a subclass under the prefixed name.
        return type(cls.__name__, (cls,), {"name": universe_name(name), "__doc__": cls.__doc__})

    return load


FUSE_UNIVERSE = Universe(
    all_dialects={name: _dialect(*where) for name, where in DIALECTS.items()},
    all_passes={universe_name(name): _pass(name) for name in PASSES},
)
