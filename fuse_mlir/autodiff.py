"""``Program.grad``: a program that computes a scalar and its gradients (docs/autodiff.md).

:class:`GradProgram` is a :class:`~fuse_mlir.program.Program` whose lowering is
the base program's tensor_eq module put through the ``grad`` transformation
(:mod:`fuse_mlir.passes.grad`), per input dtype signature like any program, so
it compiles on every backend and its backward kernels fuse with the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fuse_mlir.diagnostics import FuseError, Loc
from fuse_mlir.frontend import ast as A
from fuse_mlir.frontend.lower import Lowered, LowerOptions
from fuse_mlir.passes.grad.transform import differentiate, grad_name
from fuse_mlir.program import Program


def _lhs_loc(program: Program, name: str) -> Loc | None:
    """Where ``name`` is first defined (an equation or a source), or first read; None if nowhere."""
    for eq in program.resolved.equations:
        if eq.lhs.name == name:
            return eq.lhs.loc
    for s in program.resolved.sources:
        if s.lhs.name == name:
            return s.loc
    return None


def _streaming_equation(program: Program) -> A.Equation | None:
    for eq in program.resolved.equations:
        if any(isinstance(i, A.IndexName) and i.time for i in eq.lhs.indices or ()):
            return eq
    return None


class GradProgram(Program):
    """The program ``base`` exporting ``of`` and ``d<of>_d<name>`` for each ``wrt`` name, and nothing else."""

    def __init__(self, base: Program, of: str, wrt: Sequence[str]):
        # Share the base's parse: a gradient program is the same program, lowered differently.
        self.source = base.source
        self.filename = base.filename
        self.base_dir = base.base_dir
        self.ast = base.ast
        self.resolved = base.resolved
        self._sources = None
        self._lowered = {}
        self.sources_version = 0
        self.base = base
        self.of = of
        self.wrt = tuple(wrt.split(",")) if isinstance(wrt, str) else tuple(wrt)
        self.exports = [of, *(grad_name(of, n) for n in self.wrt)]
        eq = _streaming_equation(base)
        if eq is not None:
            raise FuseError(
                f"grad: {eq.lhs.name} is a streaming equation (virtual time); streaming programs cannot be "
                "differentiated",
                eq.lhs.loc,
            )
        try:
            self.lower()  # checks the request now, with located errors
        except FuseError as e:
            if e.loc is None:
                bad = next((n for n in (of, *self.wrt) if n in e.message.split(":", 1)[-1].split()), of)
                raise FuseError(e.message, _lhs_loc(base, bad), e.notes) from None
            raise

    def source_arrays(self):  # type: ignore[override]
        return self.base.source_arrays()

    def replace_sources(self, arrays: Mapping[str, Any]) -> None:
        self.base.replace_sources(arrays)
        self._lowered.clear()
        self.sources_version += 1

    def lower(self, input_dtypes: Mapping[str, Any] | None = None, options: LowerOptions | None = None) -> Lowered:
        """The base program's module for these dtypes, differentiated (cached per signature)."""
        items = input_dtypes.items() if input_dtypes else ()
        key = (tuple(sorted((k, str(v)) for k, v in items)), options)
        hit = self._lowered.get(key)
        if hit is None:
            base = self.base.lower(input_dtypes, options)
            module = base.module.clone()
            exports = differentiate(module, self.of, self.wrt)
            hit = Lowered(module, base.inputs, exports, [*base.group_order, *exports[1:]], base.sources, [])
            self._lowered[key] = hit
        return hit

    def compile(self, backend: str = "llvm", **kwargs: Any):  # type: ignore[override]
        mode = kwargs.get("mode", "single")
        if mode in ("fixpoint", "streaming"):
            raise FuseError(f"a gradient program runs in single mode, not {mode}")
        return super().compile(backend, **kwargs)

    def to_fuse(self, input_dtypes: Mapping[str, Any] | None = None) -> str:
        """The gradient program as `.fuse` text that parses back and computes the same values."""
        from fuse_mlir.frontend.unparse import module_to_fuse

        return module_to_fuse(self.lower(input_dtypes).module)
