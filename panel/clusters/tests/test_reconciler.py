"""Integration: the reconciler brings back a cluster whose postmaster died."""

from __future__ import annotations

import datetime as dt
import os
import signal

import psutil
import pytest
from django.utils import timezone

from panel.clusters import services, tasks
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import reconciler

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def _settled_node(django_db_setup: None, django_db_blocker: object) -> None:
    """One round first for what earlier modules on this worker left to the node (its etcd, which
    a round stops once no cluster has members there), so that each test's notes are its own."""
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        reconciler.reconcile()


def _sigkill_postmaster(cluster: Cluster) -> int:
    pid = postgres.postmaster_pid(cluster.pgdata)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(pid)], timeout=5)
    assert postgres.postmaster_pid(cluster.pgdata) is None
    return pid


def _answers(cluster: Cluster) -> bool:
    from panel.clusters.engine import dbconn

    with dbconn.admin_connection(cluster) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def test_reconcile_restarts_a_killed_postmaster(local_cluster):
    old_pid = _sigkill_postmaster(local_cluster)

    notes = reconciler.reconcile()

    assert notes == [f"{local_cluster.name}: restarted"]
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    new_pid = postgres.postmaster_pid(local_cluster.pgdata)
    assert new_pid is not None and new_pid != old_pid
    assert _answers(local_cluster)
    kinds = list(local_cluster.events.order_by("created_at", "id").values_list("kind", flat=True))
    assert kinds[-2:] == ["degraded", "recovered"]

    # Healthy and stopped clusters are left alone.
    pid = new_pid
    assert reconciler.reconcile() == []
    assert postgres.postmaster_pid(local_cluster.pgdata) == pid

    services.perform_action(local_cluster, "stop")
    assert reconciler.reconcile() == []
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.STOPPED
    assert postgres.postmaster_pid(local_cluster.pgdata) is None


def test_reconcile_marks_a_stuck_creation_as_error(owner, transactional_db):
    cluster = services.create_cluster(owner, name="db-stuck", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    Cluster.objects.filter(pk=cluster.pk).update(updated_at=timezone.now() - dt.timedelta(hours=1))

    assert reconciler.reconcile() == ["db-stuck: marked error (stuck)"]

    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ERROR
    assert "interrupted" in cluster.error_message
    services.delete_cluster(cluster, confirm_name="db-stuck")


@pytest.mark.parametrize("status", [ClusterStatus.STARTING, ClusterStatus.STOPPING, ClusterStatus.DELETING])
def test_reconcile_marks_a_stuck_action_as_error(owner, transactional_db, status):
    cluster = services.create_cluster(owner, name="db-stuck", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    # A row only: no server runs behind it, and a busy cluster is not one to restart.
    Cluster.objects.filter(pk=cluster.pk).update(
        status=status, updated_at=timezone.now() - dt.timedelta(hours=1)
    )

    assert reconciler.reconcile() == ["db-stuck: marked error (stuck)"]

    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ERROR
    assert cluster.events.filter(kind="error", message__contains="interrupted").exists()


def test_the_reconcile_task_restarts_a_killed_postmaster_through_a_worker(
    local_cluster, celery_worker, wait_until
):
    old_pid = _sigkill_postmaster(local_cluster)

    tasks.reconcile.delay()

    def restarted() -> bool:
        pid = postgres.postmaster_pid(local_cluster.pgdata)
        return pid is not None and pid != old_pid

    wait_until(restarted, timeout=30, message="the worker's reconciler restarting PostgreSQL")

    def online() -> bool:
        local_cluster.refresh_from_db()
        return local_cluster.status == ClusterStatus.ONLINE

    wait_until(online, timeout=10, message="the cluster marked online again")
    assert _answers(local_cluster)
    assert {"degraded", "recovered"} <= set(local_cluster.events.values_list("kind", flat=True))


def _age(cluster: Cluster, hours: int = 1) -> None:
    """Pretend nothing has happened to the cluster's row for a while."""
    Cluster.objects.filter(pk=cluster.pk).update(updated_at=timezone.now() - dt.timedelta(hours=hours))


def test_reconcile_does_not_fail_a_retry_that_was_just_queued(owner, transactional_db):
    cluster = services.create_cluster(owner, name="db-old-error", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.ERROR, error_message="initdb failed")
    _age(cluster)
    cluster.refresh_from_db()

    services.retry_cluster(cluster, enqueue=False)

    assert reconciler.reconcile() == []
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.CREATING


def test_reconcile_does_not_fail_an_action_that_was_just_requested(owner, transactional_db, redis_server):
    cluster = services.create_cluster(owner, name="db-old-online", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    # A row only: reconcile() must not even look for its server while it is stopping.
    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.ONLINE, online_since=timezone.now())
    _age(cluster)
    cluster.refresh_from_db()
    # The queued task is harmless if a worker ever runs it: the row is gone by then.
    services.request_action(cluster, "stop")
    assert reconciler.reconcile() == []
    cluster.refresh_from_db()
    assert cluster.status != ClusterStatus.ERROR


def _from_before_the_monitor_role(cluster: Cluster, *statements: str) -> None:
    """``cluster`` as one from before the monitoring role: no stored password for it, and the
    ``statements`` (``{role}``: its name) run on its server."""
    from django.conf import settings

    from panel.clusters.engine import dbconn

    with dbconn.admin_connection(cluster) as conn:
        for statement in statements:
            conn.execute(statement.format(role=settings.PANEL_MONITOR_ROLE))
    Cluster.objects.filter(pk=cluster.pk).update(monitor_password_encrypted="")


def test_reconcile_gives_a_cluster_from_before_the_monitor_role_a_clean_one(local_cluster):
    import psycopg
    from django.conf import settings

    from panel.clusters.engine import dbconn
    from panel.insights import services as insights
    from panel.insights.engine import collector

    cluster = local_cluster
    role = settings.PANEL_MONITOR_ROLE
    # A role of that name in a state nobody should trust (made by whoever could, a member, a
    # setting, a known password).
    _from_before_the_monitor_role(
        cluster,
        "ALTER ROLE {role} CREATEDB PASSWORD 'known-password-1'",
        "ALTER ROLE {role} SET search_path = public",
        "GRANT {role} TO doadmin",
        "GRANT pg_read_server_files TO {role}",
    )
    cluster.refresh_from_db()
    before = collector.collect(insights.target_for(cluster))
    assert before.up["postgres"] is False and "not set up" in before.errors["postgres"]

    assert reconciler.reconcile() == [f"{cluster.name}: monitoring role created"]

    cluster.refresh_from_db()
    assert cluster.monitor_password_encrypted
    assert cluster.events.filter(kind="monitor-role").count() == 1
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT rolcreatedb, rolconfig FROM pg_catalog.pg_roles WHERE rolname = %s", [role]
        ).fetchone()
        memberships = conn.execute(
            "SELECT pg_get_userbyid(roleid), pg_get_userbyid(member) FROM pg_auth_members "
            "WHERE member = %s::regrole OR roleid = %s::regrole",
            [role, role],
        ).fetchall()
    assert row == (False, None)
    assert memberships == [("pg_monitor", role)]
    # Over the socket, where the monitor logs in (no TCP line lets a panel role in at all).
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            host=str(cluster.socket_dir),
            port=cluster.port,
            user=role,
            password="known-password-1",
            dbname="postgres",
        ).close()
    after = collector.collect(insights.target_for(cluster))
    assert after.up["postgres"] is True, after.errors
    assert reconciler.reconcile() == []  # once


def test_reconcile_creates_a_missing_monitor_role(local_cluster):
    from panel.insights import services as insights
    from panel.insights.engine import collector

    cluster = local_cluster
    _from_before_the_monitor_role(
        cluster, "REVOKE CONNECT ON DATABASE postgres FROM {role}", "DROP ROLE {role}"
    )

    assert reconciler.reconcile() == [f"{cluster.name}: monitoring role created"]

    cluster.refresh_from_db()
    snap = collector.collect(insights.target_for(cluster))
    assert snap.up["postgres"] is True, snap.errors
    assert ("seq_scan", "db=defaultdb") in {(name, labels) for _s, name, labels, _v in snap.counters}


def test_one_collection_marks_a_killed_postmaster_degraded_and_the_reconciler_brings_it_back(local_cluster):
    from panel.insights import services as insights

    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    _sigkill_postmaster(local_cluster)

    insights.collect_all()  # what the beat runs every PANEL_METRICS_INTERVAL

    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.DEGRADED
    event = local_cluster.events.order_by("-created_at", "-id").first()
    assert event is not None and event.kind == "postmaster-gone"
    assert postgres.postmaster_pid(local_cluster.pgdata) is None  # the collector only records it

    assert reconciler.reconcile() == [f"{local_cluster.name}: restarted"]
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    assert _answers(local_cluster)
    # Healthy again: the next collection leaves it online.
    insights.collect_all()
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
