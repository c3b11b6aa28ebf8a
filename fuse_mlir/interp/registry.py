"""The one per-op registration shape of the IR walkers: an op class -> handler table filled by ``@table.impl(Op)``.

The reference interpreter, its elemwise extension, the loop interpreter and
the array walker of the torch/jax backends each keep their own
:class:`OpTable` (their handlers compute values their own way; the reference
stays independent of the backends), but they register, extend and look up
handlers the same way, and read the attribute-decoding plans of
:mod:`fuse_mlir.interp.plans` instead of re-parsing attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from xdsl.ir import Operation

from fuse_mlir.diagnostics import FuseRuntimeError

F = TypeVar("F", bound=Callable[..., Any])


class OpTable:
    """Handlers of one walker keyed by op class; :meth:`extend` starts a walker's table from another's."""

    def __init__(self, walker: str, base: OpTable | None = None) -> None:
        self.walker = walker
        self._handlers: dict[type[Operation], Callable[..., Any]] = dict(base._handlers) if base else {}

    def impl(self, *op_types: type[Operation]) -> Callable[[F], F]:
        """Register the decorated function (or method) as this walker's handler for ``op_types``."""

        def register(fn: F) -> F:
            for t in op_types:
                self._handlers[t] = fn
            return fn

        return register

    def extend(self, walker: str) -> OpTable:
        """A new table holding this one's handlers, for a walker that runs a superset of the ops."""
        return OpTable(walker, self)

    def get(self, op: Operation) -> Callable[..., Any] | None:
        """The handler for ``op``'s class, or None."""
        return self._handlers.get(type(op))

    def lookup(self, op: Operation) -> Callable[..., Any]:
        """The handler for ``op``'s class; an op no handler covers is a run-time error naming the walker."""
        handler = self._handlers.get(type(op))
        if handler is None:
            raise FuseRuntimeError(f"the {self.walker} cannot run '{op.name}'")
        return handler

    def __contains__(self, op_type: object) -> bool:
        return op_type in self._handlers

    def __iter__(self) -> Iterator[type[Operation]]:
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)
