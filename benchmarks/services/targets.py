"""Where pgbench connects: the cluster must serve, the pool and user must exist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from benchmarks.lib import pgbench_command as cmd
from panel.clusters.face import transitions
from panel.clusters.models import Cluster, DatabaseUser
from panel.core.errors import N_, ServiceError
from panel.pools.face import MAX_CLIENT_CONN
from panel.pools.models import ConnectionPool

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ResolvedTarget:
    """Where pgbench connects for a run, the password, and what the warnings need to know."""

    connection: cmd.ConnectionTarget
    password: str
    pool: ConnectionPool | None
    max_connections: int | None


class Where(TypedDict, total=False):
    """Where a launch asks a run to connect: through a pool, or to a database directly, and as
    which user (None, or not given: the pool's or the cluster's default)."""

    pool: ConnectionPool | None
    database: str | None
    user: str | None


def require_serving(cluster: Cluster) -> None:
    """A benchmark needs the server up now: the status read again, the error on the form's cluster."""
    transitions.require_serving(cluster, fresh=True, field="cluster")


def require_database(cluster: Cluster, database: str) -> None:
    """The database must exist on the cluster (the error on the form's database)."""
    if not cluster.databases.filter(name=database).exists():
        raise ServiceError(
            N_("No database named “%(name)s” on this cluster."),
            field="database",
            code="database.not_found",
            params={"name": database},
        )


def _current_pool(
    cluster: Cluster, pool: ConnectionPool | None, pool_name: str = ""
) -> ConnectionPool | None:
    if pool is None and not pool_name:
        return None
    query = ConnectionPool.objects.filter(cluster=cluster)
    found = query.filter(pk=pool.pk).first() if pool is not None else query.filter(name=pool_name).first()
    if found is None:
        name = pool.name if pool is not None else pool_name
        raise ServiceError(
            N_("The pool “%(name)s” no longer exists."),
            field="pool",
            code="pool.not_found",
            params={"name": name},
        )
    return found


def _password(cluster: Cluster, user: str) -> str:
    try:
        return cluster.users.get(name=user).password
    except DatabaseUser.DoesNotExist:
        raise ServiceError(
            N_("No user named “%(name)s” on this cluster."),
            field="user",
            code="user.not_found",
            params={"name": user},
        ) from None


def resolve_target(
    cluster: Cluster,
    *,
    pool: ConnectionPool | None = None,
    database: str | None = None,
    user: str | None = None,
    pool_name: str = "",
) -> ResolvedTarget:
    """The load generator connects over TCP on loopback with TLS (sslmode require), like a client:
    directly to the server port, or to the pooler port with the pool name as database."""
    current = _current_pool(cluster, pool, pool_name)
    if current is not None:
        if current.user and user and user != current.user:
            raise ServiceError(
                N_("The pool “%(pool)s” always logs in as “%(user)s”."),
                field="user",
                code="pool.user_fixed",
                params={"pool": current.name, "user": current.user},
            )
        user_name = current.user or user or cluster.admin_user
        target = cmd.ConnectionTarget(
            LOOPBACK, int(cluster.pooler_port or 0), user_name, current.name, "require"
        )
        # PgBouncer's max_client_conn as the pools app writes it (lower only under a tight fd limit).
        return ResolvedTarget(target, _password(cluster, user_name), current, MAX_CLIENT_CONN)
    db_name = database or cluster.default_database
    require_database(cluster, db_name)
    user_name = user or cluster.admin_user
    host = LOOPBACK if cluster.is_local else cluster.host
    if not cluster.is_local and cluster.host_address and cluster.sslmode != "verify-full":
        # The address attach checked, not what the name resolves to now (issue 29); verify-full
        # needs the name, and a server elsewhere would not have its certificate.
        host = cluster.host_address
    sslmode = "require" if cluster.is_local else cluster.sslmode
    target = cmd.ConnectionTarget(host, int(cluster.port or 0), user_name, db_name, sslmode)
    limit = cluster.pool_connections  # max_connections minus the superuser-reserved slots
    return ResolvedTarget(target, _password(cluster, user_name), None, limit)
