"""Resize: every refusal comes before anything changes; on a real cluster the task restarts
PostgreSQL on the new plan, with the data, the pools and their PgBouncer still there."""

from __future__ import annotations

import io
from collections.abc import Callable

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import translation

from panel.clusters import tasks
from panel.clusters.engine import cgroups, isolation, postgres
from panel.clusters.lib.plans import get_plan
from panel.clusters.models import Cluster, ClusterStatus, Node
from panel.clusters.services import resize
from panel.clusters.tests.conftest import connect_as_client, make_cluster_row
from panel.core.errors import ServiceError, shown_text
from panel.core.runas import EngineError
from panel.pools import services as pools
from panel.pools.models import ConnectionPool

Queued = Callable[[str], list[tuple[str, list]]]
GB = 1024**3


def refused(cluster: Cluster, slug: str) -> ServiceError:
    """The refusal, after checking that nothing changed: status, plan, events."""
    before = (cluster.status, cluster.plan_slug, cluster.events.count())
    with pytest.raises(ServiceError) as refusal:
        resize.resize_cluster(cluster, slug)
    cluster.refresh_from_db()
    assert (cluster.status, cluster.plan_slug, cluster.events.count()) == before
    assert refusal.value.field == "size"
    return refusal.value


@pytest.fixture
def row(owner: User) -> Cluster:
    """A 4 GB-plan cluster row on a node of 16 GB and 8 vCPUs, no server behind it."""
    node = Node.objects.create(
        name="n1",
        address="127.0.0.1",
        port_first=40000,
        port_last=40100,
        data_dir="/x",
        ram_bytes=16 * GB,
        vcpus=8,
    )
    return make_cluster_row(owner, node=node)


@pytest.mark.django_db
def test_an_unknown_plan_or_the_same_plan_is_refused(row: Cluster) -> None:
    assert "db-s-64vcpu-1tb" in refused(row, "db-s-64vcpu-1tb").message
    assert "already on plan db-s-2vcpu-4gb" in refused(row, "db-s-2vcpu-4gb").message


@pytest.mark.django_db
def test_an_unknown_plan_is_refused_in_the_readers_language_with_a_code(row: Cluster) -> None:
    refusal = refused(row, "db-s-64vcpu-1tb")
    assert refusal.code == "cluster.plan_unknown"
    with translation.override("de"):
        assert refusal.message.startswith("Unbekannter Plan 'db-s-64vcpu-1tb'"), refusal.message
    # Beside it: a plan that exists passes the same check.
    assert resize.check_resize(row, "db-s-4vcpu-8gb").slug == "db-s-4vcpu-8gb"


@pytest.mark.django_db
def test_a_cluster_that_is_not_online_is_refused(row: Cluster) -> None:
    for status in (ClusterStatus.STOPPED, ClusterStatus.DEGRADED, ClusterStatus.RESIZING):
        Cluster.objects.filter(pk=row.pk).update(status=status)
        row.refresh_from_db()
        assert "only while online" in refused(row, "db-s-1vcpu-2gb").message


@pytest.mark.django_db
def test_a_plan_the_node_has_no_room_for_is_refused(row: Cluster) -> None:
    # 16 GB node, this cluster's 4 GB given back: 8 GB fits, 16 GB does not once another takes 4.
    make_cluster_row(row.owner, name="neighbour", node=row.node, port=26950, plan_slug="db-s-2vcpu-4gb")
    error = refused(row, "db-s-6vcpu-16gb")
    assert "Node “n1” has no room for plan db-s-6vcpu-16gb" in error.message
    assert "12.0 GB of RAM and 6 vCPUs" in error.message
    choices = {c.plan.slug: c for c in resize.plan_choices(row)}
    assert choices["db-s-2vcpu-4gb"].current
    assert choices["db-s-4vcpu-8gb"].problem is None
    assert "no room" in (choices["db-s-6vcpu-16gb"].problem or "")


@pytest.mark.django_db
def test_pools_over_a_smaller_plans_budget_are_named_with_how_much_to_shrink(row: Cluster) -> None:
    ConnectionPool.objects.create(cluster=row, name="big", database="appdb", size=40)
    ConnectionPool.objects.create(cluster=row, name="small", database="appdb", size=20)
    error = refused(row, "db-s-1vcpu-2gb")  # 47 for pools
    assert "The pools use 60 connections (“big” (40), “small” (20))" in error.message
    assert "leaves 47 for pools: make them smaller by 13 in all" in error.message
    assert "smaller by 38" in refused(row, "db-s-1vcpu-1gb").message  # 22 for pools


def test_data_over_a_smaller_plans_disk_is_refused() -> None:
    now = resize.Circumstances("db-s-1vcpu-2gb", 12 * GB, {}, None, None, "")
    problem = resize.plan_problem(get_plan("db-s-1vcpu-1gb"), now)
    assert (
        problem == "The data takes 12.0 GB and plan db-s-1vcpu-1gb has a 10 GB disk: free some space first."
    )
    assert resize.plan_problem(get_plan("db-s-2vcpu-4gb"), now) is None


@pytest.mark.django_db
def test_a_request_marks_the_cluster_resizing_and_queues_the_task_on_its_node(
    row: Cluster, queued_tasks: Queued
) -> None:
    cluster = resize.resize_cluster(row, "db-s-4vcpu-8gb")
    assert cluster.status == ClusterStatus.RESIZING and cluster.is_busy
    assert cluster.plan_slug == "db-s-2vcpu-4gb"  # recorded by the node when it does the work
    assert queued_tasks(row.tasks_queue) == [("panel.clusters.tasks.resize", [str(row.pk), "db-s-4vcpu-8gb"])]
    assert cluster.events.filter(kind="resize-requested").exists()


@pytest.mark.django_db
def test_a_node_that_filled_up_meanwhile_leaves_the_cluster_online_on_its_plan(row: Cluster) -> None:
    Cluster.objects.filter(pk=row.pk).update(status=ClusterStatus.RESIZING)
    Node.objects.filter(pk=row.node_id).update(ram_bytes=4 * GB)
    cluster = resize.perform_resize(row.pk, "db-s-4vcpu-8gb")
    assert cluster is not None
    assert cluster.status == ClusterStatus.ONLINE and cluster.plan_slug == "db-s-2vcpu-4gb"
    assert "no room" in shown_text(cluster.error_message)


@pytest.mark.integration
def test_resize_up_restarts_on_the_new_plan_with_the_data_and_the_pools(
    local_cluster: Cluster, queued_tasks: Queued
) -> None:
    cluster = local_cluster
    with connect_as_client(cluster) as conn:
        conn.execute("CREATE TABLE kept (v text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
    pool = pools.create_pool(cluster, "app-pool", "defaultdb", None, "transaction", 20)
    try:
        pid = postgres.postmaster_pid(cluster.pgdata)
        resize.resize_cluster(cluster, "db-s-1vcpu-2gb")
        [(name, args)] = queued_tasks(cluster.tasks_queue)
        tasks.resize(*args)  # what the node's worker runs

        cluster.refresh_from_db()
        assert cluster.status == ClusterStatus.ONLINE, cluster.error_message
        assert cluster.plan_slug == "db-s-1vcpu-2gb" and cluster.error_message == ""
        assert postgres.postmaster_pid(cluster.pgdata) != pid
        with connect_as_client(cluster) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == ("50",)
            assert conn.execute("SELECT v FROM kept").fetchall() == [("still here",)]
        assert pools.pool_budget(cluster) == (20, 47)
        uri = pools.pool_connection_details(pool).uri()
        with psycopg.connect(uri, connect_timeout=5) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("defaultdb",)
        if cgroups.version() is not None:  # plan limits enforced on this machine
            group = cgroups.find(str(cluster.pk))
            assert group is not None and cgroups.memory_limit(group) == 2 * GB
        assert cluster.events.filter(kind="resized", message__contains="to db-s-1vcpu-2gb").exists()

        # The command line: refusals as messages, a resize done in the foreground.
        with pytest.raises(CommandError, match="already on plan"):
            call_command("cluster", "resize", cluster.name, "--size", "db-s-1vcpu-2gb", stdout=io.StringIO())
        out = io.StringIO()
        call_command("cluster", "resize", cluster.name, "--size", "db-s-1vcpu-1gb", stdout=out)
        assert "online on db-s-1vcpu-1gb (25 connections)" in out.getvalue()
        with connect_as_client(cluster) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == ("25",)
    finally:
        pools.stop_pgbouncer(cluster)


@pytest.mark.integration
def test_a_failed_restart_puts_the_old_plan_back_and_says_why(
    local_cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = local_cluster
    real_start = isolation.start_server
    calls: list[str] = []

    def start_fails_once(target: Cluster, user: object, timeout: float) -> None:
        # The one injected fault: the first start (on the new plan) does not come up.
        calls.append(target.plan_slug)
        if len(calls) == 1:
            raise EngineError("pg_ctl: could not start server (injected)")
        real_start(target, user, timeout)

    monkeypatch.setattr(isolation, "start_server", start_fails_once)
    cluster = resize.resize_cluster(cluster, "db-s-1vcpu-2gb", enqueue=False)
    assert calls == ["db-s-1vcpu-2gb", "db-s-1vcpu-1gb"]
    assert cluster.status == ClusterStatus.ONLINE and cluster.plan_slug == "db-s-1vcpu-1gb"
    shown = shown_text(cluster.error_message)
    assert "back on db-s-1vcpu-1gb: the panel's log holds the details for an administrator" in shown
    assert "pg_ctl" not in shown
    assert "pg_ctl: could not start server (injected)" in caplog.text  # the engine's words: the log
    with connect_as_client(cluster) as conn:
        assert conn.execute("SHOW max_connections").fetchone() == ("25",)
    assert cluster.events.filter(kind="resize-failed").exists()
