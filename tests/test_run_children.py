"""scripts/run.py's pieces on their own, without a whole panel started: the supervisor's back-off
between a child's restarts and its giving up on a child that keeps dying (scripts/children.py,
which run.py loads), the private Redis child taking the password of REDIS_URL, and beat's child
starting over a schedule a kill left unreadable. The started panel: tests/test_run_script.py."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import redis

from tests.fixtures.runpanel import ROOT, free_port

pytestmark = pytest.mark.integration


def load_run_script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_script", ROOT / "scripts" / "run.py")
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, run)  # its dataclasses look themselves up there
    spec.loader.exec_module(run)
    return run


def test_backoff_doubles_up_to_the_cap_and_starts_over_after_a_stable_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = load_run_script(monkeypatch)
    backoff = run.Backoff()
    delays = [backoff.died(now=100.0 * i, up_for=0.5) for i in range(8)]  # deaths far apart
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]
    assert backoff.died(now=900.0, up_for=run.STABLE_AFTER) == 1  # it had stayed up: start over
    quick = run.Backoff()
    assert [quick.died(now=float(i), up_for=1) for i in range(5)] == [1, 2, 4, 8, None]


def test_a_child_that_keeps_dying_stops_the_panel_with_its_last_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = load_run_script(monkeypatch)
    # The real child, the real loop (scripts/children.py, which run.py loads), shorter waits.
    monkeypatch.setattr(sys.modules["children"], "FIRST_DELAY", 0.05)
    child = run.Child("beat", ["sh", "-c", "echo 'ImproperlyConfigured: bad schedule'; exit 3"])
    child.start(dict(os.environ))
    deadline = time.monotonic() + 20
    while not run.supervise(child, dict(os.environ)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    out = capsys.readouterr().out
    assert out.count("run    | beat exited (exit 3); restarting in") == run.GIVE_UP_DEATHS - 1
    assert (
        "run    | beat exited (exit 3) and died 5 times within 60 s: it cannot run, so the panel stops" in out
    )
    assert "run    |   ImproperlyConfigured: bad schedule" in out


def test_the_private_redis_takes_the_password_of_redis_url_as_clients_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = load_run_script(monkeypatch)
    # Percent-encoded in the URL; a quote and a backslash in the decoded password.
    url = f"redis://:p%40ss%22w%5Cord@127.0.0.1:{free_port()}/0"
    child = run.redis_child(url, tmp_path)
    child.start(dict(os.environ))
    try:
        run.wait_for_redis(url, child)
        assert redis.Redis.from_url(url, socket_timeout=2).ping()
        wrong = url.replace("p%40ss", "p%2540ss")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(wrong, socket_timeout=2).ping()
    finally:
        child.ask_to_stop()
        child.wait_stopped(time.monotonic() + 10)


def test_beat_starts_over_a_schedule_a_kill_left_unreadable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A kill while beat wrote its schedule leaves a shelve that makes every later start die at once
    ("Ran out of input"); the supervisor would give up and stop the panel. Beat starts afresh."""
    run = load_run_script(monkeypatch)
    for suffix in (".dat", ".dir", ".bak"):
        (tmp_path / f"celerybeat-schedule{suffix}").write_bytes(
            b"\x80\x04" if suffix == ".dat" else b"'entries', (0, 9)\n"
        )
    beat = run.beat_child([sys.executable, "-m", "celery", "-A", "panel"], tmp_path)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "panel.test_settings",
        "REDIS_URL": "redis://127.0.0.1:9/0",
    }
    beat.start(env)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("beat: Starting" in line for line in beat.tail):
            assert beat.proc.poll() is None, "\n".join(beat.tail)
            time.sleep(0.2)
        time.sleep(2)  # past the schedule's opening, where it died
        assert beat.proc.poll() is None, "\n".join(beat.tail)
        assert not any("Ran out of input" in line for line in beat.tail)
    finally:
        beat.proc.terminate()
        beat.proc.wait(timeout=10)
