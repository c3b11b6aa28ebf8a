"""Analysis caching between passes: compute a fact about a module once, reuse it until the module changes.

An *analysis* is any callable ``analysis(module) -> result`` (a function, or a
class whose constructor takes the module). A pass asks
``analyses.get(MyAnalysis)``; the first request computes it, later requests
(by this pass or later ones) get the cached result. After a pass that reports
a change, the pipeline drops every cached result except those the pass kept
with ``analyses.preserve(...)`` -- the MLIR AnalysisManager contract, per run.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from xdsl.dialects.builtin import ModuleOp

T = TypeVar("T")

Analysis = Callable[[ModuleOp], Any]


class AnalysisManager:
    """The analyses of one module during one pipeline run.

    ``computed`` and ``hits`` count computations and cache hits (for tests and
    instrumentation).
    """

    def __init__(self, module: ModuleOp) -> None:
        self.module = module
        self._cache: dict[Hashable, Any] = {}
        self._preserved: set[Hashable] = set()
        self.computed = 0
        self.hits = 0

    def get(self, analysis: Callable[[ModuleOp], T]) -> T:
        """The result of ``analysis(module)``, computed at most once until a pass changes the module."""
        key = cast(Hashable, analysis)
        if key in self._cache:
            self.hits += 1
            return cast(T, self._cache[key])
        result = analysis(self.module)
        self._cache[key] = result
        self.computed += 1
        return result

    def cached(self, analysis: Callable[[ModuleOp], T]) -> T | None:
        """The cached result of ``analysis``, or None if it is not computed (never computes it)."""
        return cast("T | None", self._cache.get(cast(Hashable, analysis)))

    def preserve(self, *analyses: Analysis) -> None:
        """Keep these analyses valid although the current pass changes the module."""
        self._preserved.update(cast(Hashable, a) for a in analyses)

    def invalidate(self, *analyses: Analysis) -> None:
        """Drop the given analyses, or all of them when none is given."""
        if not analyses:
            self._cache.clear()
        for a in analyses:
            self._cache.pop(cast(Hashable, a), None)

    # -- called by the pipeline around each pass -------------------------------

    def begin_pass(self) -> None:
        """Forget the previous pass's ``preserve`` calls."""
        self._preserved.clear()

    def end_pass(self, changed: bool) -> None:
        """After a pass: if it changed the module, drop everything it did not preserve."""
        if changed:
            for key in [k for k in self._cache if k not in self._preserved]:
                del self._cache[key]
        self._preserved.clear()
