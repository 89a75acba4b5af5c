"""Trusted sources, replayed for real: a cluster from initdb with a real PgBouncer pool.

A rule that leaves the client's address out (10.99.0.0/16, the client on 127.0.0.1) makes
PostgreSQL refuse a TLS client on the server port ("no pg_hba.conf entry for host") and PgBouncer
refuse one on the pooler port (its HBA file: "login rejected"), and ends the sessions already open
from that address. Beside it the panel's own work goes on: a user added through the service (the
superuser and the monitor role over the Unix socket), PgBouncer's admin console, and the pool's
server logins (peer over the socket), tried by a client on PgBouncer's own socket. Adding
127.0.0.1 lets both clients in again without a restart (the postmaster's and PgBouncer's PIDs do
not change); an empty list opens the cluster to every address again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import Cluster, TrustedSource
from panel.clusters.services import firewall, roles
from panel.clusters.tests.conftest import client_params
from panel.pools import services as pool_services
from panel.pools.engine import console, disk, supervisor
from panel.pools.engine.disk import bouncer_files
from panel.pools.engine.rendering import get_pooler
from panel.pools.models import ConnectionPool
from tests.fixtures.clusters import module_cluster
from tests.security.sourced import current_user_from, pool_params

pytestmark = pytest.mark.integration

OUTSIDE = "10.99.0.0/16"  # the test's client is on 127.0.0.1: not in it


@dataclass(frozen=True)
class Firewalled:
    cluster: Cluster
    pool: ConnectionPool


@pytest.fixture(scope="module")
def firewalled(django_db_setup: None, django_db_blocker: Any) -> Iterator[Firewalled]:
    with module_cluster(django_db_blocker, "fw-tenant", "db-fw") as cluster:
        with django_db_blocker.unblock():
            pool = pool_services.create_pool(cluster, "fw-pool", "defaultdb", None, "transaction", 3)
        yield Firewalled(cluster, pool)


def server_client(cluster: Cluster, user: str = "doadmin") -> tuple[str, bool]:
    """A TLS client on the server's TCP port: who it is and whether TLS is in use."""
    with psycopg.connect(**client_params(cluster, user=user)) as conn:  # type: ignore[arg-type]
        row = conn.execute("SELECT current_user").fetchone()
        return row[0], conn.pgconn.ssl_in_use  # type: ignore[index]


def pooler_client(pool: ConnectionPool, user: str | None = None) -> tuple[str, bool]:
    """A TLS client on PgBouncer's TCP port, through the pool."""
    with psycopg.connect(pool_services.pool_connection_details(pool, user).uri(), connect_timeout=5) as conn:
        row = conn.execute("SELECT current_user").fetchone()
        return row[0], conn.pgconn.ssl_in_use  # type: ignore[index]


def pool_over_pgbouncers_socket(cluster: Cluster, pool: ConnectionPool) -> str:
    """A client on PgBouncer's Unix socket (root reaches the 0700 directory): the pool's server
    connection is PgBouncer logging in to PostgreSQL by peer authentication, which no rule touches."""
    files = bouncer_files(cluster)
    with psycopg.connect(
        host=str(files.socket_dir),
        port=files.port,
        dbname=pool.name,
        user="doadmin",
        password=cluster.users.get(name="doadmin").password,
        connect_timeout=5,
    ) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]


def pids(cluster: Cluster) -> tuple[int | None, int | None]:
    return postgres.postmaster_pid(cluster.pgdata), supervisor.running_pid(bouncer_files(cluster))


@pytest.mark.django_db
def test_a_rule_without_the_clients_address_refuses_it_at_the_server_and_the_pooler(
    firewalled: Firewalled,
) -> None:
    cluster, pool = firewalled.cluster, firewalled.pool
    # Open (no rule): both ports let the client in, over TLS.
    assert server_client(cluster) == ("doadmin", True)
    assert pooler_client(pool) == ("doadmin", True)
    before = pids(cluster)
    assert None not in before
    held = psycopg.connect(**client_params(cluster), autocommit=True)  # type: ignore[arg-type]
    try:
        assert firewall.set_trusted_sources(cluster, [OUTSIDE]) == [OUTSIDE]

        with pytest.raises(psycopg.OperationalError, match=r'no pg_hba\.conf entry for host "127\.0\.0\.1"'):
            server_client(cluster)
        with pytest.raises(psycopg.OperationalError, match="login rejected"):
            pooler_client(pool)
        # A session opened from 127.0.0.1 before the rule does not outlive it.
        with pytest.raises(psycopg.OperationalError):
            held.execute("SELECT 1")

        # The panel's own work beside it: roles through the superuser on the socket, the pooler
        # reconfigured for the new role (admin console on its socket), figures read by the
        # monitor role, and the pool's server logins.
        added = roles.add_user(cluster, "fw-app")
        assert added.name == "fw-app"
        with dbconn.monitor_connection(cluster) as conn:
            assert conn.execute("SELECT count(*) FROM pg_catalog.pg_stat_activity").fetchone()[0] >= 1  # type: ignore[index]
        stats = pool_services.pool_stats(cluster)
        assert stats is not None and "fw-pool" in stats
        assert pool_over_pgbouncers_socket(cluster, pool) == "doadmin"
        # The new role is refused from outside the rule like every other.
        with pytest.raises(psycopg.OperationalError, match="no pg_hba.conf entry"):
            server_client(cluster, "fw-app")

        # Trust 127.0.0.1 as well: both clients are let in, and nothing was restarted.
        firewall.set_trusted_sources(cluster, [OUTSIDE, "127.0.0.1"])
        assert server_client(cluster) == ("doadmin", True)
        assert server_client(cluster, "fw-app") == ("fw-app", True)
        assert pooler_client(pool) == ("doadmin", True)
        assert pooler_client(pool, "fw-app") == ("fw-app", True)
        assert pids(cluster) == before

        # Without TLS a trusted address is still refused, as before trusted sources.
        with pytest.raises(psycopg.OperationalError, match="no encryption|SSL required"):
            psycopg.connect(**{**client_params(cluster), "sslmode": "disable"})  # type: ignore[arg-type]
    finally:
        held.close()
        firewall.set_trusted_sources(cluster, [])

    # An empty list: open to every address again, still without a restart.
    assert server_client(cluster) == ("doadmin", True)
    assert pooler_client(pool) == ("doadmin", True)
    assert pids(cluster) == before
    assert [e.kind for e in cluster.events.filter(kind="trusted-sources")].count("trusted-sources") == 3


@pytest.mark.django_db
def test_the_reconciler_brings_a_pgbouncer_from_before_trusted_sources_into_line(
    firewalled: Firewalled,
) -> None:
    """A running PgBouncer whose files predate trusted sources (auth_type scram-sha-256, no hba
    file), and a rule saved while its files were not rewritten: the reconciler's pass rewrites and
    reloads them, after which the pooler refuses whom the server refuses."""
    cluster, pool = firewalled.cluster, firewalled.pool
    files = bouncer_files(cluster)
    hba_lines = ("auth_type = hba\n", f"auth_hba_file = {files.hba}\n")
    ini = files.ini.read_text()
    assert all(line in ini for line in hba_lines)
    old_ini = ini.replace(hba_lines[0], "auth_type = scram-sha-256\n").replace(hba_lines[1], "")
    disk.write_file(files, files.ini, old_ini)
    files.hba.unlink()
    with console.admin_console(cluster, get_pooler(cluster)) as conn:
        console.reload(conn)
    before = pids(cluster)
    try:
        TrustedSource.objects.create(cluster=cluster, value=OUTSIDE)  # as if the apply never ran
        assert pooler_client(pool) == ("doadmin", True)  # the old files: every address

        assert (
            pool_services.reconcile_pgbouncer(cluster)
            == f"{cluster.name}: PgBouncer trusted sources brought up to date"
        )
        assert all(line in files.ini.read_text() for line in hba_lines)
        assert OUTSIDE in files.hba.read_text()
        with pytest.raises(psycopg.OperationalError, match="login rejected"):
            pooler_client(pool)
        assert pool_services.reconcile_pgbouncer(cluster) is None  # nothing left to do
        assert pids(cluster) == before
    finally:
        firewall.set_trusted_sources(cluster, [])


@pytest.mark.django_db
def test_a_client_is_judged_by_its_own_address(firewalled: Firewalled) -> None:
    """The assertion of the cluster with standbys (``test_trusted_sources_ha.py``) on one member:
    clients bound to 127.0.0.2 (trusted) and 127.0.0.3 (not) on the server's and the pool's port."""
    cluster, pool = firewalled.cluster, firewalled.pool
    through_pool = pool_params(pool)
    try:
        firewall.set_trusted_sources(cluster, ["127.0.0.2"])
        assert current_user_from("127.0.0.2", client_params(cluster)) == "doadmin"
        assert current_user_from("127.0.0.2", through_pool) == "doadmin"
        with pytest.raises(psycopg.OperationalError, match=r'no pg_hba\.conf entry for host "127\.0\.0\.3"'):
            current_user_from("127.0.0.3", client_params(cluster))
        with pytest.raises(psycopg.OperationalError, match="login rejected"):
            current_user_from("127.0.0.3", through_pool)
    finally:
        firewall.set_trusted_sources(cluster, [])
    assert current_user_from("127.0.0.3", client_params(cluster)) == "doadmin"
    assert current_user_from("127.0.0.3", through_pool) == "doadmin"
