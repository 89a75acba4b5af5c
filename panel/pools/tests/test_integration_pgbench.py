"""The refused-connection story with real pgbench, and online changes under load."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from panel.pools import services

pytestmark = pytest.mark.integration

PGBENCH = shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    """A 1 GB-plan cluster (25 max_connections, 22 for pools) with pgbench's tables in defaultdb."""
    yield from with_pgbench_tables(shared_local_cluster)


def with_pgbench_tables(cluster: Cluster) -> Iterator[Cluster]:
    """The body of a fixture: pgbench's tables (scale 1) in defaultdb, PgBouncer stopped after."""
    pgbench(cluster, ["-i", "-s", "1", "-q"], port=int(cluster.port or 0), dbname="defaultdb")
    yield cluster
    services.stop_pgbouncer(cluster)


def pgbench_command(
    cluster: Cluster, args: list[str], *, port: int, dbname: str
) -> tuple[list[str], dict[str, str]]:
    details = cluster_services.connection_details(cluster)
    env = dict(os.environ, PGPASSWORD=details.password, PGSSLMODE="require", PGCONNECT_TIMEOUT="10")
    command = [PGBENCH, "-h", "127.0.0.1", "-p", str(port), "-U", details.user, *args, dbname]
    return command, env


def pgbench(cluster: Cluster, args: list[str], *, port: int, dbname: str) -> subprocess.CompletedProcess[str]:
    command, env = pgbench_command(cluster, args, port=port, dbname=dbname)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def assert_clean_run(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr[-2000:]
    assert "number of failed transactions: 0 (0.000%)" in result.stdout, result.stdout
    assert "aborted" not in result.stdout + result.stderr
    assert "number of clients: 40" in result.stdout


def test_40_clients_are_refused_direct_but_run_through_a_transaction_pool_of_22(cluster: Cluster) -> None:
    # One thread: with -j 2, pgbench 15 sometimes dies of SIGSEGV instead of exiting 1 when the
    # second thread's connections are refused while the first aborts.
    direct = pgbench(
        cluster, ["-c", "40", "-j", "1", "-T", "3"], port=int(cluster.port or 0), dbname="defaultdb"
    )
    assert direct.returncode == 1, direct.stderr[-2000:]
    assert "tps =" not in direct.stdout
    assert "remaining connection slots are reserved" in direct.stderr

    pool = services.create_pool(cluster, "test-pool", "defaultdb", "", "transaction", 22)
    pooled = pgbench(
        cluster, ["-c", "40", "-j", "2", "-T", "3"], port=int(cluster.pooler_port or 0), dbname=pool.name
    )
    assert_clean_run(pooled)
    assert services.pool_budget(cluster) == (22, 22)


def test_creating_and_resizing_pools_under_load_aborts_no_client(cluster: Cluster) -> None:
    pool = services.create_pool(cluster, "load", "defaultdb", "", "transaction", 14)
    command, env = pgbench_command(
        cluster, ["-c", "40", "-j", "2", "-T", "4"], port=int(cluster.pooler_port or 0), dbname=pool.name
    )
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        saturated = services.pool_stats(cluster)
        assert (
            saturated is not None
            and saturated["load"].clients_active + saturated["load"].clients_waiting == 40
        )
        other = services.create_pool(cluster, "other", "defaultdb", "", "session", 2)
        services.update_pool(other, "defaultdb", "", "transaction", 4)
        services.create_pool(cluster, "third.pool", "defaultdb", "doadmin", "statement", 1)
        services.update_pool(pool, "defaultdb", "", "transaction", 12)
        services.delete_pool(other)
        stdout, stderr = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert_clean_run(subprocess.CompletedProcess(command, run.returncode, stdout, stderr))
    assert [p.size for p in cluster.pools.order_by("name")] == [12, 1]


def test_idle_servers_a_full_pool_keeps_are_released_for_direct_clients(cluster: Cluster) -> None:
    services.create_pool(cluster, "full-pool", "defaultdb", None, "transaction", 22)
    busy = pgbench(
        cluster,
        ["-c", "30", "-j", "1", "-T", "2", "-S"],
        port=int(cluster.pooler_port or 0),
        dbname="full-pool",
    )
    assert busy.returncode == 0, busy.stderr[-2000:]
    # PgBouncer keeps the 22 server connections idle (server_idle_timeout): no slot is left.
    details = cluster_services.connection_details(cluster)
    with pytest.raises(psycopg.OperationalError, match="remaining connection slots are reserved"):
        psycopg.connect(details.uri(), connect_timeout=5)

    assert services.release_idle_servers(cluster) == 22
    with psycopg.connect(details.uri(), connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    # The pool itself still serves: servers reopen on demand.
    pooled = pgbench(
        cluster,
        ["-c", "5", "-j", "1", "-T", "1", "-S"],
        port=int(cluster.pooler_port or 0),
        dbname="full-pool",
    )
    assert pooled.returncode == 0, pooled.stderr[-2000:]
    assert services.release_idle_servers(cluster) >= 1
    assert services.release_idle_servers(cluster) == 0
