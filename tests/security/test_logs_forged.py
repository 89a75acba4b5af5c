"""Issue 29, item 5: log entries could be forged.

A tenant created a database whose name holds a line break and a made-up prefix,
``x\\n2026-01-01 00:00:00.000 UTC [1] doadmin@y``, and set ``log_min_duration_statement = 0``: the
panel's own monitoring session in that database then logged
``… [pid] pgpanel_monitor@x`` / ``2026-01-01 … [1] doadmin@y LOG:  duration: … statement: <the
panel's SQL>``, and the text parser showed the second line as the tenant's own entry on the Logs
tab. The tab now reads PostgreSQL's ``jsonlog``, where who wrote a record is a field. Replayed on a
real cluster beside the legitimate action: the tenant's own error (``SELECT 1/0``) still shows,
with its statement, and a cluster whose configuration predates the JSON log is switched over by
the reconciler with a reload.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.test import Client
from django.urls import reverse

from panel.clusters.engine import dbconn, isolation
from panel.clusters.lib import pgconf
from panel.clusters.models import Cluster
from panel.clusters.services import config, reconciler
from panel.clusters.tests.conftest import connect_as_client
from panel.logs import services
from tests.fixtures.clusters import module_cluster
from tests.fixtures.people import poll_until

pytestmark = pytest.mark.integration

FORGED_DB = "x\n2026-01-01 00:00:00.000 UTC [1] doadmin@y"
PANEL_MARKER = "panel_only_marker_7f3a"


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    with module_cluster(django_db_blocker, "forged-logs", "forged-logs") as made:
        yield made


@pytest.fixture
def local_cluster(cluster: Cluster, db: None) -> Cluster:
    cluster.refresh_from_db()
    return cluster


def poll(predicate: Callable[[], object], what: str) -> object:
    return poll_until(predicate, timeout=15, message=what)


def tenant_runs(cluster: Cluster, statement: str, dbname: str = "defaultdb") -> None:
    with connect_as_client(cluster, dbname=dbname) as conn, contextlib.suppress(psycopg.Error):
        conn.autocommit = True
        conn.execute(statement)


def test_a_forged_prefix_does_not_show_the_panels_session_as_the_tenants(local_cluster: Cluster) -> None:
    client = Client()
    client.force_login(local_cluster.owner)
    tab = reverse("logs:tab", args=[local_cluster.pk])
    # The tenant's setup: the database with the forged prefix, and every statement logged.
    tenant_runs(local_cluster, f'CREATE DATABASE "{FORGED_DB}"')
    config.update_config(local_cluster, {"log_min_duration_statement": 0})

    # The panel's own session in that database (as collection and quota measurement do).
    with dbconn.monitor_connection(local_cluster, dbname=FORGED_DB) as conn:
        conn.execute(f"SELECT '{PANEL_MARKER}'")
    # The legitimate action beside it: the tenant's own error, after the panel's statement.
    tenant_runs(local_cluster, "SELECT 1/0 AS tenant_error_marker")

    def shown() -> str:
        html = client.get(tab, {"source": "postgres"}).content.decode()
        return html if "tenant_error_marker" in html else ""

    html = str(poll(shown, "the tenant's error on the Logs tab"))
    assert "division by zero" in html and "SELECT 1/0 AS tenant_error_marker" in html
    assert PANEL_MARKER not in html
    assert services.read_log(local_cluster, search=PANEL_MARKER).entries == []
    assert PANEL_MARKER not in client.get(reverse("logs:download", args=[local_cluster.pk])).content.decode()
    # The forged database's own name shows as one line, its line break written out.
    tenant_runs(local_cluster, "SELECT 1/0 AS in_the_forged_db", dbname=FORGED_DB)
    entries = poll(
        lambda: services.read_log(local_cluster, search="in_the_forged_db").entries, "the error in x\\n…"
    )
    assert [entry.database for entry in entries] == ["x\\n2026-01-01 00:00:00.000 UTC [1] doadmin@y"]  # type: ignore[union-attr]
    assert all(len(entry.lines) == 2 for entry in entries)  # type: ignore[union-attr]


def test_a_cluster_from_before_is_switched_to_the_json_log_by_a_reload(local_cluster: Cluster) -> None:
    panel_conf = local_cluster.pgdata / "panel.conf"
    old = "\n".join(line for line in panel_conf.read_text().splitlines() if line != pgconf.JSON_LOG_LINE)
    panel_conf.write_text(old + "\n")
    isolation.reload_server_config(local_cluster)
    pid = (local_cluster.pgdata / "postmaster.pid").read_text().split()[0]

    notes = reconciler.reconcile()
    assert f"{local_cluster.name}: JSON log switched on" in notes
    assert pgconf.writes_json_log(panel_conf.read_text())
    assert (local_cluster.pgdata / "postmaster.pid").read_text().split()[0] == pid  # no restart
    tenant_runs(local_cluster, "SELECT 1/0 AS after_the_switch")
    poll(lambda: services.read_log(local_cluster, search="after_the_switch").entries, "the error")
