"""Integration: reads from a standby (issue 28) on one real two-member cluster (Patroni, etcd,
HAProxy): the standby connection reaches a server in recovery that answers reads and refuses
writes, in the services, the Overview, the CLI, the API and pydo; the Insights collector records
the standby's replication lag and the tab draws it; with the standby stopped the same port is
answered by the primary. One-member clusters: no standby connection, and the lag chart's empty
state."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from panel.api import services as api_services
from panel.api.models import Scope
from panel.clusters import services
from panel.clusters.engine import isolation
from panel.clusters.models import Cluster, Node
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.services import ha
from panel.clusters.tests.conftest import make_cluster_row
from panel.core.errors import ServiceError
from panel.insights.models import MetricPoint
from panel.insights.prometheus import exposition
from panel.insights.services.collection import collect_cluster
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "sr-owner"
TIMEOUT = 60


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: object) -> Iterator[Cluster]:
    """The session's two-member db-s-1vcpu-2gb cluster, named db-sr for the module, both members
    streaming."""
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-sr") as cluster:
        yield cluster


def _connect(cluster: Cluster, *, standby: bool) -> psycopg.Connection:
    details = services.connection_details(cluster, standby=standby)
    return psycopg.connect(details.uri(), connect_timeout=3, autocommit=True)


def _in_recovery(cluster: Cluster) -> bool:
    with _connect(cluster, standby=True) as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and row[0])


def test_the_standby_connection_reads_from_a_standby_and_refuses_writes(ha_cluster: Cluster) -> None:
    details = services.connection_details(ha_cluster, standby=True)
    assert details.port == ha_cluster.standby_port and details.port not in (
        ha_cluster.port,
        ha_cluster.pooler_port,
    )
    with _connect(ha_cluster, standby=False) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS seen (id int)")
        conn.execute("INSERT INTO seen VALUES (1)")  # synchronous: applied on the standby too
    with _connect(ha_cluster, standby=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        assert conn.execute("SELECT count(*) FROM seen").fetchone() == (1,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction, match="read-only transaction"):
            conn.execute("INSERT INTO seen VALUES (2)")
    # The cluster's own port still writes.
    with _connect(ha_cluster, standby=False) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)


def test_the_overview_and_the_cli_offer_the_standby_connection(ha_cluster: Cluster) -> None:
    web = Client()
    web.force_login(ha_cluster.owner)
    url = reverse("clusters:connection", args=[ha_cluster.pk])
    page = web.get(url, {"node": "standby", "view": "uri"}).content.decode()
    assert "Standby (read-only)" in page and f":{ha_cluster.standby_port}/defaultdb" in page
    assert "Writes are refused" in page
    secret = reverse("clusters:connection-secret", args=[ha_cluster.pk])
    uri = web.get(secret, {"node": "standby", "format": "uri"}).content.decode()
    assert uri == services.connection_details(ha_cluster, standby=True).uri()
    primary = web.get(url, {"view": "uri"}).content.decode()
    assert f":{ha_cluster.port}/defaultdb" in primary and "Writes are refused" not in primary
    out = io.StringIO()
    call_command("cluster", "connection", "db-sr", "--standby", "--owner", OWNER, stdout=out)
    assert f":{ha_cluster.standby_port}/defaultdb" in out.getvalue()


def test_the_api_gives_standby_and_private_connections(ha_cluster: Cluster) -> None:
    token = api_services.create_token(ha_cluster.owner, "sr", [Scope.READ, Scope.VIEW_CREDENTIALS])[1]
    response = Client().get(f"/v2/databases/{ha_cluster.pk}", headers={"Authorization": f"Bearer {token}"})
    got = json.loads(response.content)["database"]
    standby = got["standby_connection"]
    assert standby["port"] == ha_cluster.standby_port and standby["host"] == got["connection"]["host"]
    assert set(standby) == set(got["connection"]) and standby["password"]
    assert standby["uri"] == services.connection_details(ha_cluster, standby=True).uri()
    # No private network on this node: the private details are the public ones.
    assert got["private_connection"] == got["connection"]
    assert got["standby_private_connection"] == standby


def test_the_collector_records_each_standbys_lag_and_the_tab_draws_it(ha_cluster: Cluster) -> None:
    with _connect(ha_cluster, standby=False) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS churn AS SELECT generate_series(1, 1000) AS n")
    collect_cluster(ha_cluster)
    points = MetricPoint.objects.filter(cluster=ha_cluster, metric="replication_lag_bytes")
    assert {p.labels for p in points} == {"member=member-2"}
    assert all(p.value is not None and p.value >= 0 for p in points)
    assert MetricPoint.objects.filter(cluster=ha_cluster, metric="replication_lag_seconds").exists()
    web = Client()
    web.force_login(ha_cluster.owner)
    tab = web.get(reverse("insights:tab", args=[ha_cluster.pk])).content.decode()
    assert 'data-chart="replication"' in tab and "nothing replicates" not in tab
    data = web.get(reverse("insights:data", args=[ha_cluster.pk])).json()
    chart = data["charts"]["replication"]
    assert chart["title"] == "Replication lag" and chart["unit"] == "B"
    assert [s["label"] for s in chart["series"]] == ["member-2"]
    scraped = exposition(Cluster.objects.filter(pk=ha_cluster.pk)).decode()
    assert 'pgpanel_replication_lag_bytes{cluster="db-sr",' in scraped and 'member="member-2"' in scraped


def test_a_one_member_cluster_has_no_standby_connection_and_no_lag_chart(owner: User) -> None:
    cluster = make_cluster_row(owner)
    with pytest.raises(ServiceError) as refused:
        services.connection_details(cluster, standby=True)
    assert refused.value.code == "cluster.no_standby" and refused.value.field == "node"
    with pytest.raises(CommandError, match="no standby nodes"):
        call_command("cluster", "connection", cluster.name, "--standby", stdout=io.StringIO())
    token = api_services.create_token(owner, "one", [Scope.READ])[1]
    response = Client().get(f"/v2/databases/{cluster.pk}", headers={"Authorization": f"Bearer {token}"})
    got = json.loads(response.content)["database"]
    assert got["standby_connection"] is None and got["standby_private_connection"] is None
    web = Client()
    web.force_login(owner)
    tab = web.get(reverse("insights:tab", args=[cluster.pk])).content.decode()
    assert "No standbys or replicas: nothing replicates." in tab
    assert 'data-chart="replication"' not in tab
    overview = web.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert "Standby (read-only)" not in overview


def test_the_private_connection_names_the_nodes_private_address(ha_cluster: Cluster) -> None:
    node = ha_cluster.node
    assert node is not None
    node.private_address = "10.1.2.3"
    node.save(update_fields=["private_address"])
    try:
        cluster = Cluster.objects.get(pk=ha_cluster.pk)
        details = services.connection_details(cluster, standby=True, private=True)
        assert (details.host, details.port) == ("10.1.2.3", cluster.standby_port)
        assert services.connection_details(cluster).host == cluster.public_host != "10.1.2.3"
    finally:
        node.private_address = ""
        node.save(update_fields=["private_address"])


def test_with_the_standby_stopped_the_primary_answers_reads_until_it_is_back(ha_cluster: Cluster) -> None:
    assert _in_recovery(ha_cluster)
    standby = ha_cluster.members.get(name="member-2")
    patroni.stop_member(ha.member_config_path(ha_cluster, standby))
    deadline = time.monotonic() + TIMEOUT
    answered_by_primary = False
    while time.monotonic() < deadline and not answered_by_primary:
        with contextlib.suppress(psycopg.OperationalError):  # the standby not marked down yet
            answered_by_primary = not _in_recovery(ha_cluster)
        time.sleep(0.2)
    assert answered_by_primary, "reads on the standby port were not answered by the primary"
    with _connect(ha_cluster, standby=True) as conn:
        assert conn.execute("SELECT count(*) FROM seen").fetchone() == (1,)
    # The standby back: the reads go to it again.
    patroni.start_member(
        ha.member_config_path(ha_cluster, standby),
        ha.member_log_path(ha_cluster, standby),
        isolation.os_user(ha_cluster),
        isolation.server_cgroup(ha_cluster),
        data_dir=standby.data_dir,
    )
    deadline = time.monotonic() + TIMEOUT
    back = False
    while time.monotonic() < deadline and not back:
        with contextlib.suppress(psycopg.OperationalError):
            back = _in_recovery(ha_cluster)
        time.sleep(0.2)
    assert back, "reads did not go back to the standby once it streamed again"


def test_a_node_added_with_a_private_address_gives_it_to_private_connections(owner: User) -> None:
    call_command(
        "node",
        "add",
        "db2",
        "--address",
        "db2.example.net",
        "--private-address",
        "10.0.0.2",
        "--ports",
        "31000-31099",
        "--data-dir",
        "/var/lib/pgpanel",
        "--ram",
        "8",
        "--vcpus",
        "2",
        stdout=io.StringIO(),
    )
    cluster = make_cluster_row(owner, node=Node.objects.get(name="db2"))
    token = api_services.create_token(owner, "private", [Scope.READ])[1]
    response = Client().get(f"/v2/databases/{cluster.pk}", headers={"Authorization": f"Bearer {token}"})
    got = json.loads(response.content)["database"]
    assert got["connection"]["host"] == "db2.example.net"
    assert got["private_connection"]["host"] == "10.0.0.2"
    assert got["private_connection"]["port"] == got["connection"]["port"]


def test_the_standby_port_is_one_of_its_own_in_the_nodes_range(owner: User) -> None:
    """Allocated with the others in one transaction: none of the cluster's, its members' or
    another cluster's ports."""
    first = services.create_cluster(
        owner, name="db-p1", plan_slug="db-s-1vcpu-2gb", num_nodes=3, enqueue=False
    )
    second = services.create_cluster(
        owner, name="db-p2", plan_slug="db-s-1vcpu-2gb", num_nodes=2, enqueue=False
    )
    one = services.create_cluster(owner, name="db-p3", plan_slug="db-s-1vcpu-2gb", enqueue=False)
    taken: list[int] = []
    for cluster in (first, second, one):
        taken += [p for p in (cluster.port, cluster.pooler_port, cluster.standby_port) if p]
        for port, rest in cluster.members.values_list("port", "rest_port"):
            taken += [port, rest]
    assert len(taken) == len(set(taken)), taken
    assert first.standby_port and second.standby_port and one.standby_port is None


@pytest.mark.django_db(transaction=True)
def test_pydo_reads_the_standby_and_private_connections(ha_cluster: Cluster, live_server: object) -> None:
    """Last in the module: a transactional test flushes the rows (the fixture cleans up after)."""
    from tests.test_pydo import pydo_client

    token = api_services.create_token(ha_cluster.owner, "pydo", [Scope.READ, Scope.VIEW_CREDENTIALS])[1]
    client = pydo_client(live_server.url, token)  # type: ignore[attr-defined]
    got = client.databases.get_cluster(str(ha_cluster.pk))["database"]
    assert got["num_nodes"] == 2
    assert got["standby_connection"]["port"] == ha_cluster.standby_port
    assert got["private_connection"]["port"] == ha_cluster.port
