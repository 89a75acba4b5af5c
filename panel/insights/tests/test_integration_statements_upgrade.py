"""A cluster from before pg_stat_statements: its Queries tab asks for a restart (and the reconciler
does not take it for a cluster without the privilege guard); the restart the panel already has
loads the library; the collections create the extension and the panel's template database, and
collect."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from panel.clusters import services as cluster_services
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.clusters.tests.conftest import module_cluster_fixture
from panel.core import runas
from panel.insights import services
from panel.insights.models import StatementsState, StatementsStatus

pytestmark = pytest.mark.integration


cluster = module_cluster_fixture("queries-upgrade-owner", "queries-upgrade")


def make_it_old(cluster: Cluster) -> None:
    """panel.conf as the panel wrote it before (the guard alone), no extension, restarted on it."""
    with dbconn.admin_connection(cluster) as conn:
        conn.execute("DROP EXTENSION pg_stat_statements")
        conn.execute(f"ALTER DATABASE {dbconn.STATEMENTS_TEMPLATE} WITH IS_TEMPLATE false")
        conn.execute(f"DROP DATABASE {dbconn.STATEMENTS_TEMPLATE}")
    conf = cluster.pgdata / "panel.conf"
    text = conf.read_text()
    text = re.sub(r'^(shared_preload_libraries = .*), "pg_stat_statements"\'$', r"\1'", text, flags=re.M)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("pg_stat_statements.")) + "\n"
    assert "pg_stat_statements" not in text
    user = isolation.os_user(cluster)
    runas.write_private_file(conf, text, owner=user)
    postgres.stop(cluster.version, cluster.pgdata, user=user, timeout=settings.PANEL_COMMAND_TIMEOUT)
    isolation.start_server(cluster, user, settings.PANEL_COMMAND_TIMEOUT)


@pytest.mark.django_db
def test_an_old_cluster_asks_for_a_restart_and_collects_after_it(cluster: Cluster, client: Client) -> None:
    make_it_old(cluster)
    assert cluster_services.guard_configured(cluster), "the reconciler would restart it as guard-less"

    services.collect_cluster(cluster)
    state = StatementsState.objects.get(cluster=cluster)
    assert state.status == StatementsStatus.NOT_LOADED, state.message
    client.force_login(cluster.owner)
    html = client.get(reverse("insights:queries", args=[cluster.pk])).content.decode()
    assert "Restart to enable query statistics." in html
    assert reverse("clusters:action", args=[cluster.pk, "restart"]) in html

    cluster_services.perform_action(cluster, "restart")
    services.collect_cluster(cluster)  # creates the extension: the baseline
    state.refresh_from_db()
    assert state.status == StatementsStatus.COLLECTING, state.message
    assert cluster.events.filter(kind="statements").exists()
    with dbconn.monitor_connection(cluster, "defaultdb") as tenant_db:
        tenant_db.execute("SELECT 1")  # the monitor's own: never listed
    html = client.get(reverse("insights:queries", args=[cluster.pk])).content.decode()
    assert "Restart to enable" not in html and "No statements in this window" in html

    # The template made on the way: databases the panel adds from now on have the extension.
    with dbconn.admin_connection(cluster) as conn:
        assert dbconn.statements_template(conn) == dbconn.STATEMENTS_TEMPLATE
    roles.add_database(cluster, "after_upgrade")
    with dbconn.monitor_connection(cluster, "after_upgrade") as conn:
        assert conn.execute(
            "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_stat_statements'"
        ).fetchone()
