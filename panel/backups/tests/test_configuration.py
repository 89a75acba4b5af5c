"""The S3 repository's settings: off by default; the secret key only ever given encrypted with the
panel's key (``manage.py backup encrypt-secret`` reads it on stdin) and decrypted into the
clusters' 0600 pgbackrest.conf. (No S3 server is run here: moto's TLS development server drops
pgBackRest's connections, so the repository itself is not exercised.)"""

from __future__ import annotations

import io
import sys

import pytest
from django.core.management import call_command

from panel import crypto
from panel.backups.engine import runner as engine


def test_no_endpoint_means_the_local_repository(settings: object) -> None:
    settings.PANEL_BACKUP_S3_ENDPOINT = ""  # type: ignore[attr-defined]
    assert engine.s3_repository() is None


def test_the_secret_is_read_encrypted(settings: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("very-secret\n"))
    out = io.StringIO()
    call_command("backup", "encrypt-secret", stdout=out)
    token = out.getvalue().strip()
    assert "very-secret" not in token and crypto.decrypt(token) == "very-secret"
    settings.PANEL_BACKUP_S3_ENDPOINT = "minio.internal:9000"  # type: ignore[attr-defined]
    settings.PANEL_BACKUP_S3_BUCKET = "pg"  # type: ignore[attr-defined]
    settings.PANEL_BACKUP_S3_KEY = "AK"  # type: ignore[attr-defined]
    settings.PANEL_BACKUP_S3_KEY_SECRET_ENCRYPTED = token  # type: ignore[attr-defined]
    s3 = engine.s3_repository()
    assert s3 is not None and (s3.endpoint, s3.port, s3.key_secret) == ("minio.internal", 9000, "very-secret")


def test_a_missing_pgbackrest_is_a_system_check_warning(settings: object) -> None:
    from panel.backups.checks import check_pgbackrest

    assert check_pgbackrest(None) == []
    settings.PANEL_PGBACKREST = "/nonexistent/pgbackrest"  # type: ignore[attr-defined]
    (warning,) = check_pgbackrest(None)
    assert warning.id == "backups.W001" and "without WAL archiving" in warning.msg


def test_the_tabs_figures_cross_to_the_web_and_back() -> None:
    """What the node agent answers a web process (panel/core/agent.py) decodes to the same page."""
    import datetime as dt
    from pathlib import Path

    from panel.backups.lib import pgbackrest
    from panel.backups.services.archiving import ArchiveStatus
    from panel.backups.services.backups import BackupsPage
    from panel.core import agent

    info = pgbackrest.parse_info((Path(__file__).parent / "data" / "info_one_full.json").read_text())
    now = dt.datetime(2026, 11, 25, 18, 0, tzinfo=dt.UTC)
    page = BackupsPage(
        backups=info.backups,
        window_start=info.window_start(),
        window_end=now,
        running=True,
        running_percent=None,
        archive=ArchiveStatus(configured=True, active=True, failed_count=1, last_failed_at=now),
    )
    assert agent.decode(agent.encode(page)) == page
