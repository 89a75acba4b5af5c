"""Archiving, backups, point-in-time restore and fork on real clusters (issue 16's "Done means"):
rows up to a moment T and a table dropped after it come back in a cluster restored to T; a fork
has everything; the source's rows and postmaster are untouched; both answer with their own
connection details. And the refusals: a time outside the window, a name taken, a plan too
small, a repository that cannot be written or read; none leaves a cluster behind."""

from __future__ import annotations

import datetime as dt
import os
import time

import psycopg
import pytest
from django.utils import timezone

from panel.backups.engine import runner as engine
from panel.backups.models import BackupJob, JobStatus, RestoreOrigin
from panel.backups.services import archiving, backups, restore
from panel.clusters import services
from panel.clusters.engine import isolation, postgres
from panel.clusters.models import Cluster, credentials
from panel.clusters.tests.conftest import connect_as_client, module_cluster_fixture, refreshed_fixture
from panel.core.errors import ServiceError

pytestmark = pytest.mark.integration


source = module_cluster_fixture("bk-owner", "bk-source")


fresh = refreshed_fixture("source")


def rows(cluster: Cluster, query: str) -> list[tuple]:
    with connect_as_client(cluster) as conn:
        return conn.execute(query).fetchall()


def remove(cluster: Cluster) -> None:
    services.delete_cluster(Cluster.objects.get(pk=cluster.pk), confirm_name=cluster.name)


def test_a_new_cluster_archives_and_doadmin_cannot_change_it(fresh: Cluster) -> None:
    status = archiving.archive_status(fresh)
    assert status.active and not status.needs_restart
    conf = engine.paths(fresh).root
    assert conf.stat().st_mode & 0o777 == 0o700
    assert conf.stat().st_uid == isolation.os_user(fresh).uid
    assert not (conf / "pgpass").exists()  # pgBackRest logs in by peer authentication
    with connect_as_client(fresh) as conn:
        for statement in (
            "ALTER SYSTEM SET archive_command = 'touch /tmp/pwned-%f'",
            "SET archive_command = 'touch /tmp/pwned'",
            "ALTER DATABASE defaultdb SET archive_command = 'x'",
            "ALTER ROLE doadmin SET archive_command = 'x'",
            "SELECT set_config('archive_command', 'x', false)",
            "ALTER SYSTEM SET archive_mode = off",
            "ALTER SYSTEM RESET ALL",
        ):
            with pytest.raises(psycopg.Error):
                conn.execute(statement)
            conn.rollback()
        assert "archive-push" in conn.execute("SHOW archive_command").fetchone()[0]


def test_backup_restore_to_a_moment_and_fork(fresh: Cluster, owner: object) -> None:
    with connect_as_client(fresh) as conn:
        conn.execute("CREATE TABLE kept (i int)")
        conn.execute("CREATE TABLE dropped_later (i int)")
        conn.execute("INSERT INTO kept SELECT generate_series(1, 100)")
        conn.execute("INSERT INTO dropped_later VALUES (1)")
        conn.commit()
    job = backups.create_backup(fresh, "full")
    assert job.status == JobStatus.SUCCEEDED and job.label.endswith("F")
    with connect_as_client(fresh) as conn:
        conn.execute("INSERT INTO kept SELECT generate_series(101, 150)")
        conn.commit()
    time.sleep(1.1)
    moment = timezone.now()
    time.sleep(1.1)
    with connect_as_client(fresh) as conn:
        conn.execute("INSERT INTO kept SELECT generate_series(151, 200)")
        conn.execute("DROP TABLE dropped_later")
        conn.commit()
    started = postgres.started_at(fresh.pgdata)

    page = backups.page(fresh)
    assert [b.label for b in page.backups] == [job.label]
    assert page.window_start is not None and page.window_start <= moment

    at_t = restore.restore_cluster(fresh, fresh.owner, name="bk-at-t", target_time=moment)
    try:
        assert at_t.status == "online"
        assert rows(at_t, "SELECT count(*), max(i) FROM kept") == [(150, 150)]
        assert rows(at_t, "SELECT count(*) FROM dropped_later") == [(1,)]
        origin = RestoreOrigin.objects.get(cluster=at_t)
        assert origin.source_id == fresh.pk and origin.target_time == moment
        assert at_t.port != fresh.port and at_t.ca_certificate != fresh.ca_certificate
        assert credentials.superuser_password(at_t) != credentials.superuser_password(fresh)
        assert set(at_t.users.values_list("name", flat=True)) == {"doadmin"}
        assert archiving.archive_status(at_t).active  # archiving of its own
        assert engine.paths(at_t).config.is_file()

        fork = restore.restore_cluster(fresh, fresh.owner, name="bk-fork", target_time=None)
        try:
            assert rows(fork, "SELECT count(*), max(i) FROM kept") == [(200, 200)]
            assert rows(fork, "SELECT to_regclass('dropped_later') IS NULL") == [(True,)]
        finally:
            remove(fork)
    finally:
        remove(at_t)
    assert rows(fresh, "SELECT count(*) FROM kept") == [(200,)]
    assert postgres.started_at(fresh.pgdata) == started


def test_refusals_leave_no_cluster(fresh: Cluster) -> None:
    if not BackupJob.objects.filter(cluster=fresh, status=JobStatus.SUCCEEDED).exists():
        backups.create_backup(fresh, "full")
    before = set(Cluster.objects.values_list("pk", flat=True))
    cases = [
        ({"name": "bk-early", "target_time": timezone.now() - dt.timedelta(days=30)}, "time"),
        ({"name": "bk-late", "target_time": timezone.now() + dt.timedelta(hours=2)}, "time"),
        ({"name": fresh.name, "target_time": None}, "name"),
        ({"name": "Bad Name!", "target_time": None}, "name"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ServiceError) as refused:
            restore.restore_cluster(fresh, fresh.owner, **kwargs)
        assert refused.value.field == field, (kwargs, refused.value.message)
    assert set(Cluster.objects.values_list("pk", flat=True)) == before


def test_a_plan_too_small_is_refused(fresh: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from panel.clusters.lib import plans

    real = plans.require_plan

    def tiny(slug: str, field: str = "plan") -> plans.Plan:
        plan = real(slug, field)
        return plans.Plan(**{**plan.__dict__, "disk_gb": 0}) if slug == "db-s-1vcpu-2gb" else plan

    monkeypatch.setattr("panel.backups.services.restore.require_plan", tiny)
    with pytest.raises(ServiceError) as refused:
        restore.restore_cluster(
            fresh, fresh.owner, name="bk-small", target_time=None, plan_slug="db-s-1vcpu-2gb"
        )
    assert refused.value.field == "plan"
    assert not Cluster.objects.filter(name="bk-small").exists()


def test_an_unwritable_repository_fails_the_backup_with_its_reason(
    fresh: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    repo = engine.paths(fresh).repo / "backup" / "main"
    mode = repo.stat().st_mode & 0o777
    os.chmod(repo, 0o500)
    try:
        with pytest.raises(ServiceError) as refused:
            backups.create_backup(fresh, "incr")
    finally:
        os.chmod(repo, mode)
    # The user reads a coded sentence; pgBackRest's words (with the repository's path) are the log's.
    assert refused.value.code == "backup.failed" and "pgbackrest" not in refused.value.message
    assert "pgbackrest backup failed" in caplog.text and str(repo) in caplog.text
    failed = BackupJob.objects.filter(cluster=fresh).first()
    assert failed is not None and failed.status == JobStatus.FAILED


def test_a_repository_pgbackrest_cannot_read_is_a_sentence_on_the_tab(
    fresh: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    config = engine.paths(fresh).config
    mode = config.stat().st_mode & 0o777
    os.chmod(config, 0)  # pgBackRest, as the cluster's user, cannot read its configuration
    try:
        problem = backups.page(fresh).problem
        with pytest.raises(ServiceError) as refused:
            restore.restore_cluster(fresh, fresh.owner, name="bk-unread", target_time=None)
    finally:
        os.chmod(config, mode)
    # What the tab, the API and a restore say: a sentence; pgBackRest's words and paths: the log.
    assert str(problem).startswith("The backup repository could not be read.")
    assert refused.value.code == "backup.repository_unreadable"
    assert str(config) not in str(problem) and str(config) not in refused.value.message
    assert "pgbackrest info failed" in caplog.text and str(config) in caplog.text
    assert not Cluster.objects.filter(name="bk-unread").exists()


def test_an_unreadable_repository_fails_the_restore_and_leaves_nothing(fresh: Cluster) -> None:
    if not BackupJob.objects.filter(cluster=fresh, status=JobStatus.SUCCEEDED).exists():
        backups.create_backup(fresh, "full")
    before = set(Cluster.objects.values_list("pk", flat=True))
    users_before = set(os.listdir("/home")) if os.path.isdir("/home") else set()
    backup_dir = engine.paths(fresh).repo / "backup" / "main"
    info = backup_dir / "backup.info"
    copy = backup_dir / "backup.info.copy"
    saved = {p: p.read_bytes() for p in (info, copy)}
    for p in saved:
        p.write_text("garbage\n")
    try:
        with pytest.raises(ServiceError):
            restore.restore_cluster(fresh, fresh.owner, name="bk-broken", target_time=None)
    finally:
        for p, data in saved.items():
            p.write_bytes(data)
    assert set(Cluster.objects.values_list("pk", flat=True)) == before
    assert users_before == (set(os.listdir("/home")) if os.path.isdir("/home") else set())
