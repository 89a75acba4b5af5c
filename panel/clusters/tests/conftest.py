"""Fixtures of the cluster tests: cluster rows that need no running server, and how a client
reaches a cluster that does run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from panel.clusters.models import (
    Cluster,
    ClusterKind,
    ClusterStatus,
    Database,
    DatabaseUser,
    Node,
    credentials,
)
from panel.clusters.services import nodes, transitions
from panel.clusters.standbys.lib import patroni
from tests.fixtures.clusters import module_cluster

ADMIN_PASSWORD = "admin-secret-Zq7xK2"
APP_PASSWORD = "app-secret-Wm3pR8"
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def make_cluster_row(owner: User, name: str = "db-row", **fields: object) -> Cluster:
    """An online local cluster as the database sees it; no PostgreSQL runs behind it."""
    values: dict[str, object] = {
        "kind": ClusterKind.LOCAL,
        "version": "15",
        "plan_slug": "db-s-2vcpu-4gb",
        "status": ClusterStatus.ONLINE,
        "progress": 100,
        "port": 26900,
        "pooler_port": 26901,
        "ca_certificate": CA_PEM,
    }
    values.update(fields)
    cluster = Cluster.objects.create(owner=owner, name=name, **values)
    admin = DatabaseUser(cluster=cluster, name="doadmin", is_protected=True)
    admin.password = ADMIN_PASSWORD
    admin.save()
    app = DatabaseUser(cluster=cluster, name="app")
    app.password = APP_PASSWORD
    app.save()
    Database.objects.create(cluster=cluster, name="defaultdb", is_protected=True)
    Database.objects.create(cluster=cluster, name="appdb")
    transitions.log_event(cluster, "created", "Cluster requested.")
    return cluster


def module_cluster_fixture(
    username: str, name: str, plan: str = "db-s-1vcpu-1gb"
) -> Callable[..., Iterator[Cluster]]:
    """A module-scoped fixture of one real cluster (``module_cluster``) owned by ``username``;
    its name in the module is the name it is assigned to (``source = module_cluster_fixture(…)``)."""

    @pytest.fixture(scope="module")
    def made(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
        with module_cluster(django_db_blocker, username, name, plan) as cluster:
            yield cluster

    return made


def refreshed_fixture(name: str) -> Callable[..., Cluster]:
    """A test's fixture of the module's cluster fixture ``name``, its row read again (a test
    before may have changed it): ``fresh = refreshed_fixture("source")``."""

    @pytest.fixture
    def refreshed(request: pytest.FixtureRequest) -> Cluster:
        cluster: Cluster = request.getfixturevalue(name)
        # The test's database after the module's cluster: its rows are not the test's to roll back.
        request.getfixturevalue("db")
        cluster.refresh_from_db()
        return cluster

    return refreshed


def make_node(
    name: str,
    first: int = 40000,
    *,
    ram_gb: int = 8,
    vcpus: int = 4,
    last: int | None = None,
    beat: bool = True,
) -> Node:
    """A node registered as ``nodes.add_node`` does, its ports ``first``…``last`` (100 unless
    said); with ``beat`` it has just sent a heartbeat (PostgreSQL 15), so it counts as alive."""
    node = nodes.add_node(
        name,
        address=f"{name}.example.net",
        ports=(first, last or first + 99),
        data_dir=f"/srv/{name}",
        ram_gb=ram_gb,
        vcpus=vcpus,
    )
    if beat:
        Node.objects.filter(pk=node.pk).update(last_heartbeat=timezone.now(), versions="15")
        node.refresh_from_db()
    return node


def ha_cluster(**changes: object) -> patroni.HaCluster:
    """What Patroni's configuration of a cluster with standbys is made from (pure; no member
    unless ``changes`` names them)."""
    cluster = patroni.HaCluster(
        scope="cluster-x",
        etcd_hosts=("127.0.0.1:2379",),
        bin_dir="/usr/lib/postgresql/15/bin",
        socket_dir="/data/run",
        superuser="pgpanel",
        replication_user="pgpanel_member",
        replication_password="secret",
        max_connections=50,
        members=(),
        panel_conf="/data/ha/postgresql.base.conf",
        hba_file="/data/pgdata/pg_hba.conf",
        ident_file="/data/pgdata/pg_ident.conf",
        on_role_change="python cb.py",
        rest_username="panel-1a2b3c4d",
        rest_password="rest-secret",
    )
    return dataclasses.replace(cluster, **changes)


@pytest.fixture
def cluster_row(owner: User) -> Cluster:
    return make_cluster_row(owner)


def client_params(cluster: Cluster, **overrides: object) -> dict[str, object]:
    """libpq parameters of a client on the cluster's TCP port (TLS): doadmin on defaultdb unless
    ``overrides`` say otherwise."""
    params: dict[str, object] = {
        "host": "127.0.0.1",
        "port": cluster.port,
        "user": "doadmin",
        "dbname": "defaultdb",
        "sslmode": "require",
        "connect_timeout": 5,
    }
    params.update(overrides)
    if "password" not in params:
        params["password"] = cluster.users.get(name=params["user"]).password
    return params


def connect_as_client(cluster: Cluster, **overrides: object) -> psycopg.Connection:
    return psycopg.connect(**client_params(cluster, **overrides))  # type: ignore[arg-type]


def can_log_in(cluster: Cluster, user: str, password: str, dbname: str = "defaultdb") -> bool:
    """Whether ``user`` logs in with ``password``. Only PostgreSQL refusing the login counts as
    False; any other failure (the server not answering) fails the test instead."""
    try:
        with connect_as_client(cluster, user=user, password=password, dbname=dbname) as conn:
            return conn.execute("SELECT current_user").fetchone() == (user,)
    except psycopg.OperationalError as exc:
        assert "password authentication failed" in str(exc) or "does not exist" in str(exc), exc
        return False


def superuser_in(cluster: Cluster, dbname: str) -> psycopg.Connection:
    """The panel's superuser inside a tenant's database: the panel itself never goes there
    (``dbconn.admin_connection`` refuses), tests do, to reset statistics there."""
    from django.conf import settings

    return psycopg.connect(
        host=str(cluster.socket_dir),
        port=cluster.port,
        user=settings.PANEL_SUPERUSER,
        password=credentials.superuser_password(cluster),
        dbname=dbname,
        options="-c search_path=pg_catalog,pg_temp",
        autocommit=True,
        connect_timeout=5,
    )
