"""Fixtures of the cluster tests: cluster rows that need no running server, and how a client
reaches a cluster that does run."""

from __future__ import annotations

import psycopg
import pytest
from django.contrib.auth.models import User

from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Database, DatabaseUser

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
    cluster.log_event("created", "Cluster requested.")
    return cluster


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
        password=cluster.superuser_password,
        dbname=dbname,
        options="-c search_path=pg_catalog,pg_temp",
        autocommit=True,
        connect_timeout=5,
    )
