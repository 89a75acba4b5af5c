"""Trusted sources on a cluster with standbys, replayed for real: one two-member cluster (Patroni,
etcd, HAProxy on the cluster's port and on the read-only port) and a PgBouncer pool.

The attack (before the fix): PostgreSQL behind HAProxy saw every client as 127.0.0.1, so trusting
127.0.0.1 let every address in, and trusting a client's own address refused it. Clients here come
from 127.0.0.2 (trusted) and 127.0.0.3 (not), each bound to its address (``sourced``): HAProxy
sees them as they are. Trusted 127.0.0.2 → it connects on the primary port and on the standby
port, 127.0.0.3 is refused on both (and on a member's own port, and on the pool); the change
keeps an allowed client's open session (a graceful reload) and ends the other's; trusting
127.0.0.1 lets 127.0.0.3 in nowhere; no source lets everyone in again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from panel.clusters.engine import isolation
from panel.clusters.models import Cluster, TrustedSource
from panel.clusters.services import firewall, reconciler
from panel.clusters.standbys.services import ha, ha_files
from panel.clusters.tests.conftest import client_params
from panel.pools import services as pool_services
from panel.pools.models import ConnectionPool
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner
from tests.security.sourced import connect_from, current_user_from, pool_params

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "haf-owner"
TRUSTED, OTHER = "127.0.0.2", "127.0.0.3"
TIMEOUT = 60


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: Any) -> Iterator[tuple[Cluster, ConnectionPool]]:
    """The session's two-member db-s-1vcpu-2gb cluster, named db-haf for the module, both members
    streaming, and a pool (deleted after the module, as the loan wants)."""
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-haf") as cluster:
        with django_db_blocker.unblock():
            pool = pool_services.create_pool(cluster, "haf-pool", "defaultdb", None, "transaction", 2)
        yield cluster, pool


def _params(cluster: Cluster, port: int) -> dict[str, Any]:
    return client_params(cluster, port=port, connect_timeout=5)


def _recovery(source: str, cluster: Cluster, port: int) -> bool:
    """Connect from ``source`` and say whether the server is a standby."""
    with connect_from(source, _params(cluster, port)) as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        return bool(row and row[0])


def _refused(source: str, cluster: Cluster, port: int) -> str:
    with pytest.raises(psycopg.OperationalError) as caught:
        _recovery(source, cluster, port)
    return str(caught.value)


def _alive(conn: psycopg.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True


def test_trusted_sources_hold_on_the_primary_and_the_standby_port(
    ha_cluster: tuple[Cluster, ConnectionPool],
) -> None:
    cluster, pool = ha_cluster
    primary, standby = int(cluster.port or 0), int(cluster.standby_port or 0)
    # Open: both addresses on both ports.
    for source in (TRUSTED, OTHER):
        assert _recovery(source, cluster, primary) is False
        assert _recovery(source, cluster, standby) is True
    with contextlib.ExitStack() as held:
        kept = [held.enter_context(connect_from(TRUSTED, _params(cluster, p))) for p in (primary, standby)]
        doomed = held.enter_context(connect_from(OTHER, _params(cluster, primary)))

        assert firewall.set_trusted_sources(cluster, [TRUSTED]) == [TRUSTED]
        assert _recovery(TRUSTED, cluster, primary) is False
        assert _recovery(TRUSTED, cluster, standby) is True
        _refused(OTHER, cluster, primary)
        _refused(OTHER, cluster, standby)
        # The machine itself (the cluster's read-only replicas stream through HAProxy).
        assert _recovery("127.0.0.1", cluster, primary) is False
        # A member's own port is no way around HAProxy: PostgreSQL there lets only HAProxy's
        # address in over TCP.
        for port in cluster.members.values_list("port", flat=True):
            assert f'no pg_hba.conf entry for host "{OTHER}"' in _refused(OTHER, cluster, port)
        # PgBouncer sees its clients' own addresses: its hba file applies the same sources.
        assert current_user_from(TRUSTED, pool_params(pool)) == "doadmin"
        with pytest.raises(psycopg.OperationalError, match="login rejected"):
            current_user_from(OTHER, pool_params(pool))
        # HAProxy was reloaded, not restarted: the allowed client's sessions go on; the other's
        # was ended.
        assert all(_alive(conn) for conn in kept)
        assert not _alive(doomed)

        # The attack of before: trusting HAProxy's own address let every client in. (HAProxy
        # lets 127.0.0.1, the machine itself, in whatever the sources: replicas stream through it.)
        firewall.set_trusted_sources(cluster, ["127.0.0.1"])
        _refused(OTHER, cluster, primary)
        _refused(OTHER, cluster, standby)
        _refused(TRUSTED, cluster, primary)
        assert _recovery("127.0.0.1", cluster, primary) is False
        assert _recovery("127.0.0.1", cluster, standby) is True

        # 127.0.0.2 is not trusted any more: its open sessions end too.
        assert not any(_alive(conn) for conn in kept)

        # No source: every address again.
        firewall.set_trusted_sources(cluster, [])
        for source in (TRUSTED, OTHER):
            assert _recovery(source, cluster, primary) is False
            assert _recovery(source, cluster, standby) is True
        assert current_user_from(OTHER, pool_params(pool)) == "doadmin"
    assert cluster.events.filter(kind="trusted-sources").count() == 3


def test_the_reconciler_puts_the_rule_into_an_haproxy_from_before(
    ha_cluster: tuple[Cluster, ConnectionPool],
) -> None:
    """An HAProxy configured before it applied the sources (no rule: every address through) and a
    source saved meanwhile: the reconciler's pass writes the rule and reloads it."""
    cluster, _pool = ha_cluster
    primary = int(cluster.port or 0)
    config = ha.haproxy_config_path(cluster)
    old = "".join(line for line in config.read_text().splitlines(True) if "tcp-request" not in line)
    config.write_text(old)
    user = isolation.os_user(cluster)
    ha.reload_haproxy(cluster, user, TIMEOUT)
    try:
        TrustedSource.objects.create(cluster=cluster, value=TRUSTED)  # as if never applied
        assert _recovery(OTHER, cluster, primary) is False  # the old HAProxy lets it through

        note = f"{cluster.name}: HAProxy's configuration and trusted sources brought up to date"
        assert note in reconciler.reconcile()
        assert firewall.reconcile_proxy(cluster) is None  # nothing left to do
        assert "src -f" in config.read_text()
        _refused(OTHER, cluster, primary)
        assert _recovery(TRUSTED, cluster, primary) is False
    finally:
        firewall.set_trusted_sources(cluster, [])
    assert _recovery(OTHER, cluster, primary) is False


def test_the_reconciler_brings_an_haproxy_of_an_older_panel_up_to_date(
    ha_cluster: tuple[Cluster, ConnectionPool],
) -> None:
    """An HAProxy configured by the panel before its retries on another member (``timeout connect
    3s``, no redispatch: a direct client waited 3.4 s at a switchover): the reconciler writes the
    configuration of now and reloads HAProxy, whose sessions go on; a second pass finds nothing."""
    cluster, _pool = ha_cluster
    config = ha.haproxy_config_path(cluster)
    now = config.read_text()
    assert now == ha_files.haproxy_text(cluster)
    older = now.replace("    timeout connect 500ms\n", "    timeout connect 3s\n")
    older = older.replace("    retries 3\n", "").replace("    option redispatch 1\n", "")
    assert older != now
    config.write_text(older)
    user = isolation.os_user(cluster)
    ha.reload_haproxy(cluster, user, TIMEOUT)
    pidfile = ha.ha_dir(cluster) / "haproxy.pid"
    before = pidfile.read_text()
    with connect_from("127.0.0.1", _params(cluster, int(cluster.port or 0))) as held:
        note = f"{cluster.name}: HAProxy's configuration and trusted sources brought up to date"
        assert note in reconciler.reconcile()
        assert config.read_text() == now
        assert firewall.reconcile_proxy(cluster) is None  # nothing left to do
        assert _alive(held)  # reloaded, not restarted
    assert pidfile.read_text() != before, "no new HAProxy took the configuration"
    assert _recovery("127.0.0.1", cluster, int(cluster.port or 0)) is False
