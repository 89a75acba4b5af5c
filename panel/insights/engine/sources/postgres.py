"""PostgreSQL's statistics: one maintenance connection, then one short connection per database
for the scan counters (at most ``SCAN_DATABASES``), while the budget allows."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg

from panel.clusters.face import dbconn
from panel.clusters.models import Cluster
from panel.insights.engine.snapshot import (
    SCAN_DATABASES,
    SCAN_RESERVE_SECONDS,
    STATEMENT_TIMEOUT_MS,
    CollectTimeout,
    Deadline,
    Snapshot,
    watchdog,
)
from panel.insights.lib.metrics import POSTGRES, label

log = logging.getLogger(__name__)


# Read as the monitor role (pg_monitor) on local clusters, as the given admin on attached ones;
# the connection pins search_path and the queries name catalog objects with their schema, as
# the per-database connections run inside databases a tenant writes to.
#
# pg_database_size() raises for a database the role may neither CONNECT to nor read every
# statistic of (an attached server's admin often may not open "postgres"), which would fail the
# statement: such a size is NULL.
DATABASE_STATS = """
SELECT d.datname, s.xact_commit + s.xact_rollback, s.xact_rollback, s.blks_hit, s.blks_read,
       s.tup_inserted, s.tup_updated, s.tup_deleted, s.tup_fetched, s.deadlocks, s.temp_bytes,
       CASE WHEN pg_catalog.has_database_privilege(d.oid, 'CONNECT')
                 OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
            THEN pg_catalog.pg_database_size(d.oid) END
FROM pg_catalog.pg_database d JOIN pg_catalog.pg_stat_database s ON s.datid = d.oid
WHERE NOT d.datistemplate AND d.datallowconn
"""
# Client backends only: the checkpointer, autovacuum and WAL writer are not connections, and
# neither is this collector's own.
ACTIVITY = """
SELECT CASE WHEN wait_event_type = 'Lock' THEN 'waiting_lock'
            WHEN state = 'active' THEN 'active'
            WHEN state = 'idle' THEN 'idle'
            WHEN state LIKE 'idle in transaction%' THEN 'idle_in_transaction'
            ELSE 'other' END,
       coalesce(usename, ''), coalesce(datname, ''), pg_catalog.count(*)
FROM pg_catalog.pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid()
GROUP BY 1, 2, 3
"""
SERVER = (
    "SELECT pg_catalog.current_setting('max_connections')::int, "
    "extract(epoch from pg_catalog.pg_postmaster_start_time())::double precision"
)
SCANS = (
    "SELECT coalesce(pg_catalog.sum(seq_scan), 0)::double precision, "
    "coalesce(pg_catalog.sum(idx_scan), 0)::double precision "
    "FROM pg_catalog.pg_stat_user_tables"
)
DATABASE_COUNTERS = (
    "xact_total",
    "xact_rollback",
    "blks_hit",
    "blks_read",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
    "tup_fetched",
    "deadlocks",
    "temp_bytes",
)
STATES = ("active", "idle", "idle_in_transaction", "waiting_lock")


@contextmanager
def stats_connection(cluster: Cluster) -> Iterator[psycopg.Connection[Any]]:
    """The monitor role's connection to the maintenance database. When tenants hold every slot
    but the superuser's reserved ones (when the figures matter most), a local cluster is read
    by the superuser instead, in that database only, which no tenant can enter or write to."""
    with ExitStack() as stack:
        try:
            conn = stack.enter_context(dbconn.monitor_connection(cluster))
        except dbconn.DatabaseError as exc:
            if not (cluster.is_local and exc.out_of_connection_slots):
                raise
            conn = stack.enter_context(dbconn.admin_connection(cluster))
        yield conn


def collect_postgres(snap: Snapshot, cluster: Cluster, deadline: Deadline) -> list[str]:
    """Statistics over the maintenance connection, and that database's scan counts; returns the
    other databases worth a scan read (each a connection of its own: 200 clusters' connections
    are most of a collection cycle's CPU, issue 41)."""
    with stats_connection(cluster) as conn, watchdog(conn, deadline):
        started = time.perf_counter()
        conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        databases = conn.execute(DATABASE_STATS).fetchall()
        activity = conn.execute(ACTIVITY).fetchall()
        max_connections, started_epoch = conn.execute(SERVER).fetchone()  # type: ignore[misc]
        seq, idx = conn.execute(SCANS).fetchone()  # type: ignore[misc]
        snap.query_seconds += time.perf_counter() - started
        here = conn.info.dbname
    snap.started_at = started_epoch
    snap.counter(POSTGRES, "seq_scan", label("db", here), seq)
    snap.counter(POSTGRES, "idx_scan", label("db", here), idx)
    names = []
    for row in databases:
        name, values, size = row[0], row[1:11], row[11]
        names.append(name)
        for counter, value in zip(DATABASE_COUNTERS, values, strict=True):
            snap.counter(POSTGRES, counter, label("db", name), value)
        snap.gauge("db_size_bytes", label("db", name), size)
    by_state = dict.fromkeys(STATES, 0)
    by_user: dict[str, int] = {}
    by_db: dict[str, int] = {}
    total = 0
    for state, user, dbname, count in activity:
        by_state[state] = by_state.get(state, 0) + count
        if user:
            by_user[user] = by_user.get(user, 0) + count
        if dbname:
            by_db[dbname] = by_db.get(dbname, 0) + count
        total += count
    for state in STATES:
        snap.gauge("conn_state", label("state", state), by_state[state])
    for user, count in by_user.items():
        snap.gauge("conn_user", label("user", user), count)
    for dbname, count in by_db.items():
        snap.gauge("conn_db", label("db", dbname), count)
    snap.gauge("conn_total", "", total)
    snap.gauge("max_connections", "", max_connections)
    if max_connections:
        snap.gauge("conn_percent", "", 100.0 * total / max_connections)
    return sorted(name for name in names if name != here)


def collect_scans(snap: Snapshot, cluster: Cluster, databases: list[str], deadline: Deadline) -> None:
    """Sequential and index scans per database, one short connection each, while time allows."""
    for name in databases[:SCAN_DATABASES]:
        if deadline.remaining() < SCAN_RESERVE_SECONDS:
            log.info("insights: no time left for scan counts of %s on %s", name, cluster.pk)
            return
        try:
            with dbconn.monitor_connection(cluster, name) as conn, watchdog(conn, deadline):
                started = time.perf_counter()
                conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
                seq, idx = conn.execute(SCANS).fetchone()  # type: ignore[misc]
                snap.query_seconds += time.perf_counter() - started
        except (dbconn.DatabaseError, CollectTimeout) as exc:
            # One database refusing (dropped meanwhile, CONNECT revoked) leaves a gap for it only.
            log.info("insights: scan counts of %s on %s: %s", name, cluster.pk, exc)
            continue
        snap.counter(POSTGRES, "seq_scan", label("db", name), seq)
        snap.counter(POSTGRES, "idx_scan", label("db", name), idx)
