"""``pg_stat_statements``, read as the monitor role in the maintenance database, where the panel
created the extension (its view there shows every database's statements).

The panel's own roles (its superuser, the monitor role) are left out by their oids: the tab shows
the tenant's workload. The monitor role is a member of ``pg_read_all_stats`` and sees every
role's text; the tenant's ``doadmin`` is not, and sees only its own (PostgreSQL's rule).
"""

from __future__ import annotations

import logging
import time

import psycopg
from django.conf import settings

from panel.clusters.face import dbconn
from panel.clusters.face import services as cluster_services
from panel.insights.engine.snapshot import (
    STATEMENT_TIMEOUT_MS,
    CollectTimeout,
    Deadline,
    Snapshot,
    Target,
    watchdog,
)
from panel.insights.engine.sources.postgres import stats_connection
from panel.insights.lib import statements

log = logging.getLogger(__name__)

# Statements stored per collection (the top ones by time); texts are capped at this many characters.
TOP_PER_COLLECTION = 50
TEXT_LIMIT = 16_384
# Read only with this much of the collection's budget left.
STATEMENTS_RESERVE_SECONDS = 0.5

# Top-level statements only (track = top); never the panel's own roles nor a superuser's.
READ = """
SELECT s.queryid, s.dbid::bigint, s.userid::bigint, coalesce(d.datname, ''), coalesce(r.rolname, ''),
       s.calls, s.total_exec_time, s.mean_exec_time, s.stddev_exec_time, s.rows,
       s.shared_blks_hit, s.shared_blks_read
FROM public.pg_stat_statements(false) s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid
LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.userid
WHERE s.toplevel AND s.queryid IS NOT NULL
  AND s.userid NOT IN (SELECT oid FROM pg_catalog.pg_roles
                       WHERE rolsuper OR rolname = ANY(%s::pg_catalog.name[]))
"""
RESET_TIME = "SELECT extract(epoch FROM stats_reset)::double precision FROM public.pg_stat_statements_info"
TEXTS = """
SELECT DISTINCT ON (queryid) queryid, pg_catalog.left(query, %s)
FROM public.pg_stat_statements(true) WHERE queryid = ANY(%s::bigint[])
"""
NOT_LOADED = "55000"  # "pg_stat_statements must be loaded via shared_preload_libraries"
MISSING = ("42883", "42P01", "3F000")  # no such function, relation or schema: no extension here


def panel_roles() -> list[str]:
    return [settings.PANEL_SUPERUSER, settings.PANEL_MONITOR_ROLE]


def collect_statements(snap: Snapshot, target: Target, deadline: Deadline) -> None:
    """Read the statements into ``snap.statements``: deltas from ``target.statements`` (the
    previous reading), the top ones kept, with the texts not stored yet. A local cluster without
    the extension (one from before it) gets it created by the superuser in the maintenance
    database, and the panel's template database made (``ensure_statements``), then read again."""
    baseline = target.statements
    if baseline is None:
        return
    if deadline.remaining() < STATEMENTS_RESERVE_SECONDS:
        log.info("insights: no time left for the statements of %s", target.cluster.pk)
        return  # nothing stored: the next reading's deltas cover this one
    snap.statements = _collect(snap, target, baseline, deadline)


def _collect(
    snap: Snapshot, target: Target, baseline: statements.Baseline, deadline: Deadline
) -> statements.Collected | None:
    """What was read, or why not; None when the budget ran out (a gap, not a state)."""
    cluster = target.cluster
    created = False

    def failed(status: str, message: str) -> statements.Collected:
        if status == "unavailable":  # the page says so in its words; the server's text is the log's
            log.warning("insights: statements of %s not read: %s", cluster.pk, message)
        return statements.Collected(status, message, baseline=baseline, created_extension=created)

    for attempt in (1, 2):
        try:
            collected = _read(snap, target, baseline, deadline)
        except dbconn.DatabaseError as exc:
            if exc.sqlstate == NOT_LOADED:
                return failed(
                    "not_loaded", "pg_stat_statements is not loaded: restart the cluster to load it."
                )
            if exc.sqlstate in MISSING and cluster.is_local and attempt == 1:
                try:
                    created = bool(cluster_services.ensure_statements(cluster))
                except dbconn.DatabaseError as again:
                    return failed("unavailable", str(again))
                continue
            return failed("unavailable", str(exc))
        except CollectTimeout as exc:
            log.info("insights: statements of %s: %s", cluster.pk, exc)
            return None
        except psycopg.Error as exc:
            return failed("unavailable", str(exc))
        collected.created_extension = created
        return collected
    return failed("unavailable", "pg_stat_statements could not be read")


def _read(
    snap: Snapshot, target: Target, baseline: statements.Baseline, deadline: Deadline
) -> statements.Collected:
    with stats_connection(target.cluster) as conn, watchdog(conn, deadline):
        started = time.perf_counter()
        conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        rows = conn.execute(READ, [panel_roles()]).fetchall()
        reset_row = conn.execute(RESET_TIME).fetchone()
        stats_reset = None if reset_row is None else reset_row[0]
        readings = [statements.Reading.from_stats(*row) for row in rows]
        reset = (
            baseline.stats_reset is not None
            and stats_reset is not None
            and abs(stats_reset - baseline.stats_reset) > 1e-3
        )
        kept = statements.top(statements.deltas(baseline.counters, readings, reset=reset), TOP_PER_COLLECTION)
        wanted = sorted({d.queryid for d in kept} - baseline.known_texts)
        texts: dict[int, str] = {}
        if wanted:
            texts = dict(conn.execute(TEXTS, [TEXT_LIMIT, wanted]).fetchall())
        snap.query_seconds += time.perf_counter() - started
    return statements.Collected(
        "collecting",
        "",
        stats_reset=stats_reset,
        readings=readings,
        deltas=kept,
        texts=texts,
        baseline=baseline,
    )
