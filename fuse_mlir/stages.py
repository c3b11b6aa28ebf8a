"""Compile-stage timing: where a compile spends its time, and a progress line when it takes long.

The compiler's stages (parse, resolve, lowering to tensor_eq, each pass, the
loop → LLVM lowering, LLVM IR emission, LLVM's parse / optimise / codegen)
report their wall time with ``with stage("name"):`` or :func:`record`. The
times go to every active :class:`StageTimes` collector (``with StageTimes() as
t:``; collectors nest, an outer one sees what inner ones see) and nowhere when
none is active, so a stage costs a context-variable read when nobody listens.

A collector made with a ``label`` says when a compile is slow: once it has run
for ``progress_after`` seconds (default 1), every stage that ends is logged at
INFO on the ``fuse_mlir.compile`` logger (``compiling prog.fuse: fuse 0.21 s
(1.3 s so far)``), and so is the end of the compile; fast compiles log nothing. The ``fuse`` command
shows those lines on stderr; a library user sees them with
``logging.basicConfig(level=logging.INFO)``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import TracebackType

LOG = logging.getLogger("fuse_mlir.compile")
"""The logger of compile progress lines (INFO)."""

FRONTEND_STAGES = ("parse", "resolve", "lower-to-te")
"""The stages a :class:`~fuse_mlir.program.Program` times itself (``Program.frontend_seconds``)."""

PROGRESS_AFTER = 1.0
"""Seconds after which a labelled compile starts logging its stages."""

_ACTIVE: ContextVar[tuple[StageTimes, ...]] = ContextVar("fuse_mlir_compile_stages", default=())


class StageTimes:
    """Seconds per compile stage, in the order the stages first ran, collected while the object is active.

    A stage that runs several times (a pass that appears twice in a pipeline,
    ``dedup`` say) accumulates into one row; ``counts`` says how often it ran.
    """

    def __init__(self, label: str = "", progress_after: float | None = PROGRESS_AFTER) -> None:
        self.label = label
        self.progress_after = progress_after if label else None
        self.stages: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.started = 0.0
        self.seconds = 0.0  # wall time between __enter__ and __exit__
        self.reported = False  # whether a progress line was logged
        self._token: Token[tuple[StageTimes, ...]] | None = None

    def __enter__(self) -> StageTimes:
        self.started = time.perf_counter()
        self._token = _ACTIVE.set((*_ACTIVE.get(), self))
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        self.seconds = time.perf_counter() - self.started
        if self.reported and t is None and self.stages:
            LOG.info("compiled %s in %.1f s", self.label, self.total)

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to stage ``name`` (and log it if this compile has taken ``progress_after`` seconds)."""
        self.stages[name] = self.stages.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + 1
        if self.progress_after is not None:
            elapsed = time.perf_counter() - self.started
            if elapsed >= self.progress_after:
                self.reported = True
                LOG.info("compiling %s: %s %.2f s (%.1f s so far)", self.label, name, seconds, elapsed)

    @property
    def total(self) -> float:
        """The sum of the stages' seconds."""
        return sum(self.stages.values())

    def as_dict(self) -> dict[str, float]:
        """Stage name → seconds, in first-run order."""
        return dict(self.stages)

    def report(self) -> str:
        """One line per stage (seconds and share), then the total."""
        total = self.total
        lines = []
        for name, secs in [*self.stages.items(), ("total", total)]:
            share = 100.0 * secs / total if total > 0 else 0.0
            runs = self.counts.get(name, 1)
            lines.append(f"  {secs * 1e3:10.1f} ms {share:5.1f}%  {name}{f' (x{runs})' if runs > 1 else ''}")
        return "\n".join(lines)


def active() -> bool:
    """Whether any collector listens (to skip work done only to report a stage)."""
    return bool(_ACTIVE.get())


def record(name: str, seconds: float) -> None:
    """Add ``seconds`` to stage ``name`` of every active collector."""
    for times in _ACTIVE.get():
        times.add(name, seconds)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the ``with`` block as stage ``name`` (for every active collector; nothing when none is active)."""
    listeners = _ACTIVE.get()
    if not listeners:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - start
        for times in listeners:
            times.add(name, seconds)


@contextmanager
def unrecorded() -> Iterator[None]:
    """Run the block with no collector listening: the runtime's own one-time setup (the thread pool, the BLAS
    adapter, compiled once per process) is not a stage of the program being compiled."""
    token = _ACTIVE.set(())
    try:
        yield
    finally:
        _ACTIVE.reset(token)
