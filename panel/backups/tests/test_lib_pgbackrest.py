"""The pure pgBackRest module: its configuration and archiving settings, and ``info --output=json``
as pgBackRest 2.45 prints it here (golden files in data/, captured from real runs)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from panel.backups.lib import pgbackrest

DATA = Path(__file__).parent / "data"


def conf(**overrides: object) -> pgbackrest.RepoConfig:
    values: dict = {
        "repo_path": "/var/lib/pgpanel/backups/abc/repo",
        "log_path": "/var/lib/pgpanel/backups/abc/log",
        "lock_path": "/var/lib/pgpanel/backups/abc/lock",
        "pg_path": "/var/lib/pgpanel/clusters/abc/pgdata",
        "pg_port": 25060,
        "pg_socket_path": "/var/lib/pgpanel/clusters/abc/run",
        "pg_user": "pgpanel",
    }
    values.update(overrides)
    return pgbackrest.RepoConfig(**values)


def test_the_config_has_one_stanza_time_retention_and_the_server() -> None:
    text = pgbackrest.render_config(conf())
    lines = text.splitlines()
    assert "repo1-retention-full-type=time" in lines and "repo1-retention-full=7" in lines
    assert "repo1-path=/var/lib/pgpanel/backups/abc/repo" in lines
    assert lines.index("[main]") < lines.index("pg1-port=25060")
    assert "pg1-socket-path=/var/lib/pgpanel/clusters/abc/run" in lines
    assert not any("password" in line for line in lines)


def test_a_value_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError):
        pgbackrest.render_config(conf(pg_user="x\n[global]\nrepo1-path=/"))


def test_archive_settings_push_with_the_cluster_config_only() -> None:
    text = pgbackrest.archive_settings("/usr/bin/pgbackrest", "/data/backups/abc/pgbackrest.conf")
    assert "archive_mode = on" in text and "archive_timeout = 60" in text
    assert (
        "archive_command = '/usr/bin/pgbackrest --config=/data/backups/abc/pgbackrest.conf --stanza=main "
        "archive-push %p'" in text
    )
    for bad in ("/tmp/x; rm -rf /", "relative/path", "/a b", "/a'b"):
        with pytest.raises(ValueError):
            pgbackrest.archive_command("/usr/bin/pgbackrest", bad)


def test_command_is_an_argument_list() -> None:
    assert pgbackrest.command("/usr/bin/pgbackrest", "/c.conf", "backup", "--type=full") == [
        "/usr/bin/pgbackrest",
        "--config=/c.conf",
        "--stanza=main",
        "--type=full",
        "backup",
    ]


def test_info_of_one_full_backup() -> None:
    info = pgbackrest.parse_info((DATA / "info_one_full.json").read_text())
    assert info.exists and info.status_code == 0 and info.running is None
    (backup,) = info.backups
    assert backup.label == "20261125-181658F" and backup.type == "full"
    assert backup.size == 23213835 and backup.repo_size == 4549034
    assert backup.wal_start == backup.wal_stop == "000000010000000000000002"
    assert backup.stopped_at - backup.started_at == dt.timedelta(seconds=11)
    assert info.window_start() == backup.stopped_at and info.latest() == backup
    assert (info.wal_min, info.wal_max) == ("000000010000000000000001", "000000010000000000000002")


def test_info_of_a_missing_stanza_and_of_nothing() -> None:
    missing = pgbackrest.parse_info((DATA / "info_missing_stanza.json").read_text())
    assert not missing.exists and missing.window_start() is None and missing.latest() is None
    assert not pgbackrest.parse_info("[]").exists


def test_a_running_backup_shows_its_progress() -> None:
    text = (
        (DATA / "info_one_full.json")
        .read_text()
        .replace(
            '"lock":{"backup":{"held":false}}', '"lock":{"backup":{"held":true,"size":1000,"size-cp":250}}'
        )
    )
    running = pgbackrest.parse_info(text).running
    assert running is not None and running.percent == 25


def test_a_backup_starting_shows_running_without_a_total() -> None:
    info = pgbackrest.parse_info((DATA / "info_backup_running.json").read_text())
    assert info.exists and info.status_code == 2 and info.backups == []
    assert info.running is not None and info.running.percent is None
    assert info.wal_max == "000000010000000000000027"


def test_target_time_is_utc_with_milliseconds() -> None:
    moment = dt.datetime(2026, 11, 25, 19, 17, 15, 511999, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert pgbackrest.target_time(moment) == "2026-11-25 18:17:15.511+00"
    with pytest.raises(ValueError):
        pgbackrest.target_time(dt.datetime(2026, 1, 1))


def test_the_schedule_is_full_on_sundays_and_without_one() -> None:
    sunday, monday = dt.date(2026, 11, 29), dt.date(2026, 11, 30)
    assert pgbackrest.backup_type_for(sunday, has_full=True) == "full"
    assert pgbackrest.backup_type_for(monday, has_full=True) == "diff"
    assert pgbackrest.backup_type_for(monday, has_full=False) == "full"


def test_error_text_keeps_pgbackrests_error_lines() -> None:
    stderr = "WARN: something\nERROR: [041]: unable to open '/x'\n       HINT: check it\n"
    assert pgbackrest.error_text(stderr) == "ERROR: [041]: unable to open '/x' HINT: check it"
    assert pgbackrest.error_text("", "", 3) == "pgbackrest exited with code 3"


def test_an_s3_repository_is_a_prefix_of_the_clusters_own_in_the_bucket() -> None:
    s3 = pgbackrest.S3Repository(
        endpoint="s3.example.com",
        port=9000,
        bucket="backups",
        region="eu-west-1",
        key="AK",
        key_secret="SK",
        path="/pgpanel",
        uri_style="path",
    )
    lines = pgbackrest.render_config(conf(repo_path="abc123", s3=s3)).splitlines()
    assert "repo1-type=s3" in lines and "repo1-path=/pgpanel/abc123" in lines
    assert "repo1-s3-endpoint=s3.example.com" in lines and "repo1-storage-port=9000" in lines
    assert "repo1-s3-uri-style=path" in lines and "repo1-storage-verify-tls=y" in lines
    assert not any(line.startswith("repo1-path=/var") for line in lines)
