"""panel.core.polling.wait_for: the one loop that waits for a process, a reload or a release; and
wait_ended, which counts a zombie as ended."""

from __future__ import annotations

import subprocess
import time

import psutil

from panel.core.polling import wait_ended, wait_for


def test_it_returns_as_soon_as_the_condition_holds() -> None:
    answers = iter([False, False, True])
    asked: list[float] = []

    def condition() -> bool:
        asked.append(time.monotonic())
        return next(answers)

    assert wait_for(condition, 5, interval=0.001) is True
    assert len(asked) == 3


def test_it_gives_up_after_the_timeout_having_asked_at_the_deadline() -> None:
    asked: list[float] = []
    started = time.monotonic()
    assert wait_for(lambda: asked.append(time.monotonic()), 0.05, interval=0.01) is False
    assert asked[-1] - started >= 0.05
    assert len(asked) >= 2


def test_a_zero_timeout_still_asks_once() -> None:
    assert wait_for(lambda: True, 0) is True
    assert wait_for(lambda: False, 0) is False


def test_a_killed_process_nobody_reaped_has_ended_and_one_running_is_returned() -> None:
    killed = subprocess.Popen(["sleep", "300"])
    running = subprocess.Popen(["sleep", "300"])
    try:
        killed.kill()
        procs = [psutil.Process(killed.pid), psutil.Process(running.pid)]
        started = time.monotonic()
        assert wait_ended(procs, 0.5) == [procs[1]]
        assert procs[0].status() == psutil.STATUS_ZOMBIE  # not reaped: ended all the same
        assert wait_ended(procs[:1], 5) == [] and time.monotonic() - started < 2
    finally:
        running.kill()
        killed.wait()
        running.wait()
