"""Issue 38: a benchmark never closes the pools' server connections; a run that does not fit the
free slots beside them is refused at launch, with the figures, and a run that fits runs."""

from __future__ import annotations

import psycopg
import pytest

from benchmarks import services
from benchmarks.lib.pgbench_command import RunOptions
from benchmarks.models import BenchmarkRun, RunStatus
from panel.clusters import services as cluster_services
from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.polling import wait_for
from panel.pools import services as pool_services
from panel.pools.engine import console
from panel.pools.engine.console import admin_console
from panel.pools.face import ServerRoom
from panel.pools.models import ConnectionPool

pytestmark = pytest.mark.integration


def run_now(
    cluster: Cluster, *, pool: ConnectionPool | None = None, clients: int, seconds: int
) -> BenchmarkRun:
    options = RunOptions(clients=clients, threads=1, duration_s=seconds)
    run = services.launch_run(cluster, pool=pool, options=options, enqueue=False)
    return services.execute_run(run.pk, wait_turn_s=30)


def server_pids(cluster: Cluster, pool: str) -> set[int]:
    """The backend pids of the pool's server connections, as PgBouncer lists them (SHOW SERVERS)."""
    with admin_console(cluster) as conn:
        columns, rows = console.show(conn, "SERVERS")
    database, pid = columns.index("database"), columns.index("remote_pid")
    return {int(row[pid]) for row in rows if row[database] == pool}


def live_backends(cluster: Cluster, pids: set[int]) -> set[int]:
    with dbconn.admin_connection(cluster) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_catalog.pg_stat_activity WHERE pid = ANY(%s)", [list(pids)]
        ).fetchall()
    return {int(row[0]) for row in rows}


def test_a_direct_run_that_fits_keeps_the_pools_idle_server_connections(cluster: Cluster) -> None:
    pool = pool_services.create_pool(cluster, "app", "defaultdb", "", "transaction", 5)
    warm = run_now(cluster, pool=pool, clients=5, seconds=2)
    assert warm.status == RunStatus.SUCCEEDED, warm.error_message
    held = server_pids(cluster, "app")
    assert len(held) == 5 and live_backends(cluster, held) == held

    direct = run_now(cluster, clients=4, seconds=2)

    assert direct.status == RunStatus.SUCCEEDED, (direct.error_message, direct.first_error)
    # The same backends, still open on the server: nothing closed them for the benchmark.
    assert server_pids(cluster, "app") == held
    assert live_backends(cluster, held) == held
    assert not any("idle server connections" in str(w) for w in direct.warning_messages)


def test_a_run_that_does_not_fit_beside_the_pools_is_refused_and_one_that_fits_runs(cluster: Cluster) -> None:
    pool = pool_services.create_pool(cluster, "app", "defaultdb", "", "transaction", 20)
    warm = run_now(cluster, pool=pool, clients=20, seconds=2)
    assert warm.status == RunStatus.SUCCEEDED, warm.error_message
    held = server_pids(cluster, "app")
    assert len(held) == 20
    runs_before = BenchmarkRun.objects.count()

    with pytest.raises(ServiceError) as refused:
        services.launch_run(cluster, options=RunOptions(clients=5, threads=1, duration_s=2), enqueue=False)

    assert refused.value.code == "run.connections_full" and refused.value.field == "clients"
    message = str(refused.value.message)
    assert "Only 2 of the server's 22 connections are free" in message, message
    assert "this run needs 5" in message and "pools hold 20" in message and "at most 2 clients" in message
    assert BenchmarkRun.objects.count() == runs_before  # nothing recorded, nothing queued
    assert server_pids(cluster, "app") == held

    fits = run_now(cluster, clients=2, seconds=2)
    assert fits.status == RunStatus.SUCCEEDED, (fits.error_message, fits.first_error)
    assert server_pids(cluster, "app") == held and live_backends(cluster, held) == held


def test_a_queued_run_is_counted_again_when_it_starts(cluster: Cluster) -> None:
    queued = services.launch_run(
        cluster, options=RunOptions(clients=10, threads=1, duration_s=2), enqueue=False
    )
    # Fifteen other clients connect between the launch and the start: 7 slots are left.
    uri = cluster_services.connection_details(cluster).uri()
    others = [psycopg.connect(uri, connect_timeout=5) for _ in range(15)]
    try:
        run = services.execute_run(queued.pk, wait_turn_s=30)
    finally:
        for conn in others:
            conn.close()
    assert run.status == RunStatus.FAILED and run.pgbench_pid is None
    assert "Only 7 of the server's 22 connections are free, and this run needs 10" in run.error_message
    assert "at most 7 clients" in run.error_message


def test_the_panels_own_session_takes_no_tenants_slot_and_a_tenants_does(cluster: Cluster) -> None:
    """A maintenance session of the panel, open (as the previous count's is while its backend still
    exits, which cost the launch after a refused one a slot in a full run), is not counted; a
    tenant's session is."""

    def settled() -> ServerRoom | None:  # the sessions of the tests before all gone
        room = pool_services.server_room(cluster)
        return room if room is not None and room.free == room.limit else None

    assert wait_for(settled, 15, interval=0.2)
    empty = settled() or pool_services.server_room(cluster)
    assert empty is not None
    with dbconn.admin_connection(cluster):
        beside_panel = pool_services.server_room(cluster)
    assert beside_panel is not None and beside_panel.free == empty.free

    with psycopg.connect(cluster_services.connection_details(cluster).uri(), connect_timeout=5):
        beside_tenant = pool_services.server_room(cluster)
    assert beside_tenant is not None and beside_tenant.free == empty.free - 1
