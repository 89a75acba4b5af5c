"""Waiting for something to become true: a process gone, a server reloaded, a pool released."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import psutil


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


def ended(proc: psutil.Process) -> bool:
    """Gone, or a zombie: it runs and holds nothing any more (no file, lock, socket or port; userdel
    passes it by). Waiting for its reaping (``psutil.wait_procs``) waits on its parent, which for a
    daemon is init: in a container a second or two later, or never for a parent that does not."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def wait_ended(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has ``ended``, at most ``timeout`` seconds; those still running."""
    procs = list(procs)
    wait_for(lambda: all(ended(proc) for proc in procs), timeout, interval=0.01)
    return [proc for proc in procs if not ended(proc)]
