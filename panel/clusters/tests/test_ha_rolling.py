"""Integration: a resize of a three-member cluster rolls member by member (standbys first, a
switchover with the pools paused, the old primary last) under a writer committing through a
transaction pool: no transaction fails, every acknowledged commit is kept, and every member runs
with the new plan's max_connections."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
import pytest

from panel.clusters import services
from panel.clusters.engine import cgroups, dbconn, isolation
from panel.clusters.lib.plans import get_plan
from panel.clusters.models import Cluster, ClusterStatus, MemberRole
from panel.clusters.services import resize
from panel.clusters.standbys.services import ha
from panel.pools import services as pool_services
from tests.fixtures.clusters import module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

RECOVERY_TIMEOUT = 90
NEW_PLAN = "db-s-2vcpu-4gb"


@pytest.fixture(scope="module")
def ha_cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    """One three-member db-s-1vcpu-2gb cluster for the module, with a transaction pool."""
    with writable_ha_cluster(django_db_blocker, "roll-owner", "db-roll") as cluster:
        yield cluster


@contextlib.contextmanager
def writable_ha_cluster(django_db_blocker: object, username: str, name: str) -> Iterator[Cluster]:
    """A three-member db-s-1vcpu-2gb cluster for a module, with a transaction pool ``writes``
    (on defaultdb) and there the table ``acked`` that a ``Writer`` fills."""
    with (
        module_cluster(django_db_blocker, username, name, "db-s-1vcpu-2gb", num_nodes=3) as cluster,
        django_db_blocker.unblock(),  # type: ignore[attr-defined]
    ):
        pool_services.create_pool(cluster, "writes", "defaultdb", None, "transaction", 5)
        with psycopg.connect(**tls_params(cluster, "writes", cluster.pooler_port)) as conn:
            conn.execute("CREATE TABLE acked (id bigint PRIMARY KEY)")
        yield cluster


def tls_params(
    cluster: Cluster, dbname: str, port: int | None, connect_timeout: int = 3
) -> dict[str, object]:
    """The admin user over TCP and TLS on ``port`` (the cluster's PgBouncer, or its HAProxy)."""
    details = services.connection_details(cluster)
    return {
        "host": "127.0.0.1",
        "port": port,
        "user": details.user,
        "password": details.password,
        "dbname": dbname,
        "sslmode": "require",
        "connect_timeout": connect_timeout,
        "autocommit": True,
        "prepare_threshold": None,
    }


@dataclass
class Writer:
    """Inserts sequential ids through the pool, one per transaction, with when each was acknowledged."""

    params: dict[str, object]
    acked: list[tuple[int, float]] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self, acked: int = 50, within: float = 30) -> float:
        """Run in a thread of its own; return once ``acked`` commits are acknowledged or ``within``
        seconds passed, with that deadline."""
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + within
        while len(self.acked) < acked and time.monotonic() < deadline:
            time.sleep(0.1)
        return deadline

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def run(self) -> None:
        conn = None
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                if conn is None:
                    conn = psycopg.connect(**self.params)
                conn.execute("INSERT INTO acked VALUES (%s)", [n])
                self.acked.append((n, time.monotonic()))
            except psycopg.Error as exc:
                self.failed.append((n, str(exc)))
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()


def test_a_resize_rolls_over_the_members_without_failing_a_transaction(ha_cluster):
    assert ha.wait_healthy(ha_cluster, RECOVERY_TIMEOUT)
    ha.refresh_members(ha_cluster)
    old_primary = ha_cluster.members.get(role=MemberRole.PRIMARY).name
    writer = Writer(tls_params(ha_cluster, "writes", ha_cluster.pooler_port))
    writer.start()
    started = time.monotonic()
    try:
        cluster = resize.resize_cluster(ha_cluster, NEW_PLAN, enqueue=False)
        took = time.monotonic() - started
        after = len(writer.acked)
        while len(writer.acked) < after + 50 and time.monotonic() < started + took + 30:
            time.sleep(0.1)
    finally:
        writer.finish()
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ONLINE and cluster.plan_slug == NEW_PLAN, cluster.error_message
    assert writer.failed == [], f"transactions failed during the resize: {writer.failed[:5]}"
    times = [started] + [t for _n, t in writer.acked if t > started]
    longest = max(b - a for a, b in zip(times, times[1:], strict=False))
    print(f"\nrolling resize took {took:.1f} s; longest interruption {longest:.2f} s")
    with psycopg.connect(**writer.params) as conn:
        present = {row[0] for row in conn.execute("SELECT id FROM acked")}
    lost = [n for n, _t in writer.acked if n not in present]
    assert not lost, f"{len(lost)} acknowledged commits lost"
    # Every member runs with the new plan's connection limit; the primary moved.
    expected = str(get_plan(NEW_PLAN).max_connections)
    for member in cluster.members.order_by("name"):
        with dbconn.admin_connection(cluster, port=member.port) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == (expected,), member.name
        # …and in its own cgroup with the new plan's limits (the plan applies to each member).
        if cgroups.version() is not None:  # (a writable cgroup hierarchy here)
            group = cgroups.find(isolation.member_cgroup_name(cluster, member.name))
            assert group is not None, member.name
            assert cgroups.memory_limit(group) == get_plan(NEW_PLAN).ram_gb * 1024**3, member.name
            assert cgroups.cpu_quota(group) == float(get_plan(NEW_PLAN).vcpus), member.name
    ha.refresh_members(cluster)
    assert cluster.members.get(role=MemberRole.PRIMARY).name != old_primary
    assert sorted(cluster.members.values_list("role", flat=True)) == ["primary", "standby", "standby"]
