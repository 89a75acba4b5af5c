"""A cluster's pools, users, databases and events in the API's shapes (the managed service's
``pool``, ``user``, ``db`` and ``event`` objects), from the apps' own rows and services."""

from __future__ import annotations

import base64
from typing import Any

from panel.api.services.databases import connection_object
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster, ClusterEvent, Database, DatabaseUser
from panel.core.errors import ServiceError
from panel.managed.face import logical_replication
from panel.pools.face import pool_connection_details
from panel.pools.models import ConnectionPool

ROLE_PRIMARY = "primary"  # the cluster's admin user, as the managed service calls doadmin
ROLE_NORMAL = "normal"


def pool(row: ConnectionPool, *, with_password: bool) -> dict[str, Any]:
    """One pool: ``user`` empty for an inbound-user pool (whoever connects), and a non-null
    ``connection`` on the pooler's port with the pool's name as the database (an inbound pool's
    connection logs in as the admin user, as the Pools tab shows it)."""
    cluster = row.cluster
    try:
        details = pool_connection_details(row)
    except ServiceError:  # its user is gone (the pool is then failing): still a connection object
        details = ConnectionDetails(
            row.user or cluster.admin_user, "", cluster.public_host, int(cluster.pooler_port or 0), row.name
        )
    return {
        "name": row.name,
        "mode": row.mode,
        "size": row.size,
        "db": row.database,
        "user": row.user,
        "connection": connection_object(details, with_password=with_password),
    }


def user(row: DatabaseUser, *, with_password: bool) -> dict[str, Any]:
    """One database user: ``primary`` for the admin user, ``normal`` for the others; the
    password only ``with_password``; ``pg_allow_replication`` as granted (logical replication
    only, panel.managed.services.logical_replication)."""
    return {
        "name": row.name,
        "role": ROLE_PRIMARY if row.is_protected else ROLE_NORMAL,
        "password": row.password if with_password else "",
        "settings": {"pg_allow_replication": logical_replication.is_allowed(row)},
    }


def db(row: Database) -> dict[str, Any]:
    return {"name": row.name}


def event(row: ClusterEvent) -> dict[str, Any]:
    """One entry of the cluster's event log, with the managed service's field names."""
    return {
        "id": str(row.pk),
        "cluster_name": row.cluster.name,
        "event_type": row.kind,
        "create_time": row.created_at,
        "level": row.level,
        "message": row.shown,  # in the language the client asks for
    }


def ca(cluster: Cluster) -> dict[str, Any]:
    """The CA certificate that signed the cluster's server certificate, base64 of the PEM."""
    if not cluster.ca_certificate:
        raise ServiceError(
            "This cluster has no CA certificate (an attached server keeps its own).", code="ca.not_found"
        )
    return {"certificate": base64.b64encode(cluster.ca_certificate.encode()).decode()}
