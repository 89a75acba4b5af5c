"""Log forwarding end to end: pydo 0.44 unchanged creates, lists, reads, updates and deletes log
sinks on the live server; a real Celery worker runs the forwarding round; a real rsyslog on
loopback receives the cluster's PostgreSQL records (RFC 5424, the cluster's name as the host),
an Elasticsearch-shaped HTTP server gets the same as ``_bulk`` documents, and a sink that cannot
be reached shows as failing on the Logs tab's card while the local log keeps every entry. Neither
the panel's own sessions nor another tenant's cluster on the same node reach these sinks; bad
input is refused with its code, nothing changed."""

from __future__ import annotations

import base64
import datetime as dt
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from azure.core.exceptions import HttpResponseError
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.clusters.services import delete_cluster
from panel.clusters.tests.conftest import connect_as_client
from panel.core import taskqueue
from panel.logs import services as logs
from panel.logsink.models import LogSink
from panel.logsink.tests.conftest import BulkServer, Rsyslog
from panel.pools import services as pools
from tests.fixtures.clusters import make_local_cluster
from tests.fixtures.processes import start_celery_worker
from tests.fixtures.pydo import owner_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

QUEUE = "logsink-test"
MARKER = "tenant-marker-4711"
PANEL_MARKER = "panel-own-marker-0815"
OTHER_MARKER = "other-tenant-marker-1234"


@pytest.fixture
def other_cluster(transactional_db: None) -> Iterator[Cluster]:
    """A cluster of another account on the same node."""
    other = User.objects.create_user("dave", "dave@example.com", "dave-password-1")
    cluster = make_local_cluster(other, name="other-db")
    yield cluster
    if Cluster.objects.filter(pk=cluster.pk).exists():
        cluster.refresh_from_db()
        delete_cluster(cluster, confirm_name=cluster.name)


@pytest.fixture
def forwarding_worker(redis_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A real Celery worker of its own (it must allow loopback sinks, as the test process does)."""
    monkeypatch.setenv("PANEL_LOGSINK_TARGET_NETWORKS", "127.0.0.0/8")
    proc = start_celery_worker(redis_server, QUEUE, Path(django_settings.PANEL_DATA_DIR) / "logsink-worker.log",
                               concurrency=1)  # fmt: skip
    yield
    proc.terminate()
    proc.wait(timeout=20)


def forward_round() -> None:
    """One forwarding round, run by the worker: the task the beat's fan-out sends every node."""
    taskqueue.send("panel.logsink.tasks.forward", [], queue=QUEUE)


def test_pydo_manages_sinks_and_rsyslog_receives_the_clusters_records(
    live_server: object,
    local_cluster: Cluster,
    other_cluster: Cluster,
    rsyslog: Rsyslog,
    rsyslog_tls: Rsyslog,
    bulk_server: BulkServer,
    forwarding_worker: None,
    settings: object,
    wait_until: Callable[..., object],
) -> None:
    settings.PANEL_LOGSINK_TARGET_NETWORKS = ["127.0.0.0/8"]  # type: ignore[attr-defined]
    client = owner_client(live_server.url, local_cluster.owner)  # type: ignore[attr-defined]
    uuid = str(local_cluster.pk)
    syslog_config = {"server": "127.0.0.1", "port": rsyslog.port, "tls": False, "format": "rfc5424"}
    created = client.databases.create_logsink(
        uuid, {"sink_name": "syslog", "sink_type": "rsyslog", "config": syslog_config}
    )["sink"]
    assert created["sink_type"] == "rsyslog" and created["config"]["port"] == rsyslog.port
    es_url = f"http://elastic:s3cret@127.0.0.1:{bulk_server.port}"
    bulk_server.indices = ["pg-2000.01.01", f"pg-{dt.datetime.now(dt.UTC):%Y.%m.%d}", "other-2000.01.01"]
    es = client.databases.create_logsink(
        uuid,
        {
            "sink_name": "search",
            "sink_type": "elasticsearch",
            "config": {"url": es_url, "index_prefix": "old"},
        },
    )["sink"]
    tls_config = {"server": "127.0.0.1", "port": rsyslog_tls.port, "tls": True, "ca": rsyslog_tls.ca,
                  "format": "custom", "logline": "<%pri%>%timestamp% %HOSTNAME% %app-name%: %msg%"}  # fmt: skip
    client.databases.create_logsink(
        uuid, {"sink_name": "syslog-tls", "sink_type": "rsyslog", "config": tls_config}
    )
    closed = {"server": "127.0.0.1", "port": 9, "format": "rfc3164"}  # nothing listens on discard
    client.databases.create_logsink(uuid, {"sink_name": "broken", "sink_type": "rsyslog", "config": closed})
    assert (
        client.databases.update_logsink(
            uuid, es["sink_id"], {"config": {"url": es_url, "index_prefix": "pg"}}
        )
        is None
    )
    assert client.databases.get_logsink(uuid, es["sink_id"])["config"]["index_prefix"] == "pg"
    assert {s["sink_name"] for s in client.databases.list_logsink(uuid)["sinks"]} == {
        "syslog",
        "syslog-tls",
        "search",
        "broken",
    }
    assert "s3cret" not in LogSink.objects.get(pk=es["sink_id"]).config_encrypted

    # Bad input, each with its code; nothing changed.
    first_port = settings.PANEL_PORT_RANGE[0]  # type: ignore[attr-defined]
    refusals = [
        ({"sink_name": "x", "sink_type": "datadog", "config": {}}, 422, "logsink.type_invalid"),
        ({"sink_name": "x", "sink_type": "rsyslog", "config": {**syslog_config, "colour": 1}}, 422, "logsink.config_unknown"),
        ({"sink_name": "x", "sink_type": "rsyslog", "config": {**syslog_config, "port": "514"}}, 422, "logsink.config_invalid"),
        ({"sink_name": "x", "sink_type": "rsyslog", "config": {**syslog_config, "port": first_port}}, 422, "logsink.host_forbidden"),
        ({"sink_name": "x", "sink_type": "elasticsearch", "config": {"url": "file:///etc/passwd", "index_prefix": "p"}}, 422, "logsink.config_invalid"),
        ({"sink_name": "x", "sink_type": "rsyslog", "config": {**syslog_config, "format": "custom", "logline": "%exec%"}}, 422, "logsink.config_invalid"),
        ({"sink_name": "syslog", "sink_type": "rsyslog", "config": syslog_config}, 409, "logsink.name_taken"),
        ({"sink_name": "x", "sink_type": "rsyslog", "config": syslog_config, "extra": 1}, 422, "unprocessable_entity"),
    ]  # fmt: skip
    for body, status, code in refusals:
        with pytest.raises(HttpResponseError) as refused:
            client.databases.create_logsink(uuid, body)
        assert (refused.value.status_code, refused.value.response.json()["id"]) == (status, code), body
    with pytest.raises(HttpResponseError) as refused:
        client.databases.update_logsink(
            uuid, es["sink_id"], {"config": {"url": "gopher://x", "index_prefix": "p"}}
        )
    assert refused.value.status_code == 422
    assert client.databases.get_logsink(uuid, "nope")["id"] == "logsink.not_found"
    assert LogSink.objects.filter(cluster=local_cluster).count() == 4
    assert LogSink.objects.get(pk=es["sink_id"]).config["index_prefix"] == "pg"

    pool = pools.create_pool(local_cluster, "sinkpool", "defaultdb", None, "transaction", 2)
    forward_round()  # a new sink starts at the end of the logs
    wait_until(
        lambda: all(sink.cursors for sink in LogSink.objects.filter(cluster=local_cluster)),
        timeout=60,
        message="the worker's first round sets every sink's cursors",
    )
    details = pools.pool_connection_details(pool)
    with pytest.raises(psycopg.OperationalError):  # PgBouncer logs a refused login
        psycopg.connect(details.uri().replace(details.password, "not-the-password"), connect_timeout=5)
    with (
        connect_as_client(local_cluster, autocommit=True) as conn,
        pytest.raises(psycopg.errors.DivisionByZero),
    ):
        conn.execute(f'SELECT 1/0 AS "{MARKER}"')
    with (
        dbconn.admin_connection(local_cluster, quiet_log=False) as admin,
        pytest.raises(psycopg.errors.DivisionByZero),
    ):
        admin.execute(f'SELECT 1/0 AS "{PANEL_MARKER}"')

    # Another tenant's cluster on the same node, with no sink: its records go nowhere.
    with (
        connect_as_client(other_cluster, autocommit=True) as conn,
        pytest.raises(psycopg.errors.DivisionByZero),
    ):
        conn.execute(f'SELECT 1/0 AS "{OTHER_MARKER}"')

    def received(text: str = MARKER) -> list[str]:
        forward_round()
        time.sleep(0.5)
        return [line for line in rsyslog.lines() if text in line]

    (line,) = wait_until(received, timeout=60, message="rsyslog receives the tenant's error")  # type: ignore[misc]
    host, app, severity, message = line.split("|", 3)
    assert (host, app, severity) == (local_cluster.name, "postgresql", "err")
    assert "division by zero" in message
    bouncer = wait_until(
        lambda: received("sinkpool/doadmin"),
        timeout=30,
        message="rsyslog receives PgBouncer's record",
    )
    assert bouncer[0].startswith(f"{local_cluster.name}|pgbouncer|")  # type: ignore[index]
    (tls_line,) = wait_until(
        lambda: [ln for ln in rsyslog_tls.lines() if MARKER in ln], timeout=30, message="TLS"
    )  # type: ignore[misc]
    assert tls_line.startswith(f"{local_cluster.name}|postgresql|err|")
    docs = [doc for doc in bulk_server.documents() if MARKER in doc["message"]]
    assert docs and docs[0]["cluster"] == local_cluster.name and docs[0]["_index"].startswith("pg-")
    assert bulk_server.bodies[-1][0] == "/_bulk"
    # Once a day the indices over index_days_max (7) go: only the sink's own old daily index.
    deleted = wait_until(lambda: [path for method, path in bulk_server.requests if method == "DELETE"], timeout=30,
                         message="the old index is removed")  # fmt: skip
    assert deleted == ["/pg-2000.01.01"]
    assert bulk_server.bodies[-1][1] == "Basic " + base64.b64encode(b"elastic:s3cret").decode()
    everything = "\n".join(rsyslog.lines()) + repr(bulk_server.documents())
    assert PANEL_MARKER not in everything and OTHER_MARKER not in everything
    assert logs.read_log(other_cluster, logs.POSTGRES, search=OTHER_MARKER).entries  # it was logged

    # The failing sink shows on the card; the local log still holds the entry.
    broken = wait_until(
        lambda: LogSink.objects.filter(
            cluster=local_cluster, name="broken", failing_since__isnull=False
        ).first(),
        timeout=30,
        message="the unreachable sink is marked failing",
    )
    assert "127.0.0.1:9" in broken.error_text  # type: ignore[attr-defined]
    with translation.override("de"):
        assert broken.error_text.startswith("Keine Verbindung zu 127.0.0.1:9")  # type: ignore[attr-defined]
    web = Client()
    web.force_login(local_cluster.owner)
    card = web.get(f"/clusters/{uuid}/logsinks/").content.decode()
    assert "failing" in card and "127.0.0.1:9" in card
    page = logs.read_log(local_cluster, logs.POSTGRES, search=MARKER)
    assert page.entries

    assert client.databases.delete_logsink(uuid, broken.pk.hex) is None  # type: ignore[attr-defined]
    assert {s["sink_name"] for s in client.databases.list_logsink(uuid)["sinks"]} == {
        "syslog",
        "syslog-tls",
        "search",
    }
