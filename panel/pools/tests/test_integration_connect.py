"""Clients reach a real PostgreSQL through the panel's PgBouncer with TLS and SCRAM."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.pools import services
from panel.pools.models import Pooler, PoolerStatus

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    """A running 1 GB-plan cluster (22 connections for pools); its PgBouncer is stopped afterwards."""
    yield shared_local_cluster
    services.stop_pgbouncer(shared_local_cluster)


def query(uri: str) -> tuple[str, str, bool]:
    with psycopg.connect(uri, connect_timeout=5) as conn:
        row = conn.execute("SELECT current_user, current_database()").fetchone()
        assert row is not None
        return row[0], row[1], conn.pgconn.ssl_in_use


def test_a_new_pool_serves_through_the_uri_the_page_shows(cluster: Cluster) -> None:
    pool = services.create_pool(cluster, "test-pool", "defaultdb", None, "transaction", 10)
    uri = services.pool_connection_details(pool).uri()
    assert f":{cluster.pooler_port}/test-pool?sslmode=require" in uri
    assert query(uri) == ("doadmin", "defaultdb", True)
    assert services.pool_budget(cluster) == (10, 22)
    assert Pooler.objects.get(cluster=cluster).status == PoolerStatus.RUNNING

    stats = services.pool_stats(cluster)
    assert stats is not None and set(stats) == {"test-pool"}
    assert stats["test-pool"].servers_idle + stats["test-pool"].servers_active >= 1
    assert not stats["test-pool"].saturated

    # Without TLS the pooler refuses, as the managed service does.
    details = services.pool_connection_details(pool)
    with pytest.raises(psycopg.OperationalError, match="SSL required"):
        psycopg.connect(uri.replace("sslmode=require", "sslmode=disable"), connect_timeout=5)
    with pytest.raises(psycopg.OperationalError, match="SASL authentication failed|password authentication"):
        psycopg.connect(uri.replace(details.password, "wrong-password"), connect_timeout=5)


def test_an_inbound_pool_serves_two_users_and_follows_password_changes(cluster: Cluster) -> None:
    pool = services.create_pool(cluster, "inbound", "defaultdb", "", "session", 4)
    roles.add_user(cluster, "app2")
    assert services.reapply_config(cluster) is None

    assert query(services.pool_connection_details(pool).uri())[0] == "doadmin"
    assert query(services.pool_connection_details(pool, "app2").uri())[0] == "app2"

    old_uri = services.pool_connection_details(pool, "app2").uri()
    roles.reset_password(cluster, "app2")
    assert services.reapply_config(cluster) is None
    assert query(services.pool_connection_details(pool, "app2").uri())[0] == "app2"
    with pytest.raises(psycopg.OperationalError):
        query(old_uri)


def test_a_fixed_user_pool_logs_in_as_its_user(cluster: Cluster) -> None:
    roles.add_user(cluster, "reporter")
    roles.add_database(cluster, "reports")
    pool = services.create_pool(cluster, "reports.ro", "reports", "reporter", "transaction", 3)
    details = services.pool_connection_details(pool)
    assert details.user == "reporter"
    assert query(details.uri()) == ("reporter", "reports", True)

    # An update is a full replacement, applied online: back to the inbound user, another database.
    pool = services.update_pool(pool, "defaultdb", "", "session", 5)
    assert (pool.database, pool.user, pool.mode, pool.size) == ("defaultdb", "", "session", 5)
    assert query(services.pool_connection_details(pool).uri()) == ("doadmin", "defaultdb", True)

    # And from the inbound user to the very user that logged in through it: PgBouncer 1.18 crashed
    # at the next login after that RELOAD ("put_in_order: found existing elem").
    pool = services.update_pool(pool, "defaultdb", "doadmin", "transaction", 3)
    assert query(services.pool_connection_details(pool).uri()) == ("doadmin", "defaultdb", True)
    pool = services.update_pool(pool, "reports", "reporter", "transaction", 3)
    assert query(services.pool_connection_details(pool).uri()) == ("reporter", "reports", True)
    assert services.pooler_running(cluster)


def test_deleting_the_last_pool_stops_pgbouncer_and_counts_its_clients(cluster: Cluster) -> None:
    pool = services.create_pool(cluster, "test-pool", "defaultdb", "", "session", 2)
    with psycopg.connect(services.pool_connection_details(pool).uri(), connect_timeout=5) as conn:
        conn.execute("SELECT 1")
        assert services.connected_clients(pool) == 1
        assert services.delete_pool(pool) == 1
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    assert not services.pooler_running(cluster)
    assert services.pool_stats(cluster) is None
    assert services.pool_budget(cluster) == (0, 22)
    assert cluster.events.filter(kind="pool-deleted", message__contains="1 connected").exists()
