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
import math
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

import psutil
import psycopg

from panel.clusters import dbconn
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster
from panel.insights.metrics import HOST, PGBOUNCER, POSTGRES, label
from panel.pools import console, supervisor
from panel.pools.apply import ADMIN_ROLE, bouncer_files
from panel.pools.models import Pooler

log = logging.getLogger(__name__)

BUDGET_SECONDS = 5.0
STATEMENT_TIMEOUT_MS = 2000
SCAN_DATABASES = 8
# Leave this much of the budget for PgBouncer and psutil before opening per-database connections.
SCAN_RESERVE_SECONDS = 1.5


@dataclass(frozen=True)
class Target:
    """One cluster to collect, with what the collector needs from the panel's database."""

    cluster: Cluster
    pools: dict[str, int]  # pool name → size
    pooler: Pooler | None


@dataclass
class Snapshot:
    """Everything one collection read: gauges as they are, counters as raw totals."""

    at: dt.datetime
    gauges: list[tuple[str, str, float]] = field(default_factory=list)  # (metric, labels, value)
    counters: list[tuple[str, str, str, float]] = field(default_factory=list)  # (source, counter, labels, v)
    up: dict[str, bool] = field(default_factory=dict)  # source → answered
    errors: dict[str, str] = field(default_factory=dict)  # source → why not
    query_seconds: float = 0.0  # time spent waiting on PostgreSQL and PgBouncer
    started_at: float | None = None  # the postmaster's start time (epoch seconds)

    def gauge(self, metric: str, labels: str, value: float | None) -> None:
        if value is not None:
            self.gauges.append((metric, labels, float(value)))

    def counter(self, source: str, name: str, labels: str, value: float | None) -> None:
        if value is not None:
            self.counters.append((source, name, labels, float(value)))


class Deadline:
    """The monotonic time by which a cluster's collection must be over."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()


class CollectTimeout(Exception):
    pass


@contextmanager
def watchdog(conn: psycopg.Connection[Any], deadline: Deadline) -> Iterator[None]:
    """Shut the connection's socket down at the deadline so a blocked read returns an error."""
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        with suppress(OSError):
            # A dup of the descriptor: shutdown() acts on the shared socket, close() only on the dup.
            sock = socket.socket(fileno=os.dup(conn.fileno()))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    remaining = deadline.remaining()
    if remaining <= 0:
        raise CollectTimeout(f"no time left of the {BUDGET_SECONDS:g} s budget")
    timer = threading.Timer(remaining, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except (psycopg.Error, dbconn.DatabaseError, console.ConsoleError) as exc:
        if fired.is_set():
            raise CollectTimeout(f"no answer within {BUDGET_SECONDS:g} s") from None
        raise exc
    finally:
        timer.cancel()
    if fired.is_set():
        raise CollectTimeout(f"no answer within {BUDGET_SECONDS:g} s")


# --- PostgreSQL -----------------------------------------------------------------------------------

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
    """Statistics over the maintenance connection; returns the databases worth a scan read."""
    with stats_connection(cluster) as conn, watchdog(conn, deadline):
        started = time.perf_counter()
        conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        databases = conn.execute(DATABASE_STATS).fetchall()
        activity = conn.execute(ACTIVITY).fetchall()
        max_connections, started_epoch = conn.execute(SERVER).fetchone()  # type: ignore[misc]
        snap.query_seconds += time.perf_counter() - started
    snap.started_at = started_epoch
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
    return sorted(names)


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


# --- host (local clusters) ------------------------------------------------------------------------


class MemoryInfo(Protocol):
    """What ``tree_memory`` reads of psutil's ``memory_info()`` (``shared`` exists on Linux)."""

    @property
    def rss(self) -> int: ...

    @property
    def shared(self) -> int: ...


def tree_memory(infos: Iterable[MemoryInfo]) -> int:
    """Bytes resident for a process tree, counting shared memory once.

    Every backend that touched shared_buffers has those pages in its RSS, so a sum of RSS counts
    them once per backend. Here each process adds its private memory (RSS minus shared) and the
    shared set counts once, as the largest any one process holds. PSS would be exact but walks
    page tables, too slow with hundreds of backends; ``shared`` comes with RSS from one read.
    """
    private = 0
    largest_shared = 0
    for info in infos:
        private += max(0, info.rss - info.shared)  # a platform's odd figures must not subtract
        largest_shared = max(largest_shared, info.shared)
    return private + largest_shared


def collect_host(snap: Snapshot, cluster: Cluster) -> None:
    """CPU, memory and disk of the cluster's processes and directory; machine load average."""
    pid = postgres.postmaster_pid(cluster.pgdata)
    if pid is None:
        raise CollectTimeout("the postmaster is not running")
    postmaster = psutil.Process(pid)
    with postmaster.oneshot():
        times = postmaster.cpu_times()
        # Exited backends' CPU moves into the postmaster's children_* fields when it reaps
        # them, so this sum only grows while the postmaster lives: a counter.
        cpu = times.user + times.system + times.children_user + times.children_system
        memory = [postmaster.memory_info()]
    for child in postmaster.children(recursive=True):
        try:
            with child.oneshot():
                ctimes = child.cpu_times()
                info = child.memory_info()
        except psutil.Error:
            continue  # exited meanwhile
        cpu += ctimes.user + ctimes.system
        memory.append(info)
    # Per CPU of the machine, so 100 % means every core busy.
    snap.counter(HOST, "cpu_seconds", "", cpu / (psutil.cpu_count() or 1))
    snap.gauge("memory_bytes", "", tree_memory(memory))
    load1, load5, load15 = os.getloadavg()
    snap.gauge("load1", "", load1)
    snap.gauge("load5", "", load5)
    snap.gauge("load15", "", load15)
    snap.gauge("disk_used_bytes", "", postgres.directory_size(cluster.pgdata))
    snap.gauge("disk_percent", "", psutil.disk_usage(str(cluster.pgdata)).percent)


# --- PgBouncer ------------------------------------------------------------------------------------


def collect_pgbouncer(snap: Snapshot, target: Target, deadline: Deadline) -> None:
    """SHOW POOLS gauges and SHOW STATS counters of the cluster's pools, summed over users."""
    assert target.pooler is not None
    if deadline.remaining() <= 0:
        raise CollectTimeout(f"no time left of the {BUDGET_SECONDS:g} s budget")
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
        watchdog(conn, deadline),
    ):
        started = time.perf_counter()
        pools = console.show_pools(conn)
        stats = console.show_stats(conn)
        snap.query_seconds += time.perf_counter() - started
    sums = {
        name: {"cl_active": 0, "cl_waiting": 0, "sv_active": 0, "sv_idle": 0, "sv_used": 0, "maxwait": 0.0}
        for name in target.pools
    }
    for row in pools:
        s = sums.get(row.database)
        if s is None:
            continue  # the admin console, or a pool removed meanwhile
        s["cl_active"] += row.cl_active or 0
        s["cl_waiting"] += row.cl_waiting or 0
        s["sv_active"] += row.sv_active or 0
        s["sv_idle"] += row.sv_idle or 0
        s["sv_used"] += row.sv_used or 0
        s["maxwait"] = max(s["maxwait"], row.maxwait or 0.0)
    for name, s in sums.items():
        pool = label("pool", name)
        for key in ("cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_used"):
            snap.gauge(f"pool_{key}", pool, s[key])
        snap.gauge("pool_maxwait_seconds", pool, s["maxwait"])
        snap.gauge("pool_size", pool, target.pools[name])
    for row in stats:
        if row.database not in target.pools:
            continue
        pool = label("pool", row.database)
        snap.counter(PGBOUNCER, "pool_xact", pool, row.total_xact_count)
        snap.counter(PGBOUNCER, "pool_query", pool, row.total_query_count)
        snap.counter(PGBOUNCER, "pool_wait_us", pool, row.total_wait_time)


# --- one cluster ------------------------------------------------------------------------------------


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
    if databases:
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
    return snap
