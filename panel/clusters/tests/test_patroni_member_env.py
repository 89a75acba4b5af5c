"""A member's Patroni (and so its PostgreSQL's archive_command) is told its own data directory:
pgBackRest's archive-push refuses a data directory other than its ``pg1-path`` (member 1's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from panel.clusters.standbys.engine import patroni


def test_a_member_starts_with_its_own_pg1_path(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict] = []
    monkeypatch.setattr(patroni, "member_pid", lambda config: None)
    monkeypatch.setattr(patroni, "_detach", lambda user, argv, log, join=(), env=None: started.append(env))
    patroni.start_member(
        Path("/x/member-2.json"), Path("/x/log"), object(), [], data_dir="/x/members/member-2"
    )  # type: ignore[arg-type]
    patroni.start_member(Path("/x/member-3.json"), Path("/x/log"), object(), [])  # type: ignore[arg-type]
    assert started == [{"PGBACKREST_PG1_PATH": "/x/members/member-2"}, None]
