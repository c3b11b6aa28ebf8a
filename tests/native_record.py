"""Opt-in pytest plugin: record, per test, whether it built or ran native llvm/numba code (or started a process).

``python -m pytest -p tests.native_record --record-native=DIR`` writes one JSON line per test to
``DIR/native-<pid>.jsonl``: its node id and the events seen while it set up, ran and tore down. It is how the
checked pass's selection (tests/conftest.py, ``CHECKED_SKIP_*``) is verified: a test the checked pass leaves out
must show no ``llvm-*`` or ``numba-*`` event; ``python -m tests.native_record DIR`` reports the ones that do.
Events: ``llvm-jit`` (an MCJIT engine made: a kernel or runtime helper compiled or loaded from the disk cache),
``llvm-program`` (a llvm executor asked for a kernel), ``llvm-call`` (a native kernel called from Python),
``numba-program``/``numba-jit`` (the same for numba) and ``subprocess`` (a child process, started by subprocess or
multiprocessing, which this plugin cannot see into; its command's first words are recorded).
"""

from __future__ import annotations

import functools
import json
import multiprocessing.process
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_events: Counter[str] = Counter()
_commands: list[str] = []


def _counting(event: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _events[event] += 1
        return fn(*args, **kwargs)

    return wrapper


def _patch(owner: Any, name: str, event: str) -> None:
    setattr(owner, name, _counting(event, getattr(owner, name)))


def _install() -> None:
    """Wrap the places every native build and call goes through (class and module attributes, so every caller
    sees them)."""
    import llvmlite.binding as llvm

    from fuse_mlir.backends.llvm.entry import NativeEntry
    from fuse_mlir.backends.llvm.executor import NativeExecutor
    from fuse_mlir.backends.llvm.runtime import NativeKernel

    _patch(llvm, "create_mcjit_compiler", "llvm-jit")
    _patch(NativeExecutor, "program_for", "llvm-program")
    _patch(NativeKernel, "__call__", "llvm-call")
    _patch(NativeKernel, "_run", "llvm-call")
    entry_init = NativeEntry.__init__

    def init_entry(self: NativeEntry, call: Callable[[dict[str, Any]], Any], words: Any) -> None:
        entry_init(self, _counting("llvm-call", call), words)  # the C entry, called by Runner without Python

    NativeEntry.__init__ = init_entry  # type: ignore[method-assign]
    try:
        from numba.core.dispatcher import Dispatcher

        from fuse_mlir.backends.numba import NumbaExecutor
    except ImportError:
        pass
    else:
        _patch(NumbaExecutor, "program_for", "numba-program")
        _patch(Dispatcher, "_compile_for_args", "numba-jit")
        _patch(Dispatcher, "compile", "numba-jit")
    popen_init = subprocess.Popen.__init__

    @functools.wraps(popen_init)
    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        _events["subprocess"] += 1
        words = [args] if isinstance(args, (str, bytes)) else list(args)
        _commands.append(" ".join(str(w) for w in words[:4])[:200])
        popen_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    start = multiprocessing.process.BaseProcess.start

    @functools.wraps(start)
    def start_process(self: multiprocessing.process.BaseProcess) -> None:
        _events["subprocess"] += 1
        _commands.append(f"multiprocessing: {getattr(self, '_target', None)!r}"[:200])
        start(self)

    multiprocessing.process.BaseProcess.start = start_process  # type: ignore[method-assign]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-native", metavar="DIR", help="record per test whether native code ran (tests/native_record.py)"
    )
    parser.addoption(
        "--only-left-out", action="store_true", help="run only the tests the checked pass (--check-bounds) leaves out"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--record-native"):
        _install()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--only-left-out"):
        from tests.conftest import _backend_params, _leave_out, checked_pass_leaves_out

        _leave_out(config, items, lambda item: not checked_pass_leaves_out(item.nodeid, _backend_params(item)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    folder = item.config.getoption("--record-native")
    _events.clear()
    _commands.clear()
    start = time.perf_counter()
    yield
    if folder:
        seconds = round(time.perf_counter() - start, 3)
        Path(folder).mkdir(parents=True, exist_ok=True)
        params = getattr(getattr(item, "callspec", None), "params", {})
        strings = {k: v for k, v in params.items() if isinstance(v, str)}
        line = {"nodeid": item.nodeid, "params": strings, "seconds": seconds, "events": dict(_events)}
        line["commands"] = _commands[:5]
        with open(Path(folder) / f"native-{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")


def _native(record: dict[str, Any]) -> bool:
    return any(e.startswith(("llvm-", "numba-")) for e in record["events"])


def main(folder: str) -> int:
    """Print every recorded test the checked pass leaves out although it ran native code (or started a process),
    and the files whose kept tests all ran none (candidates for ``UNCHECKED_FILES``); 1 when the first list is
    not empty."""
    from tests.conftest import checked_pass_leaves_out

    records = [json.loads(line) for path in sorted(Path(folder).glob("native-*.jsonl")) for line in open(path)]
    left_out = [r for r in records if checked_pass_leaves_out(r["nodeid"], r["params"].values())]
    kept = [r for r in records if r not in left_out]
    wrong = [r for r in left_out if _native(r)]

    def seconds(rs: list[dict[str, Any]]) -> float:
        return sum(r.get("seconds", 0.0) for r in rs)

    print(
        f"{len(records)} tests recorded, {sum(map(_native, records))} ran native code; the checked pass leaves out "
        f"{len(left_out)} ({seconds(left_out):.0f} s of test time) and keeps {len(kept)} ({seconds(kept):.0f} s)"
    )
    for r in wrong:
        print("NATIVE BUT LEFT OUT:", r["nodeid"], r["events"])
    for r in left_out:
        if "subprocess" in r["events"]:
            print("left out, starts a process:", r["nodeid"], r["commands"])
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in kept:
        by_file.setdefault(r["nodeid"].split("::", 1)[0], []).append(r)
    for file, rs in sorted(by_file.items()):
        idle = [r for r in rs if not _native(r) and "subprocess" not in r["events"]]
        if idle:
            whole = " (the whole file)" if len(idle) == len(rs) else ""
            print(f"kept but ran no native code: {file}: {len(idle)} of {len(rs)}{whole}, {seconds(idle):.1f} s")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
