"""The report's timing helpers (benchmarks/measure.py): waiting for a quiet process before a settling call."""

from __future__ import annotations

import threading
import time

from benchmarks.measure import QUICK, interleaved_medians, wait_quiet


def test_wait_quiet_returns_at_once_on_an_idle_process():
    assert wait_quiet() < 0.1


def test_wait_quiet_waits_for_a_busy_thread():
    """A thread that spins for 60 ms (as another library's workers do after a call) is waited for; one that
    never stops is waited for at most ``max_s``."""
    stop = time.perf_counter() + 0.06

    def spin(until: float) -> None:
        while time.perf_counter() < until:
            pass

    t = threading.Thread(target=spin, args=(stop,))
    t.start()
    time.sleep(0.005)
    waited = wait_quiet(max_s=1.0)
    t.join()
    assert waited >= 0.03, waited
    forever = threading.Event()

    def spin_until_set() -> None:
        while not forever.is_set():
            pass

    t = threading.Thread(target=spin_until_set)
    t.start()
    try:
        waited = wait_quiet(max_s=0.05)
    finally:
        forever.set()
        t.join()
    assert 0.05 <= waited < 0.5, waited


def test_interleaved_medians_with_a_quiet_wait():
    """Every call is timed, with the settling call and the quiet wait before each batch."""
    counts = {"a": 0, "b": 0}

    def call(name: str):
        def f() -> None:
            counts[name] += 1
            time.sleep(0.003)

        return f

    med = interleaved_medians({k: call(k) for k in counts}, QUICK, settle=True, quiet=True)
    assert set(med) == {"a", "b"} and all(0.002 < v < 0.05 for v in med.values()), med
    assert counts["a"] >= 2 * QUICK.min_rounds and counts["b"] >= 2 * QUICK.min_rounds
