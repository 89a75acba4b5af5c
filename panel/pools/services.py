"""One function per action on connection pools, and the hooks the cluster services call.

Every change goes through ``apply_config``: render ``pgbouncer.ini`` and the auth file from the
database → validate (the pure renderer refuses what PgBouncer would misparse) → write atomically,
keeping ``.prev`` → start PgBouncer, RELOAD it, or restart it for settings a RELOAD ignores →
verify with ``SHOW DATABASES`` (RELOAD answers success even for a broken file) → on a mismatch put
the previous files back and report PgBouncer's own log line.

Pool changes run inside a transaction that locks the cluster row (on SQLite, IMMEDIATE
transactions serialise every writer), so two concurrent changes can never exceed the connection
budget, and the files on disk always match a committed state or the one being committed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from panel.clusters import dbconn
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, DatabaseUser, EventLevel
from panel.core.errors import ServiceError
from panel.pools import console, supervisor
from panel.pools.apply import (
    admin_console,
    apply_config,
    bouncer_files,
    lock_cluster,
)
from panel.pools.lib.admin_console import PoolRow, clients_by_state
from panel.pools.lib.pgbouncer_ini import (
    InvalidPoolName,
    validate_pool_name,
)
from panel.pools.models import ConnectionPool, Pooler, PoolerStatus, PoolMode

log = logging.getLogger(__name__)

# --- what the pages show -------------------------------------------------------------------------


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


def pooler_running(cluster: Cluster) -> bool:
    return (
        bool(cluster.is_local and cluster.pooler_port)
        and supervisor.running_pid(bouncer_files(cluster)) is not None
    )


def pool_budget(cluster: Cluster) -> tuple[int, int]:
    """``(used, total)``: connections allocated to pools, and the plan's ``25 × GB − 3``."""
    used = sum(cluster.pools.values_list("size", flat=True))
    return used, cluster.pool_connections or 0


_NO_TRAFFIC = PoolStats(0, 0, 0, 0, 0.0)


def _idle_servers(row: PoolRow) -> int:
    # sv_used: idle longer than server_check_delay; sv_tested: being checked before reuse. Both
    # hold a slot on the server like sv_idle.
    return (row.sv_idle or 0) + (row.sv_used or 0) + (row.sv_tested or 0)


def _active_servers(row: PoolRow) -> int:
    return (row.sv_active or 0) + (row.sv_login or 0)


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
    """``SHOW POOLS`` summed per pool name (an inbound pool has one row per role)."""
    sums: dict[str, dict[str, Any]] = {}
    for row in rows:
        s = sums.setdefault(row.database, {"ca": 0, "cw": 0, "sa": 0, "si": 0, "mw": 0.0})
        s["ca"] += row.cl_active or 0
        s["cw"] += row.cl_waiting or 0
        s["sa"] += _active_servers(row)
        s["si"] += _idle_servers(row)
        s["mw"] = max(s["mw"], row.maxwait or 0.0)
    return {name: PoolStats(s["ca"], s["cw"], s["sa"], s["si"], s["mw"]) for name, s in sums.items()}


def _live_stats(cluster: Cluster, pooler: Pooler | None = None) -> dict[str, PoolStats] | None:
    rows = _show_pools(cluster, pooler)
    return None if rows is None else _stats_by_pool(rows)


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
    """
    try:
        with dbconn.admin_connection(cluster) as conn:
            row = conn.execute(
                "SELECT current_setting('max_connections')::int"
                " - current_setting('superuser_reserved_connections')::int,"
                " (SELECT count(*) FROM pg_catalog.pg_stat_activity"
                "  WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid())"
            ).fetchone()
    except (dbconn.DatabaseError, OSError) as exc:
        log.info("counting backends on %s failed: %s", cluster.pk, exc)
        return None, None
    if row is None:
        return None, None
    return int(row[0]), int(row[1])


def _slot_usage(cluster: Cluster, rows: list[PoolRow], *, always_count: bool = True) -> SlotUsage:
    active = sum(_active_servers(row) for row in rows)
    idle = sum(_idle_servers(row) for row in rows)
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


def slot_usage(cluster: Cluster) -> SlotUsage | None:
    """The slots the pools hold and the direct headroom; None without pools or a running PgBouncer.

    Polled by the Overview's warning: one ``SHOW POOLS`` and one count of the server's backends.
    """
    if not poolable(cluster) or not cluster.pools.exists():
        return None
    rows = _show_pools(cluster)
    return None if rows is None else _slot_usage(cluster, rows, always_count=False)


def release_idle_servers(cluster: Cluster, *, timeout: float = 3.0) -> int:
    """Close the server connections PgBouncer keeps idle in every pool, giving their slots back.

    After a busy run the pools may hold the whole connection budget, so direct clients are
    refused until ``server_idle_timeout``. Clients of the pools are not disturbed: servers reopen
    on demand. Returns how many were idle; never raises.
    """
    return _release(cluster, None, timeout=timeout)


def release_all(cluster: Cluster, *, timeout: float = 3.0) -> int:
    """ "Release now" of the lock-out warning: a RECONNECT of every pool; see ``release_pool``."""
    if not pooler_running(cluster):
        raise ServiceError(_("PgBouncer is not running; the pools hold no server connections."))
    released = _release(cluster, None, timeout=timeout, quiet=False)
    cluster.log_event(
        "pools-released",
        ngettext(
            "%(n)s idle server connection of the pools closed.",
            "%(n)s idle server connections of the pools closed.",
            released,
        )
        % {"n": released},
    )
    return released


def release_pool(pool: ConnectionPool, *, timeout: float = 3.0) -> int:
    """ "Release idle server connections" of one pool: a RECONNECT of that pool on the console.

    Its idle servers close at once, its active ones as soon as their transaction (or session)
    releases them; its clients stay connected. Returns how many were idle.
    """
    cluster = pool.cluster
    if not pooler_running(cluster):
        raise ServiceError(_("PgBouncer is not running; the pool holds no server connections."))
    released = _release(cluster, pool.name, timeout=timeout, quiet=False)
    cluster.log_event(
        "pool-released",
        ngettext(
            "Pool “%(name)s”: %(n)s idle server connection closed.",
            "Pool “%(name)s”: %(n)s idle server connections closed.",
            released,
        )
        % {"name": pool.name, "n": released},
    )
    return released


def _release(cluster: Cluster, name: str | None, *, timeout: float, quiet: bool = True) -> int:
    """RECONNECT one pool (``name``) or all, then wait up to ``timeout`` for the idle ones to go."""
    if not pooler_running(cluster):
        return 0

    def idle(rows: list[PoolRow]) -> int:
        return sum(_idle_servers(row) for row in rows if name is None or row.database == name)

    try:
        with admin_console(cluster) as conn:
            count = idle(console.show_pools(conn))
            if count:
                if name is None:
                    console.reconnect(conn)
                else:
                    console.reconnect_database(conn, name)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and idle(console.show_pools(conn)):
                    time.sleep(0.05)
    except (console.ConsoleError, ValueError) as exc:
        log.info("releasing idle servers of %s failed: %s", cluster.pk, exc)
        if quiet:
            return 0
        raise ServiceError(
            _("PgBouncer did not release the server connections: %(reason)s") % {"reason": exc}
        ) from None
    return count


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
                _("The pool “%(pool)s” always logs in as “%(user)s”.")
                % {"pool": pool.name, "user": pool.user},
                field="user",
            )
        name = pool.user
    else:
        name = user or cluster.admin_user
    try:
        db_user = cluster.users.get(name=name)
    except DatabaseUser.DoesNotExist:
        raise ServiceError(
            _("No user named “%(name)s” on this cluster.") % {"name": name}, field="user"
        ) from None
    return ConnectionDetails(
        db_user.name, db_user.password, settings.PANEL_PUBLIC_HOST, int(cluster.pooler_port or 0), pool.name
    )


# --- validation ----------------------------------------------------------------------------------


def poolable(cluster: Cluster) -> bool:
    """Whether the panel provisioned the cluster with a pooler port and a pool budget."""
    return bool(cluster.is_local and cluster.pooler_port and cluster.pool_connections)


def _require_poolable(cluster: Cluster) -> None:
    if not poolable(cluster):
        raise ServiceError(_("Connection pools are available for clusters provisioned by this panel."))
    if not cluster.is_serving:
        raise ServiceError(
            _("The cluster is %(status)s; start it first.") % {"status": cluster.get_status_display().lower()}
        )


def _check_fields(cluster: Cluster, *, database: str, user: str, mode: str, size: object) -> None:
    if not database or not cluster.databases.filter(name=database).exists():
        raise ServiceError(
            _("No database named “%(name)s” on this cluster.") % {"name": database}, field="database"
        )
    if user and not cluster.users.filter(name=user).exists():
        raise ServiceError(_("No user named “%(name)s” on this cluster.") % {"name": user}, field="user")
    if mode not in PoolMode.values:
        raise ServiceError(
            _("The mode must be one of %(modes)s.") % {"modes": ", ".join(PoolMode.values)}, field="mode"
        )
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ServiceError(_("The size must be a whole number of at least 1."), field="size")


def _check_budget(cluster: Cluster, size: int, *, replacing: ConnectionPool | None = None) -> None:
    others = cluster.pools.exclude(pk=replacing.pk) if replacing else cluster.pools.all()
    used = sum(others.values_list("size", flat=True))
    total = cluster.pool_connections or 0
    if used + size > total:
        raise ServiceError(
            _(
                "Only %(left)s of the cluster's %(total)s connections are left for pools; "
                "a pool of %(size)s does not fit."
            )
            % {"left": max(total - used, 0), "total": total, "size": size},
            field="size",
        )


def _check_name_free(cluster: Cluster, name: str) -> None:
    if cluster.pools.filter(name=name).exists():
        raise ServiceError(_("A pool named “%(name)s” already exists.") % {"name": name}, field="name")


# --- actions -------------------------------------------------------------------------------------


def create_pool(
    cluster: Cluster, name: str, database: str, user: str | None, mode: str, size: int
) -> ConnectionPool:
    """Create a pool and return once PgBouncer serves it; ``user`` empty = the inbound user."""
    _require_poolable(cluster)
    try:
        validate_pool_name(name)
    except InvalidPoolName as exc:
        raise ServiceError(str(exc), field="name") from None
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
    cluster.log_event(
        "pool-created",
        _("Pool “%(name)s” created (%(mode)s, size %(size)s).") % {"name": name, "mode": mode, "size": size},
    )
    return pool


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
            raise ServiceError(_("The pool “%(name)s” no longer exists.") % {"name": pool.name})
        apply_config(locked)
    pool.refresh_from_db()
    cluster.log_event(
        "pool-updated",
        _("Pool “%(name)s” changed (%(mode)s, size %(size)s).")
        % {"name": pool.name, "mode": mode, "size": size},
    )
    return pool


def delete_pool(pool: ConnectionPool) -> int:
    """Remove a pool; PgBouncer drops its clients at once. Returns how many were connected."""
    cluster = pool.cluster
    clients = connected_clients(pool)
    with transaction.atomic():
        locked = lock_cluster(cluster)
        ConnectionPool.objects.filter(pk=pool.pk).delete()
        apply_config(locked)
    cluster.log_event(
        "pool-deleted",
        _("Pool “%(name)s” deleted; %(n)s connected clients were disconnected.")
        % {"name": pool.name, "n": clients},
    )
    return clients


# --- hooks for the cluster services ----------------------------------------------------------------


def ensure_not_used(cluster: Cluster, *, database: str | None = None, user: str | None = None) -> None:
    """Refuse to delete a database or user that a pool uses, naming the pool(s)."""
    if database is not None:
        names = list(cluster.pools.filter(database=database).values_list("name", flat=True))
        if names:
            raise ServiceError(
                _("The database “%(db)s” is used by the pool(s) %(pools)s; delete or change them first.")
                % {"db": database, "pools": ", ".join(f"“{n}”" for n in names)}
            )
    if user is not None:
        names = list(cluster.pools.filter(user=user).values_list("name", flat=True))
        if names:
            raise ServiceError(
                _("The user “%(user)s” is used by the pool(s) %(pools)s; delete or change them first.")
                % {"user": user, "pools": ", ".join(f"“{n}”" for n in names)}
            )


def _record_failure(cluster: Cluster, message: str) -> None:
    Pooler.objects.filter(cluster=cluster).update(status=PoolerStatus.ERROR, error_message=message)


def refresh_auth(cluster: Cluster) -> str | None:
    """Rewrite the auth file after a user was added, deleted or got a new password.

    Never raises: the role change already happened in PostgreSQL. A failure is recorded on the
    pooler and in the cluster's events, and returned.
    """
    if not cluster.is_local or not cluster.pools.exists():
        return None
    try:
        apply_config(cluster)
    except ServiceError as exc:
        _record_failure(cluster, exc.message)
        cluster.log_event("pooler-error", exc.message, EventLevel.ERROR)
        return exc.message
    return None


def stop_pgbouncer(cluster: Cluster) -> bool:
    """Before the cluster stops or is deleted; True if PgBouncer was running."""
    if not cluster.is_local or not cluster.pooler_port:
        return False
    stopped = supervisor.stop(bouncer_files(cluster))
    Pooler.objects.filter(cluster=cluster).update(status=PoolerStatus.STOPPED, error_message="")
    return stopped


def _idle_timeout_current(files: supervisor.BouncerFiles) -> bool:
    """Whether the running ``pgbouncer.ini`` has today's ``server_idle_timeout`` (True if unreadable)."""
    try:
        ini = files.ini.read_text()
    except OSError:
        return True
    return f"\nserver_idle_timeout = {settings.PANEL_POOL_SERVER_IDLE_TIMEOUT}\n" in ini


def reconcile_pgbouncer(cluster: Cluster) -> str | None:
    """Keep PgBouncer running while the cluster serves and has pools; a note when it acted."""
    if not cluster.is_local or not cluster.pooler_port:
        return None
    files = bouncer_files(cluster)
    running = supervisor.running_pid(files) is not None
    if not cluster.pools.exists():
        if running:
            stop_pgbouncer(cluster)
            return f"{cluster.name}: PgBouncer stopped (no pools)"
        return None
    if not cluster.is_serving:
        return None
    pooler = Pooler.objects.filter(cluster=cluster).first()
    if running and (pooler is None or pooler.status != PoolerStatus.ERROR):
        if _idle_timeout_current(files):
            return None
        # A file written before the idle timeout changed (PgBouncer's 600 s before issue 11):
        # rewrite it, so held slots come back as the panel says they do.
        try:
            apply_config(cluster)
        except ServiceError as exc:
            return f"{cluster.name}: PgBouncer idle timeout not updated: {exc.message}"
        return f"{cluster.name}: PgBouncer server_idle_timeout set to {settings.PANEL_POOL_SERVER_IDLE_TIMEOUT} s"
    if not running:
        cluster.log_event(
            "pooler-down", _("PgBouncer was not running; starting it again."), EventLevel.WARNING
        )
    try:
        apply_config(cluster)
    except ServiceError as exc:
        already = pooler is not None and pooler.error_message == exc.message
        _record_failure(cluster, exc.message)
        if not already:
            cluster.log_event("pooler-error", exc.message, EventLevel.ERROR)
        return f"{cluster.name}: PgBouncer failed: {exc.message}"
    cluster.log_event("pooler-recovered", _("PgBouncer restarted by the reconciler."))
    return f"{cluster.name}: PgBouncer restarted"


def reconcile_all() -> list[str]:
    """``reconcile_pgbouncer`` for every local cluster that serves or still runs a PgBouncer."""
    notes = []
    for cluster in Cluster.objects.filter(kind=ClusterKind.LOCAL, status__in=ClusterStatus.SERVING):
        note = reconcile_pgbouncer(cluster)
        if note:
            notes.append(note)
    return notes
