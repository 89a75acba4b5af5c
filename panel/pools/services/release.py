"""Giving server slots back: a RECONNECT of one pool or of all, waiting for the idle servers to close;
and holding the pools' clients (PAUSE/RESUME) while the cluster's primary changes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from panel.clusters.face import transitions
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.polling import wait_for
from panel.pools.engine import console
from panel.pools.engine.console import admin_console
from panel.pools.lib.admin_console import PoolRow, pool_totals
from panel.pools.models import ConnectionPool
from panel.pools.services.figures import pooler_running

log = logging.getLogger(__name__)


@on_node(timeout=30)
def release_idle_servers(cluster: Cluster, *, timeout: float = 3.0) -> int:
    """Close the server connections PgBouncer keeps idle in every pool, giving their slots back.

    After a busy run the pools may hold the whole connection budget, so direct clients are
    refused until ``server_idle_timeout``. Clients of the pools are not disturbed: servers reopen
    on demand. Returns how many were idle; never raises.
    """
    return _release(cluster, None, timeout=timeout)


@on_node(timeout=30)
def release_all(cluster: Cluster, *, timeout: float = 3.0) -> int:
    """ "Release now" of the lock-out warning: a RECONNECT of every pool; see ``release_pool``."""
    if not pooler_running(cluster):
        raise ServiceError(
            N_("PgBouncer is not running; the pools hold no server connections."), code="pool.pooler_stopped"
        )
    released = _release(cluster, None, timeout=timeout, quiet=False)
    transitions.log_event(
        cluster,
        "pools-released",
        Message(
            N_("%(n)s idle server connection of the pools closed.")
            if released == 1
            else N_("%(n)s idle server connections of the pools closed."),
            n=released,
        ),
    )
    return released


@on_node(timeout=30)
def release_pool(pool: ConnectionPool, *, timeout: float = 3.0) -> int:
    """ "Release idle server connections" of one pool: a RECONNECT of that pool on the console.

    Its idle servers close at once, its active ones as soon as their transaction (or session)
    releases them; its clients stay connected. Returns how many were idle.
    """
    cluster = pool.cluster
    if not pooler_running(cluster):
        raise ServiceError(
            N_("PgBouncer is not running; the pool holds no server connections."), code="pool.pooler_stopped"
        )
    released = _release(cluster, pool.name, timeout=timeout, quiet=False)
    transitions.log_event(
        cluster,
        "pool-released",
        Message(
            N_("Pool “%(name)s”: %(n)s idle server connection closed.")
            if released == 1
            else N_("Pool “%(name)s”: %(n)s idle server connections closed."),
            name=pool.name,
            n=released,
        ),
    )
    return released


def _release(cluster: Cluster, name: str | None, *, timeout: float, quiet: bool = True) -> int:
    """RECONNECT one pool (``name``) or all, then wait up to ``timeout`` for the idle ones to go."""
    if not pooler_running(cluster):
        return 0

    def idle(rows: list[PoolRow]) -> int:
        return sum(t.servers_idle for pool, t in pool_totals(rows).items() if name is None or pool == name)

    try:
        with admin_console(cluster) as conn:
            count = idle(console.show_pools(conn))
            if count:
                if name is None:
                    console.reconnect(conn)
                else:
                    console.reconnect_database(conn, name)
                wait_for(lambda: not idle(console.show_pools(conn)), timeout, interval=0.05)
    except (console.ConsoleError, ValueError) as exc:
        log.info("releasing idle servers of %s failed: %s", cluster.pk, exc)
        if quiet:
            return 0
        raise ServiceError.because(
            N_("PgBouncer did not release the server connections: %(reason)s"), "pool.release_failed", exc
        ) from None
    return count


# How long PAUSE may wait for servers in use to be released before the caller goes on regardless.
PAUSE_TIMEOUT = 3.0


@contextmanager
def paused(cluster: Cluster) -> Iterator[bool]:
    """Hold the pools' clients while the block runs (a switchover, a member's restart): their
    queries wait in PgBouncer instead of reaching a server that is going away, and run on the
    servers the files name once the block ends. RESUME always follows, even when the block
    raises. Yields whether the pools are paused (False: no PgBouncer, or its console refused)."""
    if not pooler_running(cluster):
        yield False
        return
    with ExitStack() as stack:
        holding = False
        try:
            conn = stack.enter_context(admin_console(cluster))
            holding = True  # from here the pause may be in force even if PAUSE fails
            if not console.pause(conn, timeout=PAUSE_TIMEOUT):
                log.info("PAUSE of %s still waiting for servers after %s s", cluster.pk, PAUSE_TIMEOUT)
        except console.ConsoleError as exc:
            log.warning("PAUSE of %s failed: %s", cluster.pk, exc)
        try:
            yield holding
        finally:
            if holding:
                _resume(cluster)


def _resume(cluster: Cluster) -> None:
    """RESUME on a connection of its own (the pausing one may still wait for PAUSE's answer)."""
    for _attempt in range(5):
        try:
            with admin_console(cluster) as conn:
                console.resume(conn)
            return
        except console.ConsoleError as exc:
            if "not paused" in str(exc):
                return
            log.warning("RESUME of %s failed: %s", cluster.pk, exc)
