"""Running a test's worker on several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_threads(worker: Callable[[int], None], n: int) -> None:
    """Run ``worker(0)``, ..., ``worker(n - 1)`` on ``n`` threads at once and
    wait for all of them; re-raise the first exception any of them raised
    (an exception in a thread would otherwise only be printed)."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            worker(i)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
