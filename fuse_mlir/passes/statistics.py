"""Pass statistics (MLIR's ``-mlir-pass-statistics``): counters a pass bumps and tools print.

A pass calls ``count("inplace", "allocations-saved")``; the counts go to the
innermost active :class:`Statistics` collector (``with Statistics() as s:``),
or nowhere when none is active, so passes never need to know who listens.
``fuse-opt --pass-statistics`` and the pass report in ``benchmarks/`` read them.
"""

from __future__ import annotations

from collections import defaultdict
from contextvars import ContextVar, Token
from types import TracebackType

_ACTIVE: ContextVar[Statistics | None] = ContextVar("fuse_mlir_pass_statistics", default=None)


class Statistics:
    """Counters per (pass, name), collected while the object is the active collector."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = defaultdict(dict)
        self._token: Token[Statistics | None] | None = None

    def __enter__(self) -> Statistics:
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        _ACTIVE.reset(self._token)  # type: ignore[arg-type]

    def add(self, pass_name: str, counter: str, n: int = 1) -> None:
        counters = self.counts[pass_name]
        counters[counter] = counters.get(counter, 0) + n

    def get(self, pass_name: str, counter: str) -> int:
        return self.counts.get(pass_name, {}).get(counter, 0)

    def report(self) -> str:
        """One block per pass, counters sorted by name (deterministic)."""
        lines = ["===- Pass statistics -==="]
        for name in sorted(self.counts):
            lines.append(f"{name}")
            for counter, n in sorted(self.counts[name].items()):
                lines.append(f"  ({n}) {counter}")
        return "\n".join(lines)


def count(pass_name: str, counter: str, n: int = 1) -> None:
    """Add ``n`` to a counter of the active collector (a no-op when none is active)."""
    stats = _ACTIVE.get()
    if stats is not None and n:
        stats.add(pass_name, counter, n)
