"""The maintenance window on a real cluster: the node's round restarts a cluster onto a newer
installed minor inside its window only, and the Settings tab's card shows the window and what
is pending (404 to outsiders). The newer minor is simulated through what the node reports (the
installed server's ``--version`` line); the restart and the running version read are real."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.managed.models import Maintenance
from panel.managed.services import maintenance
from panel.pools.engine import supervisor
from panel.pools.engine.disk import bouncer_files
from panel.pools.services.actions import create_pool

TUESDAY_1430 = dt.datetime(2026, 11, 24, 14, 30, tzinfo=dt.UTC)


def _started_at(cluster: Cluster) -> object:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        assert row is not None
        return row[0]


@pytest.mark.integration
def test_the_nodes_round_installs_a_newer_minor_in_the_window_only(
    local_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    maintenance.set_window(local_cluster, "tuesday", "14:00")
    create_pool(local_cluster, "maint-pool", "defaultdb", None, "transaction", 2)  # PgBouncer runs
    assert maintenance.periodic(now=TUESDAY_1430) == []  # nothing pending: no restart
    row = Maintenance.objects.get(cluster=local_cluster)
    running, bouncer = row.postgres_running, row.pgbouncer_running
    assert running.startswith("15.") and bouncer.startswith("1.")
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
