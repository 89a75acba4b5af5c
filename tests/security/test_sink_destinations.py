"""Issue 37, item 5: log sinks and migration sources reached the machine's own services.

Was: an rsyslog sink to this machine's own non-loopback address, on a port outside
PANEL_PORT_RANGE, was accepted and reached a Redis listening there; ``RAISE WARNING
E'x\\nSET key value'`` in the tenant's session then made that Redis run the ``SET`` (the line
break reached the wire as itself). A migration source at the same address was tried as well (a
port scanner: the error told services apart), and a registered node's addresses were not
refused at all.

Now every address of this machine and of every registered node is refused, on every port, at
save time and again before each connection, unless the operator lists its network; and no
control character of a record reaches a sink as itself (``#012`` for a line feed). Replayed
with a real Redis and a real rsyslog on this machine's own address, beside the legitimate
actions: a sink to a network the operator lists still receives, in one line.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.test import Client

from panel.api import services as api_services
from panel.api.models import Scope
from panel.clusters.models import Cluster, Node
from panel.clusters.tests.conftest import connect_as_client, module_cluster_fixture, refreshed_fixture
from panel.core.errors import ServiceError
from panel.logs import services as logs
from panel.logsink.models import LogSink
from panel.logsink.services import forward
from panel.logsink.tests.conftest import Rsyslog, _rsyslog
from panel.migrate.lib.source import Source
from panel.migrate.models import OnlineMigration
from panel.migrate.services import actions
from panel.migrate.services import source as remote
from tests import pgserver
from tests.security import ownaddress
from tests.security.ownaddress import OwnRedis, own_address, own_redis

pytestmark = pytest.mark.integration

MARKER = "sink-newline-marker-5150"
SOURCE_PASSWORD = "own-source-password-1"


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    with own_address() as found:
        yield found


cluster = module_cluster_fixture("sink-dest", "sink-dest")
tenant_cluster = refreshed_fixture("cluster")


@pytest.fixture
def redis_here(address: str, settings: Any) -> Iterator[OwnRedis]:
    with own_redis(address, tuple(settings.PANEL_PORT_RANGE)) as found:
        yield found


@pytest.fixture(scope="module")
def raw_rsyslog(address: str) -> Iterator[Rsyslog]:
    """A real rsyslog on this machine's own address that keeps control characters as it gets them."""
    yield from _rsyslog(tls=False, address=address, raw=True)


def _api(cluster: Cluster) -> tuple[Client, dict[str, str]]:
    token = api_services.create_token(cluster.owner, "t", [scope.value for scope in Scope])[1]
    return Client(), {"Authorization": f"Bearer {token}"}


def _create_sink(cluster: Cluster, config: dict[str, Any], name: str = "own") -> tuple[int, dict[str, Any]]:
    client, headers = _api(cluster)
    response = client.post(
        f"/v2/databases/{cluster.pk}/logsink",
        data=json.dumps({"sink_name": name, "sink_type": "rsyslog", "config": config}),
        content_type="application/json",
        headers=headers,
    )
    return response.status_code, response.json()


def _saved_sink(cluster: Cluster, host: str, port: int, name: str) -> LogSink:
    """A sink as the database holds it (saved while the operator listed its network, or while
    its name pointed elsewhere): forwarding must check it again."""
    sink = LogSink(cluster=cluster, name=name, sink_type="rsyslog")
    sink.config = {"server": host, "port": port, "tls": False, "format": "rfc5424"}
    sink.save()
    forward.forward_sink(sink)  # a new sink starts at the end of the logs
    sink.refresh_from_db()
    assert sink.cursors
    return sink


def _error_of(sink: LogSink) -> str:
    sink.refresh_from_db()
    return sink.error_text


def _tenant_warns(cluster: Cluster, wait_until: Callable[..., object]) -> None:
    with connect_as_client(cluster, autocommit=True) as conn, contextlib.suppress(psycopg.Error):
        conn.execute(f"DO $$BEGIN RAISE WARNING E'{MARKER}\\nSET pwned 1'; END$$")
    wait_until(
        lambda: logs.read_log(cluster, logs.POSTGRES, search=MARKER).entries,
        timeout=30,
        message="the tenant's warning is in the log",
    )


def test_a_sink_to_this_machines_own_address_is_refused_on_any_port(
    tenant_cluster: Cluster, redis_here: OwnRedis, settings: Any
) -> None:
    settings.PANEL_LOGSINK_TARGET_NETWORKS = []
    config = {"server": redis_here.address, "port": redis_here.port, "format": "rfc5424"}
    status, body = _create_sink(tenant_cluster, config)
    assert (status, body["id"]) == (422, "logsink.host_forbidden"), body
    client, headers = _api(tenant_cluster)
    url = f"http://{redis_here.address}:{redis_here.port}"
    response = client.post(
        f"/v2/databases/{tenant_cluster.pk}/logsink",
        data=json.dumps(
            {"sink_name": "es", "sink_type": "elasticsearch", "config": {"url": url, "index_prefix": "pg"}}
        ),
        content_type="application/json",
        headers=headers,
    )
    assert (response.status_code, response.json()["id"]) == (422, "logsink.host_forbidden")
    assert not LogSink.objects.filter(cluster=tenant_cluster).exists()
    # The operator lists the network: then it is theirs to allow.
    settings.PANEL_LOGSINK_TARGET_NETWORKS = [f"{redis_here.address}/32"]
    status, body = _create_sink(tenant_cluster, config)
    assert status == 201, body
    LogSink.objects.filter(cluster=tenant_cluster).delete()


def test_a_sink_to_a_registered_nodes_address_is_refused(tenant_cluster: Cluster, settings: Any) -> None:
    settings.PANEL_LOGSINK_TARGET_NETWORKS = []
    Node.objects.create(
        name="far-node", address=ownaddress.FAR_NODE_ADDRESS, private_address=ownaddress.FAR_NODE_PRIVATE,
        port_first=30000, port_last=30199, data_dir="/srv/pgpanel", ram_bytes=2**30, vcpus=1,
    )  # fmt: skip
    try:
        with ownaddress.unreachable():
            for host in (ownaddress.FAR_NODE_ADDRESS, ownaddress.FAR_NODE_PRIVATE):
                status, body = _create_sink(tenant_cluster, {"server": host, "port": 6379})
                assert (status, body["id"]) == (422, "logsink.host_forbidden"), (host, body)
            # Beside it: an address that is no node's is a destination like any other.
            status, body = _create_sink(tenant_cluster, {"server": ownaddress.FAR_ELSEWHERE, "port": 514})
            assert status == 201, body
    finally:
        Node.objects.filter(name="far-node").delete()
        LogSink.objects.filter(cluster=tenant_cluster).delete()


def test_a_saved_sink_is_checked_again_before_it_connects(
    tenant_cluster: Cluster, redis_here: OwnRedis, settings: Any, wait_until: Callable[..., object]
) -> None:
    settings.PANEL_LOGSINK_TARGET_NETWORKS = []
    sink = _saved_sink(tenant_cluster, redis_here.address, redis_here.port, "saved")
    try:
        _tenant_warns(tenant_cluster, wait_until)
        assert forward.forward_sink(sink) == 0
        sink.refresh_from_db()
        assert sink.is_failing and redis_here.address in sink.error_text
        assert json.loads(sink.last_error)["code"] == "logsink.host_forbidden"
        # Redis saw no connection but the test's own, and runs nothing of the record.
        assert int(redis_here.client.info("stats")["total_connections_received"]) == 1
        assert redis_here.client.get("pwned") is None
    finally:
        sink.delete()


def test_a_line_break_in_a_record_reaches_no_receiver_as_a_line_break(
    tenant_cluster: Cluster,
    redis_here: OwnRedis,
    raw_rsyslog: Rsyslog,
    settings: Any,
    wait_until: Callable[..., object],
) -> None:
    # The operator lists this machine's address: both receivers are allowed destinations.
    settings.PANEL_LOGSINK_TARGET_NETWORKS = [f"{redis_here.address}/32"]
    to_redis = _saved_sink(tenant_cluster, redis_here.address, redis_here.port, "redis")
    to_rsyslog = _saved_sink(tenant_cluster, redis_here.address, raw_rsyslog.port, "rsyslog")
    try:
        _tenant_warns(tenant_cluster, wait_until)
        # Redis answers a record it cannot parse (an odd quote in a STATEMENT line) by closing the
        # connection, so the send may end in a reset (the sink then says it failed): whether it
        # counts as delivered is a race. What matters is that Redis read the connection and ran
        # no command from it.
        read_before = int(redis_here.client.info("stats")["total_net_input_bytes"])
        forward.forward_sink(to_redis)
        # The forwarder's next round tries again what a round could not send; so does the test.
        deadline = time.monotonic() + 30
        while not forward.forward_sink(to_rsyslog):
            assert time.monotonic() < deadline, f"the rsyslog sink sent nothing: {_error_of(to_rsyslog)!r}"
            time.sleep(0.5)

        def redis_read() -> bool:
            # A round that met a reset before it connected is tried again by the next one.
            if int(redis_here.client.info("stats")["total_connections_received"]) < 2:
                forward.forward_sink(to_redis)
            return redis_here.settled(1)

        wait_until(
            redis_read,
            timeout=30,
            message=f"Redis read the sink's connection: {_error_of(to_redis)!r}, {redis_here.client.info('clients')}",
        )
        # (the test's own INFO calls are a few dozen bytes; the records are longer than the marker)
        assert int(redis_here.client.info("stats")["total_net_input_bytes"]) - read_before > 200
        assert redis_here.client.get("pwned") is None
        lines = wait_until(
            lambda: [line for line in raw_rsyslog.lines() if MARKER in line],
            timeout=30,
            message="rsyslog receives the warning",
        )
        # The legitimate action: one message, the line break escaped within it.
        # (PostgreSQL's log indents a message's next line with a tab: #011.)
        assert len(lines) == 1 and f"{MARKER}#012#011SET pwned 1" in lines[0], lines  # type: ignore[arg-type]
        assert not [line for line in raw_rsyslog.lines() if line.lstrip().startswith("SET pwned")]
    finally:
        to_redis.delete()
        to_rsyslog.delete()


def _source(address: str, port: int) -> Source:
    return Source(host=address, port=port, dbname="postgres", username="srcadmin", disable_ssl=True)


def test_a_migration_source_on_this_machines_own_address_is_refused(
    tenant_cluster: Cluster, redis_here: OwnRedis, settings: Any
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = []
    client, headers = _api(tenant_cluster)
    body = {"source": {"host": redis_here.address, "port": redis_here.port, "dbname": "postgres",
                       "username": "srcadmin", "password": SOURCE_PASSWORD}, "disable_ssl": True}  # fmt: skip
    response = client.put(
        f"/v2/databases/{tenant_cluster.pk}/online-migration",
        data=json.dumps(body),
        content_type="application/json",
        headers=headers,
    )
    assert (response.status_code, response.json()["id"]) == (422, "migration.host_forbidden"), response.json()
    # The address a migration recorded is checked again before each connection.
    with (
        pytest.raises(ServiceError) as refused,
        remote.connect(_source(redis_here.address, redis_here.port), redis_here.address, SOURCE_PASSWORD),
    ):
        pass
    assert refused.value.code == "migration.host_forbidden"
    assert int(redis_here.client.info("stats")["total_connections_received"]) == 1
    assert not OnlineMigration.objects.filter(cluster=tenant_cluster).exists()


def test_a_migration_source_in_a_listed_network_still_starts(
    tenant_cluster: Cluster, address: str, settings: Any
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = [f"{address}/32"]
    with pgserver.throwaway_server(
        port=pgserver.free_port_outside(*settings.PANEL_PORT_RANGE),
        listen_addresses=address,
        pg_hba=f"local all all trust\nhost all all {address}/32 scram-sha-256\n",
        superuser="srcadmin",
        password=SOURCE_PASSWORD,
        settings="wal_level = logical\n",
        run_as=getattr(settings, "PANEL_RUN_AS_USER", "postgres"),
        prefix="pgpanel-ownsrc-",
    ) as pg:
        with psycopg.connect(
            host=pg.socket_dir, port=pg.port, user="srcadmin", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE shop")
        with psycopg.connect(host=pg.socket_dir, port=pg.port, user="srcadmin", dbname="shop") as conn:
            conn.execute("CREATE TABLE items (id bigint PRIMARY KEY)")
        migration = actions.start_migration(
            tenant_cluster, host=address, port=pg.port, dbname="postgres", username="srcadmin",
            password=SOURCE_PASSWORD, disable_ssl=True, enqueue=False,
        )  # fmt: skip
        try:
            assert migration.address == address and migration.databases == ["shop"]
        finally:
            migration.delete()
