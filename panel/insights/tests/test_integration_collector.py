"""The collector against real PostgreSQL, PgBouncer and pgbench: rates, states, pools, faults."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from panel.clusters import services as cluster_services
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import superuser_in
from panel.insights import services
from panel.insights.engine import collector
from panel.insights.models import CounterState, MetricPoint
from panel.pools import services as pool_services
from panel.pools.tests.test_integration_pgbench import pgbench, pgbench_command
from tests.fixtures.clusters import make_local_cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    """One server for the module (a test that stops it has it started again after it)."""
    cluster = shared_local_cluster
    pgbench(cluster, ["-i", "-s", "1", "-q"], port=int(cluster.port or 0), dbname="defaultdb")
    yield cluster
    pool_services.stop_pgbouncer(cluster)


def values(cluster: Cluster, metric: str, labels: str | None = None) -> list[float | None]:
    rows = MetricPoint.objects.filter(cluster=cluster, metric=metric)
    if labels is not None:
        rows = rows.filter(labels=labels)
    return list(rows.order_by("ts").values_list("value", flat=True))


def test_load_between_two_collections_shows_tps_states_and_host_figures(cluster: Cluster) -> None:
    first = services.collect_cluster(cluster)
    assert first.up == {"postgres": True, "host": True}, first.errors
    command, env = pgbench_command(
        cluster, ["-c", "4", "-T", "3"], port=int(cluster.port or 0), dbname="defaultdb"
    )
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        during = services.collect_cluster(cluster)  # connections while pgbench holds them
        run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0
    services.collect_cluster(cluster)

    tps = [v for v in values(cluster, "tps", "db=defaultdb") if v is not None]
    assert tps and max(tps) > 10
    assert all(v >= 0 for v in tps)
    hit = [v for v in values(cluster, "cache_hit_percent", "db=defaultdb") if v is not None]
    assert hit and all(0 <= v <= 100 for v in hit)
    assert [v for v in values(cluster, "tup_updated_ps", "db=defaultdb") if v]
    # pgbench's pgbench_accounts is read by primary key: index scans.
    assert [v for v in values(cluster, "idx_scan_ps", "db=defaultdb") if v]

    gauges = {(m, labels): v for m, labels, v in during.gauges}
    states = {labels: v for (m, labels), v in gauges.items() if m == "conn_state"}
    assert set(states) == {"state=active", "state=idle", "state=idle_in_transaction", "state=waiting_lock"}
    assert sum(states.values()) >= 4  # pgbench's clients (some may wait on a row lock)
    assert gauges[("conn_user", "user=doadmin")] >= 4
    assert ("conn_user", "user=pgpanel") not in gauges  # the collector does not count itself
    assert gauges[("conn_db", "db=defaultdb")] >= 4
    assert gauges[("max_connections", "")] == 25
    assert gauges[("db_size_bytes", "db=defaultdb")] > 10_000_000
    assert gauges[("disk_used_bytes", "")] > gauges[("db_size_bytes", "db=defaultdb")]
    assert 0 < gauges[("disk_percent", "")] <= 100
    assert gauges[("memory_bytes", "")] > 0
    cpu = [v for v in values(cluster, "cpu_percent") if v is not None]
    assert cpu and all(0 <= v <= 100 for v in cpu) and max(cpu) > 0
    # One collection costs little database time: a tenth of a second on a quiet machine, half a
    # second seen while pgbench and the suite's other sessions load both cores; well under the
    # collection's period either way.
    assert during.query_seconds < 2.0

    latest = services.latest(cluster)
    assert not latest.stale and latest.get("max_connections") == 25


def test_a_saturated_small_pool_shows_waiting_clients(cluster: Cluster) -> None:
    pool = pool_services.create_pool(cluster, "test-pool", "defaultdb", "", "transaction", 2)
    services.collect_cluster(cluster)
    command, env = pgbench_command(
        cluster, ["-c", "10", "-j", "2", "-T", "4"], port=int(cluster.pooler_port or 0), dbname=pool.name
    )
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = 0.0
        deadline = time.monotonic() + 3.5
        while waiting <= 0 and time.monotonic() < deadline:
            time.sleep(0.5)
            snap = services.collect_cluster(cluster)
            assert snap.up.get("pgbouncer"), snap.errors
            waiting = {(m, lab): v for m, lab, v in snap.gauges}[("pool_cl_waiting", "pool=test-pool")]
        run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert waiting > 0
    services.collect_cluster(cluster)
    assert values(cluster, "pool_size", "pool=test-pool")[-1] == 2
    xact = [v for v in values(cluster, "pool_xact_ps", "pool=test-pool") if v is not None]
    assert xact and max(xact) > 0 and min(xact) >= 0
    assert all(v is None or v >= 0 for v in values(cluster, "pool_wait_ps", "pool=test-pool"))


def test_a_restart_or_stats_reset_starts_a_new_series_not_a_negative_rate(cluster: Cluster) -> None:
    pgbench(cluster, ["-c", "2", "-T", "1"], port=int(cluster.port or 0), dbname="defaultdb")
    services.collect_cluster(cluster)
    pgbench(cluster, ["-c", "2", "-T", "1"], port=int(cluster.port or 0), dbname="defaultdb")
    services.collect_cluster(cluster)
    assert [v for v in values(cluster, "tps", "db=defaultdb") if v]

    cluster_services.perform_action(cluster, "restart")
    cluster.refresh_from_db()
    services.collect_cluster(cluster)  # the postmaster's start time changed: every rate restarts
    assert values(cluster, "tps", "db=defaultdb")[-1] is None
    services.collect_cluster(cluster)

    with superuser_in(cluster, "defaultdb") as conn:
        conn.execute("SELECT pg_stat_reset()")  # the counters go backwards
    services.collect_cluster(cluster)
    assert values(cluster, "tup_fetched_ps", "db=defaultdb")[-1] is None
    services.collect_cluster(cluster)

    rates = MetricPoint.objects.filter(cluster=cluster, metric__endswith="_ps") | MetricPoint.objects.filter(
        cluster=cluster, metric="tps"
    )
    assert not rates.filter(value__lt=0).exists()
    assert values(cluster, "tps", "db=defaultdb")[-1] is not None


def test_a_stopped_cluster_leaves_a_gap_and_others_are_still_collected(cluster: Cluster, owner: User) -> None:
    other = make_local_cluster(owner, name="db-other")
    try:
        services.collect_all()
        assert values(cluster, "conn_total")[-1] is not None
        # Stopped behind the panel's back: the row still says online.
        postgres.stop(cluster.version, cluster.pgdata, user=isolation.os_user(cluster), timeout=30)
        snaps = services.collect_all()
        assert snaps[str(cluster.pk)].up["postgres"] is False
        assert snaps[str(other.pk)].up["postgres"] is True
        assert values(cluster, "up", "source=postgres")[-1] == 0
        assert values(cluster, "conn_total")[-1] is None  # a gap, not a zero
        assert not CounterState.objects.filter(cluster=cluster, source="postgres").exists()
        assert values(other, "conn_total")[-1] is not None
    finally:
        cluster_services.delete_cluster(other, confirm_name=other.name)


def test_a_hung_cluster_is_given_up_within_the_budget(cluster: Cluster, owner: User) -> None:
    other = make_local_cluster(owner, name="db-other")
    pid = postgres.postmaster_pid(cluster.pgdata)
    assert pid is not None
    try:
        services.collect_all()
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        snap = collector.collect(services.target_for(cluster))
        alone = time.monotonic() - started
        assert snap.up["postgres"] is False
        assert alone < collector.BUDGET_SECONDS + 1

        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        snaps = services.collect_all()
        cycle = time.monotonic() - started
        assert snaps[str(cluster.pk)].up["postgres"] is False
        assert snaps[str(other.pk)].up["postgres"] is True
        assert cycle < services.ABANDON_AFTER + 1.5
        assert values(cluster, "up", "source=postgres")[-1] == 0
    finally:
        os.kill(pid, signal.SIGCONT)
        cluster_services.delete_cluster(other, confirm_name=other.name)


def test_the_watchdog_breaks_a_query_the_server_never_answers(cluster: Cluster) -> None:
    with dbconn.admin_connection(cluster) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        os.kill(backend, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(collector.CollectTimeout), collector.watchdog(conn, collector.Deadline(1.0)):
                conn.execute("SELECT 1")
            # Without the watchdog the query waits for good; with it, its 1 s deadline and what
            # a loaded machine adds.
            assert time.monotonic() - started < 5
        finally:
            os.kill(backend, signal.SIGCONT)
