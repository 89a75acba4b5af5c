"""The pools are paused around a change of primary, and always resumed (no server needed)."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from panel.pools.engine import console
from panel.pools.services import release

CLUSTER = SimpleNamespace(pk=1, name="db")


class FakeConsole:
    def __init__(self) -> None:
        self.said: list[str] = []


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeConsole:
    fake = FakeConsole()

    @contextmanager
    def admin_console(cluster: object):  # type: ignore[no-untyped-def]
        yield fake

    monkeypatch.setattr(release, "pooler_running", lambda cluster: True)
    monkeypatch.setattr(release, "admin_console", admin_console)
    monkeypatch.setattr(console, "pause", lambda conn, timeout: conn.said.append("PAUSE") or True)
    monkeypatch.setattr(console, "resume", lambda conn: conn.said.append("RESUME"))
    return fake


def test_the_block_runs_between_pause_and_resume(fake: FakeConsole) -> None:
    with release.paused(CLUSTER) as holding:  # type: ignore[arg-type]
        assert holding and fake.said == ["PAUSE"]
        fake.said.append("switchover")
    assert fake.said == ["PAUSE", "switchover", "RESUME"]


def test_resume_follows_a_failure_too(fake: FakeConsole) -> None:
    with pytest.raises(RuntimeError), release.paused(CLUSTER):  # type: ignore[arg-type]
        raise RuntimeError("Patroni did not switch over")
    assert fake.said == ["PAUSE", "RESUME"]


def test_a_pause_still_waiting_is_resumed_too(fake: FakeConsole, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "pause", lambda conn, timeout: conn.said.append("PAUSE") and False)
    with release.paused(CLUSTER) as holding:  # type: ignore[arg-type]
        assert holding
    assert fake.said == ["PAUSE", "RESUME"]


def test_no_pgbouncer_nothing_to_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release, "pooler_running", lambda cluster: False)
    with release.paused(CLUSTER) as holding:  # type: ignore[arg-type]
        assert holding is False
