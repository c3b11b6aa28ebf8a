"""Run a test body on several threads at once and re-raise what any of them raised (a failure on a worker thread
is otherwise lost: only the main thread's exceptions fail a test)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[int], None], n: int) -> None:
    """Call ``work(k)`` for ``k`` in ``range(n)``, each on its own thread, all started before any is joined."""
    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            work(k)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
