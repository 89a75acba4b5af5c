"""Collecting, storing, rolling up and reading metrics; the entry points of tasks, command and views.

A collection reads every cluster concurrently (a small thread pool; each cluster has a hard
5-second budget, see ``collector``), and the calling thread stores what came back: gauges as they
are, counters as per-second rates from the previous reading (``CounterState``). A source that did
not answer writes ``up=0`` and a NULL point for each of its series (a gap, never a zero), and its
counters start new series once it answers again.

Charts read ``series()``: raw points up to 24 hours back, 5-minute rollups beyond.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from panel.clusters.models import Cluster, ClusterStatus
from panel.insights import collector, metrics
from panel.insights.alerts import evaluate_alerts, firing_alerts, save_rule  # noqa: F401  (service API)
from panel.insights.metrics import CATALOGUE, COUNTER_RATES, HOST, PGBOUNCER, POSTGRES
from panel.insights.models import CounterState, MetricPoint, MetricRollup
from panel.pools.models import Pooler

log = logging.getLogger(__name__)

RAW_RETENTION = dt.timedelta(hours=24)
ROLLUP_RETENTION = dt.timedelta(days=30)
# Ranges longer than this read hourly figures merged from the 5-minute rollups.
COARSE_AFTER = dt.timedelta(days=7)
HOUR = 3600
MAX_WORKERS = 4
# Grace over the collector's own budget before the cycle stops waiting for a cluster.
ABANDON_AFTER = collector.BUDGET_SECONDS + 1.0
START_COUNTER = "_start"  # the postmaster's start time: a change means every counter restarted

RANGES: dict[str, dt.timedelta] = {
    "1h": dt.timedelta(hours=1),
    "6h": dt.timedelta(hours=6),
    "24h": dt.timedelta(hours=24),
    "7d": dt.timedelta(days=7),
    "30d": dt.timedelta(days=30),
}


def interval() -> int:
    return int(settings.PANEL_METRICS_INTERVAL)


# --- collecting -------------------------------------------------------------------------------------


def target_for(cluster: Cluster) -> collector.Target:
    pools = dict(cluster.pools.values_list("name", "size")) if cluster.is_local else {}
    pooler = Pooler.objects.filter(cluster=cluster).first() if pools else None
    return collector.Target(cluster=cluster, pools=pools, pooler=pooler)


def _collect_in_thread(target: collector.Target) -> collector.Snapshot:
    try:
        return collector.collect(target)
    finally:
        # An attached cluster's credentials are read from the panel's database in this thread.
        connections.close_all()


def _absent(cluster: Cluster, reason: str) -> collector.Snapshot:
    """The snapshot of a cluster that was not (or could not be) read: every source down."""
    snap = collector.Snapshot(at=dt.datetime.now(dt.UTC))
    sources = [POSTGRES, HOST] if cluster.is_local else [POSTGRES]
    if cluster.is_local and cluster.pools.exists():
        sources.append(PGBOUNCER)
    for source in sources:
        snap.up[source] = False
        snap.errors[source] = reason
    return snap


def collect_cluster(cluster: Cluster) -> collector.Snapshot:
    """Collect and store one cluster in the foreground (command line, tests)."""
    if not cluster.is_serving:
        snap = _absent(cluster, f"the cluster is {cluster.status}")
    else:
        snap = collector.collect(target_for(cluster))
    store(cluster, snap)
    return snap


def collect_all() -> dict[str, collector.Snapshot]:
    """Collect every cluster once, concurrently; returns snapshots by cluster id.

    A cluster that does not answer within its budget is recorded as a gap and the cycle moves on;
    its thread ends by itself when its socket watchdog fires.
    """
    clusters = list(Cluster.objects.exclude(status=ClusterStatus.CREATING))
    results: dict[str, collector.Snapshot] = {}
    serving = [c for c in clusters if c.is_serving]
    for cluster in clusters:
        if not cluster.is_serving:
            results[str(cluster.pk)] = _absent(cluster, f"the cluster is {cluster.status}")
    started: dict[str, float] = {}  # cluster id → when its thread began

    def run(target: collector.Target) -> collector.Snapshot:
        started[str(target.cluster.pk)] = time.monotonic()
        return _collect_in_thread(target)

    pool = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="insights")
    futures: dict[Future[collector.Snapshot], Cluster] = {
        pool.submit(run, target_for(cluster)): cluster for cluster in serving
    }
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in done:
                cluster = futures[future]
                try:
                    results[str(cluster.pk)] = future.result()
                except Exception as exc:  # a bug must not stop the other clusters' collection
                    log.exception("insights: collecting %s failed", cluster.pk)
                    results[str(cluster.pk)] = _absent(cluster, f"collector error: {exc}")
            now = time.monotonic()
            late = {f for f in pending if now - started.get(str(futures[f].pk), now) > ABANDON_AFTER}
            for future in late:
                cluster = futures[future]
                log.warning("insights: %s did not answer within %.0f s", cluster.pk, ABANDON_AFTER)
                results[str(cluster.pk)] = _absent(cluster, "no answer within the collection budget")
            pending -= late
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    for cluster in clusters:
        snap = results.get(str(cluster.pk))
        if snap is not None:
            try:
                store(cluster, snap)
            except Exception:
                log.exception("insights: storing metrics of %s failed", cluster.pk)
    return results


# --- storing -------------------------------------------------------------------------------------


def _reading(state: CounterState | None) -> metrics.CounterReading | None:
    return None if state is None else metrics.CounterReading(state.value, state.ts.timestamp())


def store(cluster: Cluster, snap: collector.Snapshot) -> list[MetricPoint]:
    """Write one snapshot: gauges, rates from counters, gaps for silent sources; then alerts."""
    at = snap.at
    points: list[MetricPoint] = []

    def point(metric: str, labels: str, value: float | None) -> None:
        points.append(MetricPoint(cluster=cluster, metric=metric, labels=labels, ts=at, value=value))

    for source, answered in sorted(snap.up.items()):
        point("up", metrics.label("source", source), 1.0 if answered else 0.0)
    for metric, labels, value in snap.gauges:
        point(metric, labels, value)

    with transaction.atomic():
        states = {(s.counter, s.labels): s for s in CounterState.objects.filter(cluster=cluster)}
        failed = {source for source, answered in snap.up.items() if not answered}
        restarted = False
        if snap.started_at is not None:
            previous_start = states.get((START_COUNTER, ""))
            restarted = previous_start is not None and previous_start.value != snap.started_at
        fresh: list[CounterState] = []
        readings = {(name, labels): value for _s, name, labels, value in snap.counters}
        max_gap = interval() * 4.0
        for source, name, labels, value in snap.counters:
            state = states.get((name, labels))
            previous = None if (restarted and source == POSTGRES) else _reading(state)
            current = metrics.CounterReading(value, at.timestamp())
            if name in metrics.RATIO_COUNTERS:
                pass  # combined below
            elif name == "cpu_seconds":
                result = metrics.rate(previous, current, max_gap=max_gap)
                if result.rate is not None or result.reset:
                    point("cpu_percent", labels, None if result.rate is None else 100.0 * result.rate)
            else:
                rate_metric, factor = COUNTER_RATES[name]
                result = metrics.rate(previous, current, max_gap=max_gap)
                if result.reset or (state is not None and previous is None):
                    point(rate_metric, labels, None)  # a new series starts here
                elif result.rate is not None:
                    point(rate_metric, labels, result.rate * factor)
            fresh.append(
                CounterState(cluster=cluster, source=source, counter=name, labels=labels, ts=at, value=value)
            )
        _cache_hit_points(states, readings, restarted, max_gap, at, point)
        if snap.started_at is not None:
            fresh.append(
                CounterState(
                    cluster=cluster,
                    source=POSTGRES,
                    counter=START_COUNTER,
                    labels="",
                    ts=at,
                    value=snap.started_at,
                )
            )
        if failed:
            _gap_points(cluster, failed, at, point)
            CounterState.objects.filter(cluster=cluster, source__in=failed).delete()
        MetricPoint.objects.bulk_create(points)
        if fresh:
            CounterState.objects.bulk_create(
                fresh,
                update_conflicts=True,
                unique_fields=["cluster", "counter", "labels"],
                update_fields=["source", "ts", "value"],
            )
    evaluate_alerts(cluster, current_values(points), at)
    return points


def _cache_hit_points(
    states: dict[tuple[str, str], CounterState],
    readings: dict[tuple[str, str], float],
    restarted: bool,
    max_gap: float,
    at: dt.datetime,
    point: Callable[[str, str, float | None], None],
) -> None:
    for (name, labels), hit in readings.items():
        if name != "blks_hit" or ("blks_read", labels) not in readings:
            continue
        read = readings[("blks_read", labels)]
        old_hit, old_read = states.get(("blks_hit", labels)), states.get(("blks_read", labels))
        if restarted or old_hit is None or old_read is None:
            continue
        if at.timestamp() - old_hit.ts.timestamp() > max_gap:
            continue
        if hit < old_hit.value or read < old_read.value:
            point("cache_hit_percent", labels, None)
            continue
        value = metrics.hit_percent(hit - old_hit.value, read - old_read.value)
        if value is not None:
            point("cache_hit_percent", labels, value)


def _gap_points(
    cluster: Cluster, failed: set[str], at: dt.datetime, point: Callable[[str, str, float | None], None]
) -> None:
    """A NULL point for every series the silent sources wrote recently: the chart breaks there."""
    names = [m.name for m in CATALOGUE.values() if m.source in failed]
    recent = (
        MetricPoint.objects.filter(
            cluster=cluster, metric__in=names, ts__gte=at - dt.timedelta(seconds=interval() * 4)
        )
        .values_list("metric", "labels")
        .distinct()
    )
    for metric, labels in recent:
        point(metric, labels, None)


def current_values(points: list[MetricPoint]) -> dict[tuple[str, str], float]:
    return {(p.metric, p.labels): p.value for p in points if p.value is not None}


# --- retention and rollups --------------------------------------------------------------------------


def rollup(now: dt.datetime | None = None) -> int:
    """Build (or rebuild) the 5-minute rollups of every complete bucket since the last one."""
    now = now or timezone.now()
    end = metrics.bucket_start(now)
    last = (
        MetricRollup.objects.filter(seconds=metrics.ROLLUP_SECONDS)
        .order_by("-bucket")
        .values_list("bucket", flat=True)
        .first()
    )
    # The last rolled bucket is rebuilt: points stored after it was rolled join it.
    start = last if last is not None else end - RAW_RETENTION
    start = max(start, now - RAW_RETENTION)
    rows = (
        MetricPoint.objects.filter(ts__gte=start, ts__lt=end)
        .order_by("cluster_id", "metric", "labels", "ts")
        .values_list("cluster_id", "metric", "labels", "ts", "value")
    )
    series: dict[tuple[object, str, str], list[tuple[dt.datetime, float | None]]] = {}
    for cluster_id, metric, labels, ts, value in rows.iterator(chunk_size=5000):
        series.setdefault((cluster_id, metric, labels), []).append((ts, value))
    rollups = []
    for (cluster_id, metric, labels), pts in series.items():
        for bucket, agg in metrics.rollup(pts).items():
            rollups.append(
                MetricRollup(
                    cluster_id=cluster_id,
                    metric=metric,
                    labels=labels,
                    bucket=bucket,
                    min=agg.min,
                    max=agg.max,
                    avg=agg.avg,
                    count=agg.count,
                )
            )
    _upsert_rollups(rollups)
    return len(rollups) + _rollup_hours(metrics.bucket_start(start, HOUR), end)


def _upsert_rollups(rollups: list[MetricRollup]) -> None:
    MetricRollup.objects.bulk_create(
        rollups,
        batch_size=500,
        update_conflicts=True,
        unique_fields=["cluster", "metric", "labels", "seconds", "bucket"],
        update_fields=["min", "max", "avg", "count"],
    )


def _rollup_hours(start: dt.datetime, end: dt.datetime) -> int:
    """Merge the 5-minute rollups of ``[start, end)`` into hourly ones (the hour in progress too)."""
    rows = (
        MetricRollup.objects.filter(seconds=metrics.ROLLUP_SECONDS, bucket__gte=start, bucket__lt=end)
        .order_by("cluster_id", "metric", "labels", "bucket")
        .values_list("cluster_id", "metric", "labels", "bucket", "min", "max", "avg", "count")
    )
    hours: dict[tuple[object, str, str, dt.datetime], metrics.Aggregate] = {}
    for cluster_id, metric, labels, bucket, lo, hi, avg, count in rows.iterator(chunk_size=5000):
        key = (cluster_id, metric, labels, metrics.bucket_start(bucket, HOUR))
        agg = metrics.Aggregate(lo, hi, avg, count)
        hours[key] = hours[key].merge(agg) if key in hours else agg
    _upsert_rollups(
        [
            MetricRollup(
                cluster_id=cluster_id,
                metric=metric,
                labels=labels,
                seconds=HOUR,
                bucket=hour,
                min=agg.min,
                max=agg.max,
                avg=agg.avg,
                count=agg.count,
            )
            for (cluster_id, metric, labels, hour), agg in hours.items()
        ]
    )
    return len(hours)


def prune(now: dt.datetime | None = None) -> tuple[int, int]:
    """Delete raw points older than 24 hours and rollups older than 30 days."""
    now = now or timezone.now()
    raw, _ = MetricPoint.objects.filter(ts__lt=now - RAW_RETENTION).delete()
    rolled, _ = MetricRollup.objects.filter(bucket__lt=now - ROLLUP_RETENTION).delete()
    CounterState.objects.filter(ts__lt=now - RAW_RETENTION).delete()
    return raw, rolled


def prune_and_rollup(now: dt.datetime | None = None) -> dict[str, int]:
    """The beat task's work: roll up first, so no point is pruned before it is rolled."""
    now = now or timezone.now()
    built = rollup(now)
    raw, rolled = prune(now)
    return {"rollups_built": built, "points_pruned": raw, "rollups_pruned": rolled}


# --- reading (charts, banner, Prometheus) -----------------------------------------------------------


@dataclass(frozen=True)
class SeriesPoint:
    """One chart point; ``value`` None breaks the line. Rollups carry the bucket's min and max."""

    ts: dt.datetime
    value: float | None
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class Series:
    metric: str
    labels: str
    resolution: str  # "raw", "5m" or "1h"
    step_seconds: int
    points: list[SeriesPoint]


def _resolution(start: dt.datetime, end: dt.datetime) -> tuple[str, int]:
    """Raw points up to 24 hours, 5-minute rollups up to 7 days, hourly rollups beyond."""
    if end - start <= RAW_RETENTION:
        return "raw", interval()
    # Beyond 7 days, 8,640 five-minute points a series are more than a chart shows: hours.
    if end - start <= COARSE_AFTER:
        return "5m", metrics.ROLLUP_SECONDS
    return "1h", HOUR


def series_many(
    cluster: Cluster, keys: Iterable[tuple[str, str]], start: dt.datetime, end: dt.datetime
) -> dict[tuple[str, str], Series]:
    """``series()`` of every ``(metric, labels)`` in ``keys`` (a chart page's lines together); a key
    with no stored point has an empty series."""
    wanted = set(keys)
    if not wanted:
        return {}
    resolution, step = _resolution(start, end)
    found: dict[tuple[str, str], list[tuple]] = {key: [] for key in wanted}
    # One query per line, walking the (cluster, metric, labels, ts) index in order: measured on
    # SQLite, reading several lines in one query sorts the whole window and is slower (24 h:
    # 1.25 s per line vs 1.8-1.9 s combined, scripts/perf/insights_page.py).
    for metric, labels in wanted:
        if resolution == "raw":
            rows = (
                MetricPoint.objects.filter(
                    cluster=cluster, metric=metric, labels=labels, ts__gte=start, ts__lte=end
                )
                .order_by("ts")
                .values_list("ts", "value")
            )
        else:
            rows = (
                MetricRollup.objects.filter(
                    cluster=cluster,
                    metric=metric,
                    labels=labels,
                    seconds=step,
                    bucket__gte=start,
                    bucket__lte=end,
                )
                .order_by("bucket")
                .values_list("bucket", "avg", "min", "max")
            )
        found[(metric, labels)] = [tuple(row) for row in rows]
    result = {}
    for (metric, labels), got in found.items():
        if resolution == "raw":
            points = [SeriesPoint(ts, v) for ts, v in metrics.with_gaps(got, step)]
        else:
            extremes = {bucket: (lo, hi) for bucket, _avg, lo, hi in got}
            gapped = metrics.with_gaps([(bucket, avg) for bucket, avg, _lo, _hi in got], step)
            points = [SeriesPoint(ts, v, *extremes.get(ts, (None, None))) for ts, v in gapped]
        result[(metric, labels)] = Series(metric, labels, resolution, step, points)
    return result


def series(cluster: Cluster, metric: str, labels: str, start: dt.datetime, end: dt.datetime) -> Series:
    """Points of one series in ``[start, end]``: raw up to 24 hours, 5-minute rollups up to 7 days,
    hourly rollups beyond (``resolution`` "raw", "5m" or "1h")."""
    return series_many(cluster, [(metric, labels)], start, end)[(metric, labels)]


def series_for_range(
    cluster: Cluster, metric: str, labels: str, range_key: str, now: dt.datetime | None = None
) -> Series:
    """``series()`` for one of the chart ranges: 1h, 6h, 24h, 7d, 30d."""
    now = now or timezone.now()
    return series(cluster, metric, labels, now - RANGES[range_key], now)


def labels_of(cluster: Cluster, metric: str, since: dt.timedelta = RAW_RETENTION) -> list[str]:
    """The label values a metric had recently (databases, pools, states…): one chart line each."""
    start = timezone.now() - since
    raw = MetricPoint.objects.filter(cluster=cluster, metric=metric, ts__gte=start)
    rolled = MetricRollup.objects.filter(cluster=cluster, metric=metric, bucket__gte=start)
    found = set(raw.values_list("labels", flat=True).distinct())
    if since > RAW_RETENTION:
        found |= set(rolled.values_list("labels", flat=True).distinct())
    return sorted(found)


@dataclass(frozen=True)
class Latest:
    """The values of the cluster's last collection; ``stale`` when it is older than three intervals."""

    at: dt.datetime | None
    values: dict[tuple[str, str], float]
    stale: bool

    def get(self, metric: str, labels: str = "") -> float | None:
        return self.values.get((metric, labels))


def latest(cluster: Cluster, metric: str | None = None, now: dt.datetime | None = None) -> Latest:
    now = now or timezone.now()
    at = (
        MetricPoint.objects.filter(cluster=cluster, metric="up", labels="source=postgres")
        .order_by("-ts")
        .values_list("ts", flat=True)
        .first()
    )
    if at is None:
        return Latest(None, {}, True)
    rows = MetricPoint.objects.filter(cluster=cluster, ts=at, value__isnull=False)
    if metric is not None:
        rows = rows.filter(metric=metric)
    values = {(m, labels): v for m, labels, v in rows.values_list("metric", "labels", "value")}
    return Latest(at, values, now - at > dt.timedelta(seconds=3 * interval()))
