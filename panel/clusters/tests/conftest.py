"""Fixtures of the view tests: cluster rows that need no running server."""

from __future__ import annotations

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
