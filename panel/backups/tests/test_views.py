"""The Backups tab, "Back up now", the restore form, the delete choice and `manage.py backup`, on
a real cluster: outsiders get 404s, refusals show on their fields, and what the page promises
(a fork marked with its origin, kept or removed backups) happens."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from panel.backups.engine import runner as engine
from panel.backups.models import BackupJob, JobKind, JobStatus, KeptRepository
from panel.backups.services import backups, restore, retention
from panel.clusters import services
from panel.clusters.engine import isolation
from panel.clusters.models import Cluster
from panel.clusters.services import transitions
from panel.clusters.tests.conftest import connect_as_client, module_cluster_fixture, refreshed_fixture
from panel.core.errors import ServiceError

pytestmark = pytest.mark.integration


source = module_cluster_fixture("bkv-owner", "bkv-source")


fresh = refreshed_fixture("source")


@pytest.fixture
def tenant(fresh: Cluster) -> Client:
    client = Client()
    client.force_login(fresh.owner)
    return client


def test_outsiders_get_404s(fresh: Cluster, other_client: Client) -> None:
    for name, method in (("tab", "get"), ("now", "post"), ("restore", "post")):
        response = getattr(other_client, method)(reverse(f"backups:{name}", args=[fresh.pk]))
        assert response.status_code == 404, name
    assert not BackupJob.objects.filter(cluster=fresh).exists()


def test_the_tab_lists_backups_and_the_window(fresh: Cluster, tenant: Client) -> None:
    page = tenant.get(reverse("backups:tab", args=[fresh.pk])).content.decode()
    assert "No backups yet." in page and "a full backup on Sundays" in page
    # The tab, folded under "More" with Logs, Quotas and Migration, and the open one.
    assert (
        f'<a class="dropdown-item active" aria-current="page" href="/clusters/{fresh.pk}/backups/">Backups</a>'
        in page
    )
    job = backups.create_backup(fresh, "full")
    page = tenant.get(reverse("backups:tab", args=[fresh.pk])).content.decode()
    assert job.label in page and "Restorable from" in page
    assert 'type="datetime-local"' in page and 'min="' in page and 'max="' in page
    assert "Connection pools are not copied" in page


def test_back_up_now_queues_a_job_on_the_node(fresh: Cluster, tenant: Client, queued_tasks: object) -> None:
    response = tenant.post(
        reverse("backups:now", args=[fresh.pk]), {"backup_type": "diff"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "Backup queued." in response.content.decode()
    job = BackupJob.objects.get(cluster=fresh, status=JobStatus.QUEUED)
    assert queued_tasks(fresh.backups_queue) == [("panel.backups.tasks.backup", [str(job.pk)])]  # type: ignore[operator]
    assert 'hx-trigger="every 2s' in response.content.decode()  # the tab polls while it runs
    again = tenant.post(
        reverse("backups:now", args=[fresh.pk]), {"backup_type": "full"}, HTTP_HX_REQUEST="true"
    )
    assert "already running" in again.content.decode()
    backups.perform_backup(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.label.endswith("D")


def test_a_failed_backup_shows_a_sentence_and_leaves_pgbackrests_words_to_the_log(
    fresh: Cluster, tenant: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    missing = "/nonexistent/pgpanel-repository"
    real_run = engine.run

    def elsewhere(cluster: Cluster, action: str, *options: str, timeout: float) -> object:
        # pgBackRest fails for real: its repository is a directory that does not exist.
        return real_run(cluster, action, *options, f"--repo1-path={missing}", timeout=timeout)

    monkeypatch.setattr(engine, "run", elsewhere)
    with pytest.raises(ServiceError, match="Backup failed: the panel's log holds the details") as failed:
        backups.create_backup(fresh, "full")
    assert failed.value.code == "backup.failed"
    job = BackupJob.objects.filter(cluster=fresh).latest("created_at")
    assert job.status == JobStatus.FAILED

    page = tenant.get(reverse("backups:tab", args=[fresh.pk])).content.decode()
    assert "Backup failed: the panel&#x27;s log holds the details for an administrator" in page
    assert missing not in page and "ERROR: [" not in page
    assert missing in caplog.text  # pgBackRest's own words, for an administrator
    event = fresh.events.filter(kind="backup-failed").latest("created_at")
    assert missing not in str(event.shown)


def test_restore_form_refusals_show_on_their_fields(fresh: Cluster, tenant: Client) -> None:
    if not BackupJob.objects.filter(cluster=fresh, status=JobStatus.SUCCEEDED).exists():
        backups.create_backup(fresh, "full")
    url = reverse("backups:restore", args=[fresh.pk])
    early = (timezone.now() - dt.timedelta(days=20)).strftime("%Y-%m-%dT%H:%M:%S")
    cases = [
        (
            {"name": "bkv-new", "point": "time", "time": early, "plan": fresh.plan_slug},
            "Choose a time between",
        ),
        ({"name": "bkv-new", "point": "time", "time": "", "plan": fresh.plan_slug}, "Choose the moment"),
        (
            {"name": fresh.name, "point": "latest", "plan": fresh.plan_slug},
            "You already have a cluster named",
        ),
    ]
    for data, words in cases:
        response = tenant.post(url, data, HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        assert words in response.content.decode(), data
    assert Cluster.objects.filter(owner=fresh.owner).count() == 1


def test_fork_from_the_form_then_delete_keeping_or_removing_backups(
    fresh: Cluster, tenant: Client, queued_tasks: object
) -> None:
    if not BackupJob.objects.filter(cluster=fresh, status=JobStatus.SUCCEEDED).exists():
        backups.create_backup(fresh, "full")
    response = tenant.post(
        reverse("backups:restore", args=[fresh.pk]),
        {"name": "bkv-fork", "point": "latest", "plan": fresh.plan_slug},
        HTTP_HX_REQUEST="true",
    )
    fork = Cluster.objects.get(owner=fresh.owner, name="bkv-fork")
    assert response.headers["HX-Redirect"] == reverse("backups:tab", args=[fresh.pk])
    job = BackupJob.objects.get(cluster=fresh, kind=JobKind.RESTORE)
    assert queued_tasks(fresh.backups_queue) == [("panel.backups.tasks.restore", [str(job.pk)])]  # type: ignore[operator]
    restore.perform_restore(job.pk)
    fork.refresh_from_db()
    assert fork.status == "online", fork.error_message
    with connect_as_client(fork) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("defaultdb",)
    tab = tenant.get(reverse("backups:tab", args=[fresh.pk])).content.decode()
    assert f'href="{reverse("clusters:detail", args=[fork.pk])}">bkv-fork</a>' in tab
    page = tenant.get(reverse("clusters:detail", args=[fork.pk])).content.decode()
    assert "Forked from bkv-source" in page
    assert 'name="keep_backups"' in page and "checked" in page[page.index('name="keep_backups"') :][:200]

    # Its own first backup, then deleted keeping the backups (the default): kept, owned by the panel.
    backups.create_backup(fork, "full")
    root = engine.paths(fork).root
    hex_id = fork.id.hex
    services.delete_cluster(fork, confirm_name=fork.name)
    kept = KeptRepository.objects.get(cluster_hex=hex_id)
    assert root.is_dir() and root.stat().st_uid == 0
    assert kept.expires_at > timezone.now() + dt.timedelta(days=6)
    assert retention.expire_kept(now=timezone.now()) == []
    assert retention.expire_kept(now=timezone.now() + dt.timedelta(days=8))
    assert not root.exists() and not KeptRepository.objects.filter(cluster_hex=hex_id).exists()


def test_deleting_without_keeping_removes_the_backups(fresh: Cluster, tenant: Client) -> None:
    backups.create_backup(fresh, "full")  # its own source backup, whatever ran before in the module
    other = restore.restore_cluster(fresh, fresh.owner, name="bkv-gone", target_time=None)
    backups.create_backup(other, "full")
    root = engine.paths(other).root
    response = tenant.post(
        reverse("clusters:delete", args=[other.pk]),
        {"confirm_name": other.name, "backups_choice": "1"},  # the box unticked
    )
    assert response.status_code in (200, 302)
    other.refresh_from_db()
    services.delete_cluster(other, confirm_name=other.name)  # the worker's half, in the foreground
    assert not root.exists()
    assert not KeptRepository.objects.filter(cluster_name="bkv-gone").exists()


def test_the_backup_command(fresh: Cluster) -> None:
    owner = User.objects.get(pk=fresh.owner_id).username
    out = io.StringIO()
    call_command("backup", "create", fresh.name, "--owner", owner, "--type", "full", stdout=out)
    assert "Backup " in out.getvalue() and "taken (full)" in out.getvalue()
    out = io.StringIO()
    call_command("backup", "list", fresh.name, "--owner", owner, stdout=out)
    assert "Restorable from" in out.getvalue() and "F  full" in out.getvalue()
    with pytest.raises(CommandError, match="--time"):
        call_command("backup", "restore", fresh.name, "--owner", owner, "--to", "x1", "--time", "yesterday")
    with pytest.raises(CommandError, match="Choose a time between"):
        call_command(
            "backup",
            "restore",
            fresh.name,
            "--owner",
            owner,
            "--to",
            "bkv-cli",
            "--time",
            "2001-01-01T00:00:00Z",
        )
    assert not Cluster.objects.filter(name="bkv-cli").exists()


def test_a_cluster_from_before_backups_archives_after_its_restart(fresh: Cluster, tenant: Client) -> None:
    from panel.backups.services import archiving
    from panel.clusters.engine import postgres

    # As a cluster created before this app: stopped, no backup.conf, started as it was.
    services.perform_action(fresh, "stop")
    (fresh.pgdata / engine.SERVER_FILE).unlink()
    isolation.start_server(fresh, isolation.os_user(fresh), 60)
    transitions.mark_online(fresh)
    assert postgres.postmaster_pid(fresh.pgdata) is not None
    status = archiving.archive_status(fresh)
    assert status.needs_restart and not status.active
    page = tenant.get(reverse("backups:tab", args=[fresh.pk])).content.decode()
    assert "Restart the cluster to enable backups" in page
    with pytest.raises(Exception, match="restart the cluster to enable backups"):
        backups.create_backup(fresh, "full")
    services.perform_action(fresh, "restart")
    assert archiving.archive_status(fresh).active
    page = tenant.get(reverse("backups:tab", args=[fresh.pk])).content.decode()
    assert "Restart the cluster to enable backups" not in page
    assert backups.create_backup(fresh, "incr").status == JobStatus.SUCCEEDED


def test_failing_archiving_is_an_event_an_alert_and_a_banner(
    fresh: Cluster, tenant: Client, mailoutbox: list, django_capture_on_commit_callbacks: object
) -> None:
    import os
    import time

    from panel.backups.services import archiving

    archive = engine.paths(fresh).repo / "archive" / "main"
    directories = [archive, *(p for p in archive.rglob("*") if p.is_dir())]
    modes = {p: p.stat().st_mode & 0o777 for p in directories}
    for p in directories:
        os.chmod(p, 0o500)
    try:
        with connect_as_client(fresh) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS churn (i int)")
            conn.execute("INSERT INTO churn VALUES (1)")
            conn.commit()
        from panel.clusters.engine import dbconn

        with dbconn.admin_connection(fresh) as conn:
            conn.execute("SELECT pg_catalog.pg_switch_wal()")
        deadline = time.monotonic() + 30
        while not archiving.archive_status(fresh).failing:
            assert time.monotonic() < deadline, "archiving did not fail"
            time.sleep(0.5)
        with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
            archiving.check_archiving(fresh)
        assert len(mailoutbox) == 1 and "WAL archiving" in mailoutbox[0].subject
        page = tenant.get(reverse("clusters:detail", args=[fresh.pk])).content.decode()
        assert 'data-banner="archive-failing"' in page
        assert fresh.events.filter(kind="archive-failed").count() == 1
        archiving.check_archiving(fresh)  # still failing: no second event
        assert fresh.events.filter(kind="archive-failed").count() == 1
    finally:
        for p, mode in modes.items():
            os.chmod(p, mode)
    deadline = time.monotonic() + 90
    while archiving.archive_status(fresh).failing:
        assert time.monotonic() < deadline, "archiving did not recover"
        time.sleep(1)
    archiving.check_archiving(fresh)
    assert fresh.events.filter(kind="archive-recovered").exists()
    page = tenant.get(reverse("clusters:detail", args=[fresh.pk])).content.decode()
    assert 'data-banner="archive-failing"' not in page


def test_the_daily_round_queues_the_days_backup_once(fresh: Cluster, queued_tasks: object) -> None:
    if not BackupJob.objects.filter(cluster=fresh, backup_type="full", status=JobStatus.SUCCEEDED).exists():
        backups.create_backup(fresh, "full")
    monday_night = dt.datetime(2030, 12, 2, 23, 0, tzinfo=dt.UTC)
    notes = backups.scheduled_round(now=monday_night)
    assert f"{fresh.name}: diff backup queued" in notes
    job = BackupJob.objects.get(cluster=fresh, status=JobStatus.QUEUED)
    assert job.scheduled and job.backup_type == "diff"
    assert ("panel.backups.tasks.backup", [str(job.pk)]) in queued_tasks(fresh.backups_queue)  # type: ignore[operator]
    assert not any(fresh.name in note for note in backups.scheduled_round(now=monday_night))  # one at a time
    job.delete()
    early_today = timezone.now().replace(hour=0, minute=1)
    assert not any(fresh.name in note for note in backups.scheduled_round(now=early_today))


def test_a_server_that_does_not_answer_is_said_on_the_tab_without_its_socket(
    fresh: Cluster, tenant: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 38: libpq's refusal named the server's socket (``/…/.s.PGSQL.N``) on the tab."""
    from django.conf import settings

    from panel.clusters.engine import postgres

    url = reverse("backups:tab", args=[fresh.pk])
    user = isolation.os_user(fresh)
    postgres.stop(fresh.version, fresh.pgdata, user=user, timeout=settings.PANEL_COMMAND_TIMEOUT)
    try:
        page = tenant.get(url, headers={"Accept-Language": "de"}).content.decode()
        assert "Server hat nicht geantwortet" in page, page
        assert ".s.PGSQL" not in page and str(fresh.socket_dir) not in page and "No such file" not in page
        assert ".s.PGSQL" in caplog.text  # the words, for an administrator
        # The API's and the command line's refusal: the same code, the same sentence.
        assert backups.page(fresh).problem_error().code == "backup.archive_status_unreadable"
    finally:
        isolation.start_server(fresh, user, settings.PANEL_COMMAND_TIMEOUT)
    # Beside it: the server back, the tab reads archiving again.
    assert backups.page(fresh).problem == ""
    assert "did not answer" not in tenant.get(url).content.decode()
