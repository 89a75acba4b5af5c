"""Waiting for something to become true: a process gone, a server reloaded, a pool released."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], timeout: float, *, interval: float = 0.02) -> bool:
    """Ask ``condition`` until it is true or ``timeout`` seconds have passed; whether it became true.

    It is asked at least once, and once more at the deadline, so a short timeout never misses the
    answer it was waiting for.
    """
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
