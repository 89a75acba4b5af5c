"""Replication lag: what the primary's walsenders say of each standby member and each read-only
replica streaming from it (``pg_stat_replication``, readable by the monitor role through
pg_monitor), over the collection's maintenance connection."""

from __future__ import annotations

import time

from panel.insights.engine.snapshot import STATEMENT_TIMEOUT_MS, Deadline, Snapshot, Target, watchdog
from panel.insights.engine.sources.postgres import stats_connection
from panel.insights.lib.metrics import replication_label

# Bytes not yet replayed (what a promotion or a read would wait for), and PostgreSQL's own
# replay delay; the delay is NULL once a standby has caught up and the primary is idle ("no more
# WAL activity": a background record such as running-xacts may still be a few bytes ahead): 0 then.
REPLICATION = """
SELECT application_name,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), replay_lsn)::float8,
       CASE WHEN replay_lsn = pg_catalog.pg_current_wal_lsn() THEN 0
            ELSE coalesce(extract(epoch FROM replay_lag)::float8, 0) END
FROM pg_catalog.pg_stat_replication
WHERE state <> 'backup' AND NOT pg_catalog.pg_is_in_recovery()
"""


def collect_replication(snap: Snapshot, target: Target, deadline: Deadline) -> None:
    """Each known walsender's lag as ``replication_lag_bytes`` (and ``_seconds``), labelled by
    ``replication_label`` (a standby member or a read-only replica; nothing else)."""
    with stats_connection(target.cluster) as conn, watchdog(conn, deadline):
        started = time.perf_counter()
        conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        rows = conn.execute(REPLICATION).fetchall()
        snap.query_seconds += time.perf_counter() - started
    for name, lag_bytes, lag_seconds in rows:
        labels = replication_label(name, target.members, target.replicas)
        if labels is None:
            continue
        snap.gauge("replication_lag_bytes", labels, lag_bytes)
        snap.gauge("replication_lag_seconds", labels, lag_seconds)
