"""Integration: one db-s-1vcpu-2gb cluster changes its member count 1 → 3 → 2 → 1 (tests in
order, one cluster for the module). The standbys added after a backup are restored from the
pgBackRest repository; after a switchover a backup runs (archiving and backups follow the
primary) and a fork of it works; back to one member it is the reconciler's one postmaster on the
cluster's port again, every row kept. The refusals change nothing."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from panel.backups.models import JobStatus
from panel.backups.services import archiving, backups, restore
from panel.clusters import services
from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import Cluster, ClusterStatus, MemberRole
from panel.clusters.services import resize
from panel.clusters.standbys.engine import haproxy, patroni
from panel.clusters.standbys.services import ha, switchover
from panel.clusters.tests.conftest import connect_as_client, make_cluster_row
from panel.clusters.tests.test_ha_rolling import tls_params
from panel.core.errors import ServiceError
from panel.pools import services as pool_services
from tests.fixtures.clusters import module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

PLAN = "db-s-1vcpu-2gb"
T = TypeVar("T")


@pytest.fixture(scope="module")
def made(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    try:
        with module_cluster(django_db_blocker, "mc-owner", "db-members", plan=PLAN) as cluster:
            yield cluster
    finally:
        # A test that failed with members running: its rows were rolled back, so the deletion
        # did not know of them (it kills every process of the cluster's user; etcd is the runner's).
        patroni.stop_etcd(ha.etcd_data_dir())


@pytest.fixture
def cluster(made: Cluster) -> Cluster:
    made.refresh_from_db()
    return made


def count(cluster: Cluster) -> int:
    return retried(lambda conn: conn.execute("SELECT count(*) FROM kept").fetchone()[0], cluster)


def insert(cluster: Cluster, first: int, last: int) -> None:
    def statement(conn: psycopg.Connection) -> None:
        conn.execute("INSERT INTO kept SELECT generate_series(%s::int, %s::int)", [first, last])
        conn.commit()

    retried(statement, cluster)


def retried(work: Callable[[psycopg.Connection], T], cluster: Cluster) -> T:
    """``work`` on a connection through the cluster's port, tried again while connecting fails:
    after a switchover HAProxy finds the new primary within its next health checks (a second
    apart), and a connection opened in the instant of HAProxy's reload can be cut (docs)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            with connect_as_client(cluster) as conn:
                return work(conn)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def through_the_pool(cluster: Cluster) -> int:
    """The rows counted through the cluster's PgBouncer (repointed at each change)."""
    with psycopg.connect(**pool_params(cluster)) as conn:  # type: ignore[arg-type]
        return conn.execute("SELECT count(*) FROM kept").fetchone()[0]


def pool_params(cluster: Cluster) -> dict[str, object]:
    return tls_params(cluster, "mc-pool", cluster.pooler_port, connect_timeout=5)


@dataclass
class Writer:
    """Inserts through the pool, one row per transaction, until stopped: what each change costs
    a client of the pools."""

    params: dict[str, object]
    acked: int = 0
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with psycopg.connect(**self.params) as conn:  # type: ignore[arg-type]
            while not self.stop.is_set():
                try:
                    conn.execute("INSERT INTO written VALUES (1)")
                    self.acked += 1
                except psycopg.Error as exc:
                    self.failed.append(str(exc))
                    return


def strict(cluster: Cluster) -> bool:
    status, text = patroni.rest("GET", cluster.members.first().rest_port, "/config")
    assert status == 200, text
    return bool(json.loads(text)["synchronous_mode_strict"])


def _tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.is_file() else "(no log)"


def change(cluster: Cluster, num_nodes: int) -> Cluster:
    changed = resize.resize_cluster(cluster, cluster.plan_slug, num_nodes=num_nodes, enqueue=False)
    assert changed.status == ClusterStatus.ONLINE and not changed.error_message, (
        changed.error_message,
        ha.read_statuses(changed),
        {m.name: _tail(ha.member_log_path(changed, m)) for m in changed.members.all()},
    )
    assert changed.num_nodes == num_nodes
    return changed


def fresh_table(cluster: Cluster) -> None:
    with connect_as_client(cluster) as conn:
        conn.execute("DROP TABLE IF EXISTS kept")
        conn.execute("CREATE TABLE kept (i int)")
        conn.commit()
    insert(cluster, 1, 100)


def test_refusals_change_nothing(cluster: Cluster, owner: object) -> None:
    fresh_table(cluster)
    pid = postgres.postmaster_pid(cluster.pgdata)
    small = make_cluster_row(
        owner, name="db-small", plan_slug="db-s-1vcpu-1gb", port=26950, pooler_port=26951
    )
    stopped = make_cluster_row(
        owner, name="db-stopped", status=ClusterStatus.STOPPED, port=26952, pooler_port=26953
    )
    cases = [
        (cluster, {"num_nodes": 4}, "cluster.num_nodes_range"),
        (cluster, {"num_nodes": 0}, "cluster.num_nodes_range"),
        (cluster, {"num_nodes": 2, "plan_slug": "db-s-2vcpu-4gb"}, "resize.one_change_at_a_time"),
        (small, {"num_nodes": 2}, "cluster.standbys_need_larger_plan"),
        (stopped, {"num_nodes": 2}, "resize.not_online"),
    ]
    for target, kwargs, code in cases:
        plan = kwargs.pop("plan_slug", target.plan_slug)
        with pytest.raises(ServiceError) as refused:
            resize.resize_cluster(target, plan, enqueue=False, **kwargs)
        assert refused.value.code == code and refused.value.field == "num_nodes", refused.value.message
    with pytest.raises(CommandError, match=r"A cluster has 1 to 3 nodes.*\(--num-nodes\)"):
        call_command("cluster", "resize", cluster.name, "--num-nodes", "4", "--owner", "mc-owner")
    # A node without room for two more members of the plan.
    node = cluster.node
    ram = node.ram_bytes
    node.ram_bytes = cluster.plan.ram_bytes * 2
    node.save(update_fields=["ram_bytes"])
    try:
        with pytest.raises(ServiceError) as refused:
            resize.resize_cluster(cluster, PLAN, num_nodes=3, enqueue=False)
        assert refused.value.code == "node.full" and refused.value.field == "num_nodes"
        assert "RAM: the plan needs 2 GB, 0.0 GB of 4.0 GB are free" in refused.value.message
    finally:
        node.ram_bytes = ram
        node.save(update_fields=["ram_bytes"])
    cluster.refresh_from_db()
    assert (cluster.status, cluster.num_nodes, cluster.members.count()) == (ClusterStatus.ONLINE, 1, 0)
    assert postgres.postmaster_pid(cluster.pgdata) == pid and count(cluster) == 100


def test_one_to_three_to_two_to_one(cluster: Cluster) -> None:
    """The rows of a test are rolled back after it, the processes stay: one test for the whole
    way, a step per function."""
    cluster = one_to_three_restores_the_standbys_from_the_repository(cluster)
    cluster = three_to_two_removes_a_standby_and_is_no_longer_strict(cluster)
    after_a_switchover_backups_follow_the_primary_and_fork(cluster)
    two_to_one_hands_the_server_back_to_the_reconciler(cluster)


def one_to_three_restores_the_standbys_from_the_repository(cluster: Cluster) -> Cluster:
    fresh_table(cluster)
    if not cluster.pools.filter(name="mc-pool").exists():
        pool_services.create_pool(cluster, "mc-pool", "defaultdb", None, "transaction", 3)
    job = backups.create_backup(cluster, "full")
    assert job.status == JobStatus.SUCCEEDED
    insert(cluster, 101, 200)  # after the backup: from the archive or by streaming
    cluster = change(cluster, 3)
    assert ha.wait_healthy(cluster, 60)
    assert sorted(cluster.members.values_list("name", flat=True)) == ["member-1", "member-2", "member-3"]
    assert cluster.members.get(role=MemberRole.PRIMARY).name == "member-1"
    for member in cluster.members.exclude(name="member-1"):
        label = (member.pgdata / "backup_label.old").read_text()
        assert "pgBackRest" in label, label  # pg_basebackup's says "pg_basebackup base backup"
        log = ha.member_log_path(cluster, member).read_text()
        assert "replica has been created using pgbackrest" in log
        with dbconn.admin_connection(cluster, port=member.port) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    assert strict(cluster)
    assert cluster.standby_port  # reads from a standby, as a cluster created with standbys has
    # The cluster's port is HAProxy's now, on the primary; the data is all there.
    assert postgres.postmaster_pid(cluster.pgdata) is not None
    insert(cluster, 201, 300)
    assert count(cluster) == 300 and through_the_pool(cluster) == 300
    kinds = list(cluster.events.values_list("kind", flat=True))
    assert kinds.count("member-added") == 2 and "members-changed" in kinds
    return cluster


def three_to_two_removes_a_standby_and_is_no_longer_strict(cluster: Cluster) -> Cluster:
    removed = cluster.members.get(name="member-3")
    out = io.StringIO()
    retried(lambda conn: conn.execute("CREATE TABLE written (i int)"), cluster)
    writer = Writer(pool_params(cluster))
    thread = threading.Thread(target=writer.run, daemon=True)
    thread.start()
    try:
        # The command line's way (the same service, in the foreground).
        call_command("cluster", "resize", cluster.name, "--num-nodes", "2", "--owner", "mc-owner", stdout=out)
        before = writer.acked
        deadline = time.monotonic() + 10
        while writer.acked == before and time.monotonic() < deadline and not writer.failed:
            time.sleep(0.1)
    finally:
        writer.stop.set()
        thread.join(10)
    # A standby less costs the pools' clients nothing: no transaction failed, and they write on.
    assert not writer.failed and writer.acked > before, (writer.failed, before, writer.acked)
    assert "online on db-s-1vcpu-2gb" in out.getvalue() and "2 node(s)" in out.getvalue()
    cluster.refresh_from_db()
    assert cluster.num_nodes == 2
    assert sorted(cluster.members.values_list("name", flat=True)) == ["member-1", "member-2"]
    assert not removed.pgdata.exists() and not ha.member_config_path(cluster, removed).exists()
    assert patroni.member_pid(ha.member_config_path(cluster, removed)) is None
    assert ha.wait_healthy(cluster, 60)
    assert not strict(cluster)
    assert [s.name for s in ha.read_statuses(cluster)] == ["member-1", "member-2"]
    insert(cluster, 301, 400)
    assert count(cluster) == 400 and through_the_pool(cluster) == 400
    return cluster


def after_a_switchover_backups_follow_the_primary_and_fork(cluster: Cluster) -> None:
    assert switchover.switchover(cluster, "member-2") == "member-2"
    insert(cluster, 401, 500)
    job = backups.create_backup(cluster, "incr")
    assert job.status == JobStatus.SUCCEEDED, job.error_message
    assert archiving.archive_status(cluster).failed_count == 0
    fork = restore.restore_cluster(cluster, cluster.owner, name="db-members-fork", target_time=None)
    try:
        assert fork.status == ClusterStatus.ONLINE
        assert count(fork) == 500
    finally:
        services.delete_cluster(Cluster.objects.get(pk=fork.pk), confirm_name=fork.name)


def two_to_one_hands_the_server_back_to_the_reconciler(cluster: Cluster) -> None:
    configs = [ha.member_config_path(cluster, m) for m in cluster.members.all()]
    cluster = change(cluster, 1)
    assert cluster.members.count() == 0 and not cluster.is_ha and cluster.standby_port is None
    assert all(patroni.member_pid(config) is None for config in configs)
    assert haproxy.pid(ha.haproxy_config_path(cluster)) is None
    assert not Path(ha.ha_dir(cluster)).exists()
    assert postgres.postmaster_pid(cluster.pgdata) is not None
    with dbconn.admin_connection(cluster) as conn:
        assert conn.execute("SHOW port").fetchone() == (str(cluster.port),)
        assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
    assert count(cluster) == 500  # everything, the rows written on member-2 included
    insert(cluster, 501, 600)
    assert through_the_pool(cluster) == 600
    assert archiving.archive_status(cluster).active
    kinds = list(cluster.events.values_list("kind", flat=True))
    assert kinds.count("member-removed") == 2
    took = [e.message for e in cluster.events.filter(kind="members-changed").order_by("pk")]
    print("\n".join(took))  # the figures in docs/ha-figures.md
