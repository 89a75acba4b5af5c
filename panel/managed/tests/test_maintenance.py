"""The maintenance window on a real cluster: the node's round restarts a cluster onto a newer
installed minor inside its window only, and the Settings tab's card shows the window and what
is pending (404 to outsiders). The newer minor is simulated through what the node reports (the
installed server's ``--version`` line); the restart and the running version read are real. Then,
as the web process, the same services through the node's real agent."""

from __future__ import annotations

import datetime as dt
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import Cluster, Node
from panel.clusters.services import roles
from panel.clusters.tests.conftest import make_cluster_row
from panel.managed.models import Maintenance
from panel.managed.services import logical_replication, maintenance
from panel.pools.engine import supervisor
from panel.pools.engine.disk import bouncer_files
from panel.pools.services.actions import create_pool
from tests.fixtures.processes import start_celery_worker

TUESDAY_1430 = dt.datetime(2026, 11, 24, 14, 30, tzinfo=dt.UTC)


def _started_at(cluster: Cluster) -> object:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        assert row is not None
        return row[0]


@pytest.fixture
def agent_log(redis_server: str) -> Iterator[Path]:
    """This node's agent (a real Celery worker on ``node.local``), for the calls a web process
    sends it; the test switches its own role to "web" when it acts as the web."""
    log = Path(django_settings.PANEL_DATA_DIR) / f"agent-managed-{secrets.token_hex(3)}.log"
    proc = start_celery_worker(redis_server, f"node.{django_settings.PANEL_NODE_NAME}", log, concurrency=1)
    yield log
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.integration
def test_the_nodes_round_installs_a_newer_minor_in_the_window_only(
    local_cluster: Cluster, monkeypatch: pytest.MonkeyPatch, settings: Any, agent_log: Path
) -> None:
    maintenance.set_window(local_cluster, "tuesday", "14:00")
    create_pool(local_cluster, "maint-pool", "defaultdb", None, "transaction", 2)  # PgBouncer runs
    assert maintenance.periodic(now=TUESDAY_1430) == []  # nothing pending: no restart
    row = Maintenance.objects.get(cluster=local_cluster)
    running, bouncer = row.postgres_running, row.pgbouncer_running
    assert running.startswith("15.") and bouncer.startswith("1.")
    assert (row.postgres_installed, row.pgbouncer_installed) == (running, bouncer)  # read, and equal
    # The node reports newer releases installed (as after apt upgrade).
    monkeypatch.setattr(postgres, "release", lambda version: "postgres (PostgreSQL) 15.999 (Debian)")
    monkeypatch.setattr(supervisor, "installed_release", lambda: "PgBouncer 1.999.0")
    before = _started_at(local_cluster)
    bouncer_pid = supervisor.running_pid(bouncer_files(local_cluster))
    assert maintenance.periodic(now=TUESDAY_1430 + dt.timedelta(hours=1)) == []  # outside the window
    assert _started_at(local_cluster) == before
    assert [str(m) for m in maintenance.pending(Maintenance.objects.get(cluster=local_cluster))] == [
        f"PostgreSQL {running} → 15.999 (a restart)",
        f"PgBouncer {bouncer} → 1.999.0 (a restart)",
    ]

    assert maintenance.periodic(now=TUESDAY_1430) == [f"{local_cluster.name}: updated"]
    local_cluster.refresh_from_db()
    assert local_cluster.status == "online"
    assert _started_at(local_cluster) > before  # type: ignore[operator]
    assert local_cluster.events.filter(kind="update-installed").exists()
    new_pid = supervisor.running_pid(bouncer_files(local_cluster))
    assert new_pid is not None and new_pid != bouncer_pid
    # Once per window: the next round in the same window leaves it running.
    again = _started_at(local_cluster)
    assert maintenance.periodic(now=TUESDAY_1430 + dt.timedelta(minutes=10)) == []
    assert _started_at(local_cluster) == again

    # As the web (make run's gunicorn, which opens no socket of a cluster): the check and a
    # replication grant are the agent's work, and come back as if run in place.
    monkeypatch.undo()
    settings.PANEL_PROCESS_ROLE = "web"
    # What the agent's heartbeat says (a test worker does not beat): without it, a registration
    # by an earlier test older than PANEL_NODE_DEAD_AFTER leaves the web refusing to call it.
    Node.objects.filter(name=django_settings.PANEL_NODE_NAME).update(last_heartbeat=timezone.now())
    try:
        assert maintenance.check_updates(local_cluster) == []  # the agent reads the real versions
        roles.add_user(local_cluster, "cdc")
        assert logical_replication.set_replication(local_cluster, "cdc", True) is True
    finally:
        settings.PANEL_PROCESS_ROLE = "all"
    with dbconn.admin_connection(local_cluster) as conn:
        assert conn.execute("SELECT rolreplication FROM pg_roles WHERE rolname = 'cdc'").fetchone() == (True,)
    served = agent_log.read_text(errors="replace")
    assert served.count("panel.core.agent.call[") >= 3 and "succeeded" in served


@pytest.mark.django_db
def test_the_settings_card_shows_the_window_and_what_is_pending(
    owner: User, owner_client: Client, other_client: Client
) -> None:
    cluster = make_cluster_row(owner)
    maintenance.set_window(cluster, "friday", "02:00")
    Maintenance.objects.filter(cluster=cluster).update(postgres_running="15.18", postgres_installed="15.20")
    url = reverse("managed:maintenance", args=[cluster.pk])
    page = owner_client.get(url, headers={"HX-Request": "true"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "Friday at 02:00 UTC" in text and "PostgreSQL 15.18 → 15.20 (a restart)" in text
    assert other_client.get(url).status_code == 404
    settings_page = owner_client.get(reverse("clusters:settings", args=[cluster.pk])).content.decode()
    assert url in settings_page


@pytest.mark.django_db
def test_the_settings_card_sets_the_window_and_shows_a_bad_one_in_place(
    owner: User, owner_client: Client, other_client: Client
) -> None:
    cluster = make_cluster_row(owner)
    url = reverse("managed:maintenance", args=[cluster.pk])
    page = owner_client.post(url, {"day": "thursday", "hour": "5"}, headers={"HX-Request": "true"})
    assert page.status_code == 200 and "Thursday at 05:00 UTC" in page.content.decode()
    bad = owner_client.post(url, {"day": "someday", "hour": "25"}, headers={"HX-Request": "true"})
    assert bad.status_code == 200 and "invalid-feedback" in bad.content.decode()
    assert (Maintenance.objects.get(cluster=cluster).day, Maintenance.objects.get(cluster=cluster).hour) == (
        "thursday",
        5,
    )
    assert other_client.post(url, {"day": "monday", "hour": "1"}).status_code == 404
