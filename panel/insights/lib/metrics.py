"""Metric names, counter → rate conversion with reset detection, and rollup math (pure, no Django).

A *series* is one (metric, labels) pair of one cluster; labels are a single ``key=value`` string
(``db=benchmark``, ``pool=test-pool``, ``state=active``) or empty. Counters are never stored as
such: each collection turns the delta since the previous one into a per-second rate, and a counter
that went backwards (server restart, ``pg_stat_reset()``, PgBouncer restart) starts a new series
instead of producing a negative rate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

ROLLUP_SECONDS = 300

P = TypeVar("P", bound=tuple[Any, ...])

# --- the catalogue ---------------------------------------------------------------------------------

POSTGRES = "postgres"
HOST = "host"
PGBOUNCER = "pgbouncer"
SOURCES = (POSTGRES, HOST, PGBOUNCER)


@dataclass(frozen=True)
class MetricInfo:
    """What a stored metric means: where it comes from, its label key, unit and help text."""

    name: str
    source: str
    label: str  # "" for a series without labels
    unit: str
    help: str


_CATALOGUE = [
    # pg_stat_database, per database (rates from counters)
    MetricInfo("tps", POSTGRES, "db", "1/s", "Transactions (commits + rollbacks) per second"),
    MetricInfo("rollbacks_ps", POSTGRES, "db", "1/s", "Rollbacks per second"),
    MetricInfo("cache_hit_percent", POSTGRES, "db", "%", "Share of block reads served by shared buffers"),
    MetricInfo("tup_inserted_ps", POSTGRES, "db", "1/s", "Rows inserted per second"),
    MetricInfo("tup_updated_ps", POSTGRES, "db", "1/s", "Rows updated per second"),
    MetricInfo("tup_deleted_ps", POSTGRES, "db", "1/s", "Rows deleted per second"),
    MetricInfo("tup_fetched_ps", POSTGRES, "db", "1/s", "Rows fetched per second"),
    MetricInfo("deadlocks_ps", POSTGRES, "db", "1/s", "Deadlocks per second"),
    MetricInfo("temp_bytes_ps", POSTGRES, "db", "B/s", "Bytes written to temporary files per second"),
    MetricInfo("seq_scan_ps", POSTGRES, "db", "1/s", "Sequential scans per second"),
    MetricInfo("idx_scan_ps", POSTGRES, "db", "1/s", "Index scans per second"),
    MetricInfo("db_size_bytes", POSTGRES, "db", "B", "Database size"),
    # pg_stat_activity (gauges)
    MetricInfo("conn_state", POSTGRES, "state", "", "Client connections by state"),
    MetricInfo("conn_user", POSTGRES, "user", "", "Client connections by user"),
    MetricInfo("conn_db", POSTGRES, "db", "", "Client connections by database"),
    MetricInfo("conn_total", POSTGRES, "", "", "Client connections"),
    MetricInfo("max_connections", POSTGRES, "", "", "The server's max_connections"),
    MetricInfo("conn_percent", POSTGRES, "", "%", "Client connections as a share of max_connections"),
    # pg_stat_replication on the primary, per standby member or read-only replica (gauges)
    MetricInfo("replication_lag_bytes", POSTGRES, "member", "B", "WAL bytes a standby has not replayed"),
    MetricInfo("replication_lag_seconds", POSTGRES, "member", "s", "Replay delay of a standby (replay_lag)"),
    # host figures of local clusters
    MetricInfo("cpu_percent", HOST, "", "%", "CPU used by the cluster's processes, share of the machine"),
    MetricInfo("memory_bytes", HOST, "", "B", "Memory of the cluster's processes, shared counted once"),
    MetricInfo("load1", HOST, "", "", "Machine load average over 1 minute"),
    MetricInfo("load5", HOST, "", "", "Machine load average over 5 minutes"),
    MetricInfo("load15", HOST, "", "", "Machine load average over 15 minutes"),
    MetricInfo("disk_used_bytes", HOST, "", "B", "Bytes used by the data directory"),
    MetricInfo("disk_percent", HOST, "", "%", "Used share of the data directory's filesystem"),
    # PgBouncer, per pool
    MetricInfo("pool_cl_active", PGBOUNCER, "pool", "", "Clients paired with a server connection"),
    MetricInfo("pool_cl_waiting", PGBOUNCER, "pool", "", "Clients waiting for a server connection"),
    MetricInfo("pool_sv_active", PGBOUNCER, "pool", "", "Server connections in use"),
    MetricInfo("pool_sv_idle", PGBOUNCER, "pool", "", "Server connections idle and ready"),
    MetricInfo("pool_sv_used", PGBOUNCER, "pool", "", "Server connections idle, to be checked"),
    MetricInfo("pool_maxwait_seconds", PGBOUNCER, "pool", "s", "Longest wait of a queued client"),
    MetricInfo("pool_size", PGBOUNCER, "pool", "", "Configured pool size"),
    MetricInfo("pool_xact_ps", PGBOUNCER, "pool", "1/s", "Transactions through the pool per second"),
    MetricInfo("pool_query_ps", PGBOUNCER, "pool", "1/s", "Queries through the pool per second"),
    MetricInfo("pool_wait_ps", PGBOUNCER, "pool", "s/s", "Client wait time per second (seconds waited)"),
    # whether each source answered at this collection (1) or not (0)
    MetricInfo("up", "", "source", "", "1 when the source answered the last collection, 0 when not"),
]
CATALOGUE: dict[str, MetricInfo] = {m.name: m for m in _CATALOGUE}

# Raw counter name → (rate metric, factor applied to the per-second rate).
COUNTER_RATES: dict[str, tuple[str, float]] = {
    "xact_total": ("tps", 1.0),
    "xact_rollback": ("rollbacks_ps", 1.0),
    "tup_inserted": ("tup_inserted_ps", 1.0),
    "tup_updated": ("tup_updated_ps", 1.0),
    "tup_deleted": ("tup_deleted_ps", 1.0),
    "tup_fetched": ("tup_fetched_ps", 1.0),
    "deadlocks": ("deadlocks_ps", 1.0),
    "temp_bytes": ("temp_bytes_ps", 1.0),
    "seq_scan": ("seq_scan_ps", 1.0),
    "idx_scan": ("idx_scan_ps", 1.0),
    "pool_xact": ("pool_xact_ps", 1.0),
    "pool_query": ("pool_query_ps", 1.0),
    "pool_wait_us": ("pool_wait_ps", 1e-6),
}
# Counters whose deltas combine into one ratio rather than a rate.
RATIO_COUNTERS = ("blks_hit", "blks_read")


def label(key: str, value: str) -> str:
    return f"{key}={value}"


def split_label(labels: str) -> tuple[str, str] | None:
    if not labels:
        return None
    key, _sep, value = labels.partition("=")
    return key, value


def replication_label(
    application_name: str, members: Collection[str], replicas: Mapping[str, str]
) -> str | None:
    """The labels of a walsender's lag: ``member=NAME`` for a standby member (Patroni streams
    under the member's name), ``member=replica:NAME`` for a read-only replica (it streams under
    its slot's name); None for anything else (a base backup, a logical subscriber)."""
    if application_name in members:
        return label("member", application_name)
    if application_name in replicas:
        return label("member", f"replica:{replicas[application_name]}")
    return None


# --- counters → rates --------------------------------------------------------------------------


@dataclass(frozen=True)
class CounterReading:
    """A counter's raw value at a time (seconds since the epoch or any monotonic origin)."""

    value: float
    at: float


@dataclass(frozen=True)
class RateResult:
    """``rate`` is None when there is no rate to report; ``reset`` when a new series starts."""

    rate: float | None
    reset: bool


def rate(
    previous: CounterReading | None, current: CounterReading, *, max_gap: float | None = None
) -> RateResult:
    """Per-second rate between two readings of one counter.

    No previous reading: the series starts (no rate yet). A counter lower than before, or a
    reading not after the previous one, was reset: a new series starts, never a negative rate. A
    gap longer than ``max_gap`` seconds also starts a new series, so an outage is not smeared into
    one average.
    """
    if previous is None:
        return RateResult(None, False)
    elapsed = current.at - previous.at
    if current.value < previous.value or elapsed <= 0:
        return RateResult(None, True)
    if max_gap is not None and elapsed > max_gap:
        return RateResult(None, True)
    return RateResult((current.value - previous.value) / elapsed, False)


def hit_percent(hit_delta: float, read_delta: float) -> float | None:
    """Cache hit ratio (percent) of one interval; None when no block was touched or on a reset."""
    if hit_delta < 0 or read_delta < 0:
        return None
    total = hit_delta + read_delta
    if total == 0:
        return None
    return 100.0 * hit_delta / total


# --- rollups -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregate:
    """min, max, average and count of the non-missing values of one bucket."""

    min: float
    max: float
    avg: float
    count: int

    def merge(self, other: Aggregate) -> Aggregate:
        count = self.count + other.count
        return Aggregate(
            min(self.min, other.min),
            max(self.max, other.max),
            (self.avg * self.count + other.avg * other.count) / count,
            count,
        )


def bucket_start(at: dt.datetime, seconds: int = ROLLUP_SECONDS) -> dt.datetime:
    """The start of the ``seconds``-wide bucket holding ``at`` (aligned on the epoch)."""
    epoch = int(at.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % seconds, tz=at.tzinfo or dt.UTC)


def aggregate(values: Iterable[float | None]) -> Aggregate | None:
    """The aggregate of the values that are not missing; None when all are."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return Aggregate(min(present), max(present), sum(present) / len(present), len(present))


def bucket_ms(at_ms: int, seconds: int = ROLLUP_SECONDS) -> int:
    """The start (ms since the epoch) of the ``seconds``-wide bucket holding ``at_ms``."""
    width = seconds * 1000
    return at_ms - at_ms % width


def rollup(points: Iterable[tuple[int, float | None]], seconds: int = ROLLUP_SECONDS) -> dict[int, Aggregate]:
    """Bucket start → aggregate of one series' points (times in ms since the epoch); buckets
    holding only gaps are left out."""
    buckets: dict[int, list[float | None]] = {}
    for at_ms, value in points:
        buckets.setdefault(bucket_ms(at_ms, seconds), []).append(value)
    result = {}
    for start, values in sorted(buckets.items()):
        agg = aggregate(values)
        if agg is not None:
            result[start] = agg
    return result


# --- gaps for charts -----------------------------------------------------------------------------


def with_gaps(
    points: Sequence[P], step_seconds: float, *, tolerance: float = 2.5
) -> list[P | tuple[int, None]]:
    """The points (tuples starting with a time in ms since the epoch and a value) with a
    ``(time, None)`` inserted wherever two neighbours are further apart than ``tolerance`` steps,
    so a chart breaks its line over missing collections instead of drawing a straight line
    through an outage."""
    out: list[P | tuple[int, None]] = []
    step_ms = int(step_seconds * 1000)
    limit = step_ms * tolerance
    previous_at, previous_value = None, None
    for point in points:
        at, value = point[0], point[1]
        if previous_at is not None and at - previous_at > limit and previous_value is not None:
            out.append((previous_at + step_ms, None))
        out.append(point)
        previous_at, previous_value = at, value
    return out
