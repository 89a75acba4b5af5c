"""The user's actions on pools: create, change, delete, each checked and applied under the cluster's lock.

Every change goes through ``panel.pools.engine.apply.apply_config`` inside a transaction that locks the
cluster row (on SQLite, IMMEDIATE transactions serialise every writer), so two concurrent changes
can never exceed the connection budget, and the files on disk always match a committed state or
the one being committed.
"""

from __future__ import annotations

import logging

from django.db import transaction

from panel.clusters.face import transitions
from panel.clusters.models import Cluster, Database, DatabaseUser
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.pools.engine.apply import apply_config, lock_cluster
from panel.pools.lib.pgbouncer_ini import (
    InvalidPoolName,
    validate_pool_name,
)
from panel.pools.models import ConnectionPool, PoolMode
from panel.pools.services import entries
from panel.pools.services.figures import connected_clients, poolable

log = logging.getLogger(__name__)

# --- validation ----------------------------------------------------------------------------------


def _require_poolable(cluster: Cluster) -> None:
    if not poolable(cluster):
        raise ServiceError(
            N_("Connection pools are available for clusters provisioned by this panel."),
            code="pool.unsupported",
        )
    transitions.require_serving(cluster)


def _check_fields(cluster: Cluster, *, database: str, user: str, mode: str, size: object) -> None:
    if not database or not cluster.databases.filter(name=database).exists():
        raise Database.not_found(database, field="database", code="pool.database_not_found")
    if user and not cluster.users.filter(name=user).exists():
        raise DatabaseUser.not_found(user, field="user", code="pool.user_not_found")
    if mode not in PoolMode.values:
        raise ServiceError(
            N_("The mode must be one of %(modes)s."),
            field="mode",
            code="pool.mode_invalid",
            params={"modes": ", ".join(PoolMode.values)},
        )
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ServiceError(
            N_("The size must be a whole number of at least 1."),
            field="size",
            code="pool.size_invalid",
            params={},
        )


def _check_budget(cluster: Cluster, size: int, *, replacing: ConnectionPool | None = None) -> None:
    others = cluster.pools.exclude(pk=replacing.pk) if replacing else cluster.pools.all()
    used = sum(others.values_list("size", flat=True))
    total = cluster.pool_connections or 0
    if used + size > total:
        raise ServiceError(
            N_(
                "Only %(left)s of the cluster's %(total)s connections are left for pools; "
                "a pool of %(size)s does not fit."
            ),
            field="size",
            code="pool.over_budget",
            params={"left": max(total - used, 0), "total": total, "size": size},
        )


def _check_name_free(cluster: Cluster, name: str) -> None:
    if cluster.pools.filter(name=name).exists():
        raise ServiceError(
            N_("A pool named “%(name)s” already exists."),
            field="name",
            code="pool.name_taken",
            params={"name": name},
        )


# --- actions -------------------------------------------------------------------------------------


@on_node(timeout=60)
def create_pool(
    cluster: Cluster, name: str, database: str, user: str | None, mode: str, size: int
) -> ConnectionPool:
    """Create a pool and return once PgBouncer serves it; ``user`` empty = the inbound user."""
    _require_poolable(cluster)
    try:
        validate_pool_name(name)
    except InvalidPoolName as exc:
        raise ServiceError(exc.template, field="name", code=exc.code, params=exc.params) from None
    user = user or ""
    _check_fields(cluster, database=database, user=user, mode=mode, size=size)
    _check_name_free(cluster, name)
    _check_budget(cluster, size)
    with transaction.atomic():
        locked = lock_cluster(cluster)
        # Checked again under the lock: another request may have taken the name or the budget.
        _check_name_free(locked, name)
        _check_budget(locked, size)
        pool = ConnectionPool.objects.create(
            cluster=locked, name=name, database=database, user=user, mode=mode, size=size
        )
        apply_config(locked)
        transaction.on_commit(lambda: entries.push(cluster))  # the pools on the other member nodes
    transitions.log_event(
        cluster,
        "pool-created",
        Message(N_("Pool “%(name)s” created (%(mode)s, size %(size)s)."), name=name, mode=mode, size=size),
    )
    return pool


@on_node(timeout=60)
def update_pool(
    pool: ConnectionPool, database: str, user: str | None, mode: str, size: int
) -> ConnectionPool:
    """Replace everything but the name; PgBouncer applies it online."""
    cluster = pool.cluster
    _require_poolable(cluster)
    user = user or ""
    _check_fields(cluster, database=database, user=user, mode=mode, size=size)
    _check_budget(cluster, size, replacing=pool)
    with transaction.atomic():
        locked = lock_cluster(cluster)
        _check_budget(locked, size, replacing=pool)
        if not ConnectionPool.objects.filter(pk=pool.pk).update(
            database=database, user=user, mode=mode, size=size
        ):
            raise ServiceError(
                N_("The pool “%(name)s” no longer exists."), code="pool.not_found", params={"name": pool.name}
            )
        apply_config(locked)
        transaction.on_commit(lambda: entries.push(cluster))
    pool.refresh_from_db()
    transitions.log_event(
        cluster,
        "pool-updated",
        Message(
            N_("Pool “%(name)s” changed (%(mode)s, size %(size)s)."), name=pool.name, mode=mode, size=size
        ),
    )
    return pool


@on_node(timeout=60)
def delete_pool(pool: ConnectionPool) -> int:
    """Remove a pool; PgBouncer drops its clients at once. Returns how many were connected."""
    cluster = pool.cluster
    clients = connected_clients(pool)
    with transaction.atomic():
        locked = lock_cluster(cluster)
        ConnectionPool.objects.filter(pk=pool.pk).delete()
        apply_config(locked)
        transaction.on_commit(lambda: entries.push(cluster))
    transitions.log_event(
        cluster,
        "pool-deleted",
        Message(
            N_("Pool “%(name)s” deleted; %(n)s connected clients were disconnected."),
            name=pool.name,
            n=clients,
        ),
    )
    return clients
