"""What the pool pages show: the budget, live ``SHOW POOLS`` figures, the server slots the pools hold.

Reads only: nothing here changes PgBouncer or the database. Every reader answers None (or zero)
when PgBouncer is down or does not answer, so a page polls it without a try.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings

from panel.clusters.face import database_user, dbconn
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, ServiceError
from panel.pools.engine import console, supervisor
from panel.pools.engine.console import admin_console
from panel.pools.engine.disk import bouncer_files
from panel.pools.lib.admin_console import PoolRow, clients_by_state, pool_totals
from panel.pools.models import ConnectionPool, Pooler, PoolerStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolStats:
    """Live figures of one pool, summed over its users (an inbound pool has one row per role)."""

    clients_active: int
    clients_waiting: int
    servers_active: int
    servers_idle: int
    max_wait_seconds: float

    @property
    def saturated(self) -> bool:
        return self.clients_waiting > 0


@dataclass(frozen=True)
class SlotUsage:
    """The server's connection slots now: what the pools hold, and what is left for direct clients.

    PgBouncer keeps a pool's server connections open after its load stops (until
    ``server_idle_timeout``), each holding one of the server's slots: after a busy run the pools
    may hold every slot a non-superuser may use, and direct clients are refused with "remaining
    connection slots are reserved".
    """

    # Server connections the pools use now (logging in included) and keep idle.
    active: int
    idle: int
    # max_connections − superuser_reserved_connections: the slots a direct client may take.
    limit: int | None
    # Client backends on the server now, the pools' servers included; None when unknown.
    backends: int | None
    idle_timeout: int

    @property
    def held(self) -> int:
        return self.active + self.idle

    @property
    def direct_left(self) -> int | None:
        if self.limit is None or self.backends is None:
            return None
        return max(self.limit - self.backends, 0)

    @property
    def locked_out(self) -> bool:
        """Direct clients are refused now and the pools are (at least partly) why."""
        return self.direct_left == 0 and self.held > 0


@dataclass(frozen=True)
class PoolsOverview:
    """Everything the Connection Pools tab draws: budget, pools with live figures, PgBouncer state."""

    used: int
    total: int
    pools: list[tuple[ConnectionPool, PoolStats | None]]
    running: bool
    error_message: str
    slots: SlotUsage | None = None

    @property
    def remaining(self) -> int:
        return max(self.total - self.used, 0)


@on_node(timeout=15)
def pooler_running(cluster: Cluster) -> bool:
    return (
        bool(cluster.is_local and cluster.pooler_port)
        and supervisor.running_pid(bouncer_files(cluster)) is not None
    )


def poolable(cluster: Cluster) -> bool:
    """Whether the panel provisioned the cluster with a pooler port and a pool budget."""
    return bool(cluster.is_local and cluster.pooler_port and cluster.pool_connections)


def pool_budget(cluster: Cluster) -> tuple[int, int]:
    """``(used, total)``: connections allocated to pools, and the plan's ``25 × GB − 3``."""
    used = sum(cluster.pools.values_list("size", flat=True))
    return used, cluster.pool_connections or 0


_NO_TRAFFIC = PoolStats(0, 0, 0, 0, 0.0)


def _show_pools(cluster: Cluster, pooler: Pooler | None = None) -> list[PoolRow] | None:
    """``SHOW POOLS``; None when PgBouncer is down or does not answer."""
    if not pooler_running(cluster):
        return None
    try:
        with admin_console(cluster, pooler) as conn:
            return console.show_pools(conn)
    except (console.ConsoleError, ValueError) as exc:
        log.info("SHOW POOLS on %s failed: %s", cluster.pk, exc)
        return None


def _stats_by_pool(rows: list[PoolRow]) -> dict[str, PoolStats]:
    return {
        name: PoolStats(t.cl_active, t.cl_waiting, t.servers_active, t.servers_idle, t.maxwait)
        for name, t in pool_totals(rows).items()
    }


def _live_stats(cluster: Cluster, pooler: Pooler | None = None) -> dict[str, PoolStats] | None:
    rows = _show_pools(cluster, pooler)
    return None if rows is None else _stats_by_pool(rows)


@on_node(timeout=15)
def pool_stats(cluster: Cluster) -> dict[str, PoolStats] | None:
    """Live ``SHOW POOLS`` figures per pool name; None when PgBouncer is down or does not answer."""
    live = _live_stats(cluster)
    if live is None:
        return None
    return {name: live.get(name, _NO_TRAFFIC) for name in cluster.pools.values_list("name", flat=True)}


def _server_slots(cluster: Cluster) -> tuple[int | None, int | None]:
    """``(limit, backends)`` from the server itself, or ``(None, None)`` when it does not answer.

    The superuser's connection in the maintenance database (never a tenant's): it uses a reserved
    slot, so it still answers when a non-superuser would be refused, which is when this matters.
    The panel's own maintenance sessions (its superuser, ``application_name`` pgpanel) are not
    counted: they go into the reserved slots when the others run short, and one is often the
    previous count's, whose backend still exits a moment after the panel closed it (two launches in
    a row, under load, saw one slot fewer than there was). Patroni's sessions, and every tenant's,
    count.
    """
    try:
        with dbconn.admin_connection(cluster) as conn:
            row = conn.execute(
                "SELECT current_setting('max_connections')::int"
                " - current_setting('superuser_reserved_connections')::int,"
                " (SELECT count(*) FROM pg_catalog.pg_stat_activity"
                "  WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid()"
                "  AND NOT (usename = %s AND application_name = %s))",
                [settings.PANEL_SUPERUSER, dbconn.APPLICATION_NAME],
            ).fetchone()
    except (dbconn.DatabaseError, OSError) as exc:
        log.info("counting backends on %s failed: %s", cluster.pk, exc)
        return None, None
    if row is None:
        return None, None
    return int(row[0]), int(row[1])


def _slot_usage(cluster: Cluster, rows: list[PoolRow], *, always_count: bool = True) -> SlotUsage:
    totals = pool_totals(rows).values()
    active = sum(t.servers_active for t in totals)
    idle = sum(t.servers_idle for t in totals)
    # Without held servers the pools lock nobody out: the Overview's poll then skips the server.
    count = cluster.is_serving and (always_count or active + idle > 0)
    limit, backends = _server_slots(cluster) if count else (None, None)
    return SlotUsage(
        active=active,
        idle=idle,
        limit=limit,
        backends=backends,
        idle_timeout=settings.PANEL_POOL_SERVER_IDLE_TIMEOUT,
    )


@dataclass(frozen=True)
class ServerRoom:
    """The server's connection slots now, for a client that is about to connect (a benchmark)."""

    # max_connections − superuser_reserved_connections, and the client backends on the server now
    # (the pools' servers included).
    limit: int
    backends: int
    # Server connections each pool holds now (in use, logging in or idle), by pool name.
    held_by_pool: dict[str, int]

    @property
    def free(self) -> int:
        return max(self.limit - self.backends, 0)

    @property
    def held(self) -> int:
        return sum(self.held_by_pool.values())


def server_room(cluster: Cluster) -> ServerRoom | None:
    """How many slots are free and how many the pools hold; None when the server does not answer.
    Reads only: the pools' servers stay open (production traffic through a pool would notice).
    Runs where the cluster lives (its callers are ``@on_node`` services)."""
    rows = _show_pools(cluster) if cluster.pools.exists() else None
    held = {name: t.servers_active + t.servers_idle for name, t in pool_totals(rows or []).items()}
    try:
        limit, backends = _server_slots(cluster)
    except ValueError as exc:  # the stored password unreadable: the run's own connection says so
        log.warning("counting backends on %s failed: %s", cluster.pk, exc)
        return None
    if limit is None or backends is None:
        return None
    return ServerRoom(limit=limit, backends=backends, held_by_pool={k: v for k, v in held.items() if v})


@on_node(timeout=15)
def slot_usage(cluster: Cluster) -> SlotUsage | None:
    """The slots the pools hold and the direct headroom; None without pools or a running PgBouncer.

    Polled by the Overview's warning: one ``SHOW POOLS`` and one count of the server's backends.
    """
    if not poolable(cluster) or not cluster.pools.exists():
        return None
    rows = _show_pools(cluster)
    return None if rows is None else _slot_usage(cluster, rows, always_count=False)


@on_node(timeout=15)
def pools_overview(cluster: Cluster) -> PoolsOverview:
    # Polled every 3 s: one query for the pools, one for the pooler, one SHOW POOLS, and (with a
    # running PgBouncer) one count of the server's backends for the direct headroom.
    pools = list(cluster.pools.all())
    pooler = Pooler.objects.filter(cluster=cluster).first()
    rows = _show_pools(cluster, pooler) if pools else None
    live = _stats_by_pool(rows) if rows is not None else None
    return PoolsOverview(
        used=sum(pool.size for pool in pools),
        total=cluster.pool_connections or 0,
        pools=[(pool, live.get(pool.name, _NO_TRAFFIC) if live is not None else None) for pool in pools],
        running=live is not None,
        error_message=pooler.error_message if pooler and pooler.status == PoolerStatus.ERROR else "",
        slots=_slot_usage(cluster, rows) if rows is not None else None,
    )


@on_node(timeout=15)
def connected_clients(pool: ConnectionPool) -> int:
    """Clients connected to the pool now (a delete disconnects them); 0 when PgBouncer is down."""
    if not pooler_running(pool.cluster):
        return 0
    try:
        with admin_console(pool.cluster) as conn:
            clients = console.show_clients(conn)
    except (console.ConsoleError, ValueError):
        return 0
    return sum(clients_by_state(clients, pool.name).values())


def pool_connection_details(pool: ConnectionPool, user: str | None = None) -> ConnectionDetails:
    """How a client reaches the pool: pooler host and port, database = pool name, sslmode require."""
    cluster = pool.cluster
    if pool.user:
        if user and user != pool.user:
            raise ServiceError(
                N_("The pool “%(pool)s” always logs in as “%(user)s”."),
                field="user",
                code="pool.user_fixed",
                params={"pool": pool.name, "user": pool.user},
            )
        name = pool.user
    else:
        name = user or cluster.admin_user
    db_user = database_user(cluster, name)
    # The pools on the cluster's other member nodes after its own (``entries``): libpq tries the
    # next host when one does not answer; every PgBouncer reaches the primary.
    more = tuple(
        (e.node.address, e.pooler_port) for e in sorted(cluster.entries.all(), key=lambda e: e.node.name)
    )
    return ConnectionDetails(
        db_user.name,
        db_user.password,
        cluster.public_host,
        int(cluster.pooler_port or 0),
        pool.name,
        more_hosts=more if cluster.is_ha else (),
    )
