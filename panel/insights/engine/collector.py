"""What one collection reads from a cluster: PostgreSQL statistics, PgBouncer's console, psutil.

Runs in a worker thread and touches no model: the caller prepares a ``Target`` (everything read
from the panel's database) and stores the returned ``Snapshot``. Every read has a hard deadline
(``BUDGET_SECONDS`` per cluster): statements run under ``statement_timeout``, and a watchdog
shuts the socket down when the deadline passes, because a hung server (SIGSTOP, a full disk…)
never enforces its own statement timeout and libpq would wait forever.

Index vs sequential scans live in ``pg_stat_user_tables``, which only shows the connected
database. They are read over one extra short connection per database (at most
``SCAN_DATABASES``), only while the budget allows; the other figures come from the single
maintenance connection. Every connection is the monitor role's (``dbconn.monitor_connection``)
but on a saturated server, whose maintenance database the superuser reads (``stats_connection``):
the superuser never enters a tenant's database.
"""

from __future__ import annotations

import datetime as dt
import logging

import psutil
import psycopg

from panel.clusters.face import dbconn
from panel.insights.engine.snapshot import (
    BUDGET_SECONDS,
    CollectTimeout,
    Deadline,
    Snapshot,
    Target,
    watchdog,
)
from panel.insights.engine.sources.host import collect_host, tree_memory
from panel.insights.engine.sources.pg_stat_statements import collect_statements
from panel.insights.engine.sources.pgbouncer import collect_pgbouncer
from panel.insights.engine.sources.postgres import collect_postgres, collect_scans
from panel.insights.engine.sources.replication_lag import collect_replication
from panel.insights.lib.metrics import HOST, PGBOUNCER, POSTGRES
from panel.pools.face import bouncer_files, console, supervisor

__all__ = [
    "BUDGET_SECONDS",
    "CollectTimeout",
    "Deadline",
    "Snapshot",
    "Target",
    "collect",
    "tree_memory",
    "watchdog",
]

log = logging.getLogger(__name__)


def collect(target: Target, *, budget: float = BUDGET_SECONDS, now: dt.datetime | None = None) -> Snapshot:
    """Read every figure of one cluster within ``budget`` seconds; a failing source leaves a gap."""
    cluster = target.cluster
    snap = Snapshot(at=now or dt.datetime.now(dt.UTC))
    deadline = Deadline(budget)
    try:
        databases = collect_postgres(snap, cluster, deadline)
        snap.up[POSTGRES] = True
    except (dbconn.DatabaseError, CollectTimeout, psycopg.Error) as exc:
        snap.up[POSTGRES] = False
        snap.errors[POSTGRES] = str(exc)
        databases = []
    if snap.up[POSTGRES]:
        if target.members or target.replicas:
            try:
                collect_replication(snap, target, deadline)
            except (dbconn.DatabaseError, CollectTimeout, psycopg.Error) as exc:
                log.info("insights: replication lag of %s not read: %s", cluster.pk, exc)
        collect_scans(snap, cluster, databases, deadline)
    if cluster.is_local:
        try:
            collect_host(snap, cluster)
            snap.up[HOST] = True
        except (CollectTimeout, psutil.Error, OSError) as exc:
            snap.up[HOST] = False
            snap.errors[HOST] = str(exc)
    if target.pools and target.pooler is not None:
        if supervisor.running_pid(bouncer_files(cluster)) is None:
            snap.up[PGBOUNCER] = False
            snap.errors[PGBOUNCER] = "PgBouncer is not running"
        else:
            try:
                collect_pgbouncer(snap, target, deadline)
                snap.up[PGBOUNCER] = True
            except (console.ConsoleError, CollectTimeout, psycopg.Error) as exc:
                snap.up[PGBOUNCER] = False
                snap.errors[PGBOUNCER] = str(exc)
    if snap.up[POSTGRES]:
        # Last, with what the budget leaves: the older figures never wait for it.
        collect_statements(snap, target, deadline)
    return snap
