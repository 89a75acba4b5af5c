"""PgBouncer's figures for a cluster with pools: SHOW POOLS and SHOW STATS over its admin console."""

from __future__ import annotations

import logging
import math
import time

from panel.insights.engine import snapshot
from panel.insights.lib.metrics import PGBOUNCER, label
from panel.pools.face import ADMIN_ROLE, bouncer_files, console
from panel.pools.lib.admin_console import PoolTotals, pool_totals

log = logging.getLogger(__name__)


def collect_pgbouncer(snap: snapshot.Snapshot, target: snapshot.Target, deadline: snapshot.Deadline) -> None:
    """SHOW POOLS gauges and SHOW STATS counters of the cluster's pools, summed over users."""
    assert target.pooler is not None
    if deadline.remaining() <= 0:
        raise snapshot.CollectTimeout(f"no time left of the {snapshot.BUDGET_SECONDS:g} s budget")
    files = bouncer_files(target.cluster)
    with (
        console.connect(
            files.socket_dir,
            files.port,
            ADMIN_ROLE,
            target.pooler.admin_password,
            # The watchdog needs a socket, so libpq's timeout guards the connect: the whole
            # seconds left of the budget (console.connect waits at least libpq's 2 s).
            connect_timeout=math.floor(deadline.remaining()),
        ) as conn,
        snapshot.watchdog(conn, deadline),
    ):
        started = time.perf_counter()
        pools = console.show_pools(conn)
        stats = console.show_stats(conn)
        snap.query_seconds += time.perf_counter() - started
    totals = pool_totals(pools)
    for name, size in target.pools.items():
        # Only the cluster's pools: not the admin console's row, nor a pool removed meanwhile.
        t = totals.get(name, PoolTotals())
        pool = label("pool", name)
        for key in ("cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_used"):
            snap.gauge(f"pool_{key}", pool, getattr(t, key))
        snap.gauge("pool_maxwait_seconds", pool, t.maxwait)
        snap.gauge("pool_size", pool, size)
    for row in stats:
        if row.database not in target.pools:
            continue
        pool = label("pool", row.database)
        snap.counter(PGBOUNCER, "pool_xact", pool, row.total_xact_count)
        snap.counter(PGBOUNCER, "pool_query", pool, row.total_query_count)
        snap.counter(PGBOUNCER, "pool_wait_us", pool, row.total_wait_time)
