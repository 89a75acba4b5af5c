"""Trusted sources on a real cluster and its real PgBouncer: an address that is not trusted is
refused by both and its open server session ends, while a trusted one keeps working; a change
that cannot be applied leaves the previous rows and files in force.

The cluster listens on 127.0.0.1 and ::1, so one machine has two client addresses: the replayed
"outsider" connects from 127.0.0.1, the trusted client from ::1."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from panel.clusters import services
from panel.clusters.engine import isolation
from panel.clusters.lib import firewall as firewall_rules
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, DatabaseUser, TrustedSource
from panel.clusters.models.firewall import trusted_source_values
from panel.clusters.services import firewall
from panel.clusters.tests.conftest import client_params, make_cluster_row
from panel.core.errors import ServiceError
from panel.pools import services as pools
from tests.fixtures.clusters import make_local_cluster

pytestmark = pytest.mark.integration

HTMX = {"HX-Request": "true"}
OUTSIDER = "127.0.0.1"
TRUSTED = "::1"


@pytest.fixture
def cluster(owner: User, transactional_db: None, settings: object) -> Iterator[Cluster]:
    """A running cluster with a transaction pool, its server and PgBouncer on both loopbacks."""
    settings.PANEL_LISTEN_ADDRESSES = f"{OUTSIDER},{TRUSTED}"  # type: ignore[attr-defined]
    cluster = make_local_cluster(owner, name="db-fw")
    pools.create_pool(cluster, "fw-pool", "defaultdb", None, "transaction", 5)
    yield cluster
    pools.stop_pgbouncer(cluster)
    cluster.refresh_from_db()
    services.delete_cluster(cluster, confirm_name=cluster.name)


def server(cluster: Cluster, host: str) -> psycopg.Connection:
    return psycopg.connect(**client_params(cluster, host=host))  # type: ignore[arg-type]


def pooler(cluster: Cluster, host: str) -> psycopg.Connection:
    params = client_params(cluster, host=host, port=cluster.pooler_port, dbname="fw-pool")
    return psycopg.connect(**params)  # type: ignore[arg-type]


def who(conn: psycopg.Connection) -> str:
    with conn:
        row = conn.execute("SELECT current_user").fetchone()
    assert row is not None
    return row[0]


def test_only_trusted_sources_reach_the_server_and_the_pools(cluster: Cluster, owner_client: Client) -> None:
    # Open: both addresses get in, and a session from each stays open.
    assert who(server(cluster, OUTSIDER)) == who(pooler(cluster, OUTSIDER)) == "doadmin"
    outsider_session, trusted_session = server(cluster, OUTSIDER), server(cluster, TRUSTED)

    page = owner_client.post(
        reverse("clusters:trusted-source-add", args=[cluster.pk]), {"source": " ::1/128 "}, headers=HTMX
    ).content.decode()
    assert "Trusted source “::1” added." in page and 'data-source="::1"' in page
    # The panel's benchmarks come from 127.0.0.1: the section says they are shut out now.
    assert "The panel's benchmarks connect from 127.0.0.1" in page
    assert trusted_source_values(cluster) == ["::1"]

    # The replayed attack: a client from an address that is not trusted, with the right password.
    with pytest.raises(psycopg.OperationalError, match='no pg_hba.conf entry for host "127.0.0.1"'):
        server(cluster, OUTSIDER)
    with pytest.raises(psycopg.OperationalError, match="login rejected"):
        pooler(cluster, OUTSIDER)
    # Its session opened before is ended; the trusted one keeps its own.
    with pytest.raises(psycopg.OperationalError):
        outsider_session.execute("SELECT 1")
    assert trusted_session.execute("SELECT 1").fetchone() == (1,)
    trusted_session.close()
    # The legitimate client beside it: the trusted address, on the server and through the pool.
    assert who(server(cluster, TRUSTED)) == who(pooler(cluster, TRUSTED)) == "doadmin"
    event = cluster.events.filter(kind="trusted-sources").first()
    assert event is not None and "1 open session(s) from other addresses ended" in event.message

    page = owner_client.post(
        reverse("clusters:trusted-source-remove", args=[cluster.pk]), {"source": "::1"}, headers=HTMX
    ).content.decode()
    assert "Trusted source “::1” removed." in page and "No trusted sources" in page
    assert who(server(cluster, OUTSIDER)) == who(pooler(cluster, OUTSIDER)) == "doadmin"


def test_a_change_pgbouncer_cannot_take_leaves_everything_as_it_was(cluster: Cluster) -> None:
    hba = (cluster.pgdata / "pg_hba.conf").read_text()
    # Drift: a fixed-user pool whose user the panel no longer knows cannot be rendered.
    pools.create_pool(cluster, "fixed", "defaultdb", "doadmin", "session", 1)
    DatabaseUser.objects.filter(cluster=cluster, name="doadmin").update(name="gone")

    with pytest.raises(ServiceError, match="no longer exists"):
        firewall.set_trusted_sources(cluster, [TRUSTED])

    assert trusted_source_values(cluster) == []
    assert (cluster.pgdata / "pg_hba.conf").read_text() == hba
    assert not cluster.events.filter(kind="trusted-sources").exists()
    DatabaseUser.objects.filter(cluster=cluster, name="gone").update(name="doadmin")
    assert who(server(cluster, OUTSIDER)) == "doadmin"


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"kind": ClusterKind.EXTERNAL}, "attached server keeps its own pg_hba.conf"),
        ({"status": ClusterStatus.STOPPED}, "start it first"),
    ],
)
def test_it_refuses_clusters_it_cannot_apply_to(owner: User, fields: dict, words: str) -> None:
    cluster = make_cluster_row(owner, **fields)
    with pytest.raises(ServiceError, match=words):
        firewall.add_trusted_source(cluster, "203.0.113.7")
    assert trusted_source_values(cluster) == []


@pytest.mark.django_db
def test_a_bad_value_is_a_field_error_and_changes_nothing(owner: User, owner_client: Client) -> None:
    cluster = make_cluster_row(owner)
    with pytest.raises(ServiceError) as refused:
        firewall.set_trusted_sources(cluster, ["203.0.113.7", "db.example.com"])
    assert refused.value.field == "source" and "host names are not supported" in refused.value.message

    page = owner_client.post(
        reverse("clusters:trusted-source-add", args=[cluster.pk]), {"source": "10.1.2.3/8"}, headers=HTMX
    ).content.decode()
    assert 'id="settings-trusted-sources"' in page and "Did you mean 10.0.0.0/8" in page
    assert trusted_source_values(cluster) == []
    # The limit on sources holds one at a time too, not only for a whole list.
    TrustedSource.objects.bulk_create(
        TrustedSource(cluster=cluster, value=f"10.0.{n}.0/24") for n in range(firewall_rules.MAX_SOURCES)
    )
    with pytest.raises(ServiceError, match="at most 100 trusted sources") as refused:
        firewall.add_trusted_source(cluster, "203.0.113.7")
    assert refused.value.field == "source"
    assert len(trusted_source_values(cluster)) == firewall_rules.MAX_SOURCES
    TrustedSource.objects.filter(cluster=cluster).delete()
    # Named in any spelling, a source is looked up in the stored one.
    with pytest.raises(ServiceError, match="“203.0.113.7” is not a trusted source"):
        firewall.remove_trusted_source(cluster, "203.0.113.7/32")


def test_a_pg_hba_conf_postgresql_cannot_read_is_refused_before_the_reload(
    local_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = local_cluster
    render = isolation.render_hba
    # The one injected fault: a renderer that writes a line PostgreSQL cannot parse.
    monkeypatch.setattr(
        isolation,
        "render_hba",
        lambda *args, **kwargs: render(*args, **kwargs) + "hostssl all all 10.0.0.0/99 md5\n",
    )
    with pytest.raises(ServiceError, match=r"cannot read the new pg_hba.conf: line \d+: .*10.0.0.0/99"):
        firewall.add_trusted_source(cluster, "203.0.113.7")
    assert trusted_source_values(cluster) == []
    assert not cluster.events.filter(kind="trusted-sources").exists()

    monkeypatch.undo()
    assert isolation.refresh_server_auth(cluster)  # the rows' file again, read and loaded
    assert isolation.hba_errors(cluster) == []
    assert who(server(cluster, OUTSIDER)) == "doadmin"
