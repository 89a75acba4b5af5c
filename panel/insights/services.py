"""Collecting, storing, rolling up and reading metrics; the entry points of tasks, command and views.

A collection reads every cluster concurrently (a small thread pool; each cluster has a hard
5-second budget, see ``collector``), and the calling thread stores what came back: gauges as they
are, counters as per-second rates from the previous reading (``CounterState``). A source that did
not answer writes ``up=0`` and a NULL point for each of its series (a gap, never a zero), and its
counters start new series once it answers again.

Charts read ``read_series()``: a few hundred points a line whatever the window (raw points, then
1-minute, 5-minute and hourly rollups, see ``resolution_for``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import NamedTuple

from django.conf import settings
from django.db import connections, transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterStatus
from panel.insights import collector, metrics
from panel.insights.alerts import evaluate_alerts, firing_alerts, save_rule  # noqa: F401  (service API)
from panel.insights.metrics import CATALOGUE, COUNTER_RATES, HOST, PGBOUNCER, POSTGRES
from panel.insights.models import CounterState, EpochMs, MetricPoint, MetricRollup
from panel.pools.models import Pooler

log = logging.getLogger(__name__)

RAW_RETENTION = dt.timedelta(hours=24)
ROLLUP_RETENTION = dt.timedelta(days=30)
MINUTE = 60
FIVE_MINUTES = metrics.ROLLUP_SECONDS
QUARTER = 900
HOUR = 3600
# Rollup tiers (MetricRollup.seconds): 1 and 5 minutes from the raw points, 15 minutes and hours
# merged from the 5-minute ones. 1-minute rollups are kept as long as raw points, the others 30 days.
RAW_TIERS = (MINUTE, FIVE_MINUTES)
MERGED_TIERS = (QUARTER, HOUR)
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


def note_postmaster_gone(cluster: Cluster, snap: collector.Snapshot) -> None:
    """A local cluster shown online whose PostgreSQL did not answer and has no postmaster is
    degraded from this collection on, not online until the next reconciler pass."""
    if not (cluster.is_local and cluster.status == ClusterStatus.ONLINE and snap.up.get(POSTGRES) is False):
        return
    if postgres.postmaster_pid(cluster.pgdata) is None and cluster.mark_postmaster_gone():
        log.warning("insights: %s has no postmaster; marked degraded", cluster.pk)


def collect_cluster(cluster: Cluster) -> collector.Snapshot:
    """Collect and store one cluster in the foreground (command line, tests)."""
    if not cluster.is_serving:
        snap = _absent(cluster, f"the cluster is {cluster.status}")
    else:
        snap = collector.collect(target_for(cluster))
    note_postmaster_gone(cluster, snap)
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
                note_postmaster_gone(cluster, snap)
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


def _at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _last_bucket(seconds: int, cluster: Cluster | None = None) -> dt.datetime | None:
    """The newest bucket of a tier, of one cluster or of all."""
    rows = MetricRollup.objects.filter(seconds=seconds)
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    return rows.order_by("-bucket").values_list("bucket", flat=True).first()


def rollup(now: dt.datetime | None = None) -> int:
    """Build (or rebuild) the 1- and 5-minute rollups of every complete bucket since the last one,
    then the 15-minute and hourly ones (the bucket in progress too) from the 5-minute ones."""
    now = now or timezone.now()
    built = 0
    for seconds in RAW_TIERS:
        count, start = rollup_raw(seconds, now)
        built += count
    # ``start`` is where the 5-minute pass began: every 5-minute bucket since has been (re)built.
    for seconds in MERGED_TIERS:
        built += rollup_merged(seconds, metrics.bucket_start(start, seconds), metrics.bucket_start(now))
    return built


def rollup_raw(seconds: int, now: dt.datetime) -> tuple[int, dt.datetime]:
    """Roll the raw points into ``seconds`` buckets since the last such bucket; returns how many
    buckets were written and where the pass started."""
    end = metrics.bucket_start(now, seconds)
    last = _last_bucket(seconds)
    # The last rolled bucket is rebuilt: points stored after it was rolled join it.
    start = last if last is not None else end - RAW_RETENTION
    start = max(start, now - RAW_RETENTION)
    rows = (
        MetricPoint.objects.filter(ts__gte=start, ts__lt=end)
        .annotate(at_ms=EpochMs("ts"))
        .order_by("cluster_id", "metric", "labels", "ts")
        .values_list("cluster_id", "metric", "labels", "at_ms", "value")
    )
    series: dict[tuple[object, str, str], list[tuple[int, float | None]]] = {}
    for cluster_id, metric, labels, at_ms, value in rows.iterator(chunk_size=5000):
        series.setdefault((cluster_id, metric, labels), []).append((at_ms, value))
    rollups = [
        _rollup_row((cluster_id, metric, labels, bucket), seconds, agg)
        for (cluster_id, metric, labels), pts in series.items()
        for bucket, agg in metrics.rollup(pts, seconds).items()
    ]
    _upsert_rollups(rollups)
    return len(rollups), start


def _rollup_row(key: tuple[object, str, str, int], seconds: int, agg: metrics.Aggregate) -> MetricRollup:
    """The row of one bucket; ``key`` is (cluster id, metric, labels, bucket start in ms)."""
    cluster_id, metric, labels, bucket = key
    return MetricRollup(
        cluster_id=cluster_id,
        metric=metric,
        labels=labels,
        seconds=seconds,
        bucket=_at(bucket),
        min=agg.min,
        max=agg.max,
        avg=agg.avg,
        count=agg.count,
    )


def _upsert_rollups(rollups: list[MetricRollup]) -> None:
    MetricRollup.objects.bulk_create(
        rollups,
        batch_size=500,
        update_conflicts=True,
        unique_fields=["cluster", "metric", "labels", "seconds", "bucket"],
        update_fields=["min", "max", "avg", "count"],
    )


def rollup_merged(seconds: int, start: dt.datetime, end: dt.datetime) -> int:
    """Merge the 5-minute rollups of ``[start, end)`` into ``seconds`` buckets (the one in progress
    too)."""
    rows = (
        MetricRollup.objects.filter(seconds=FIVE_MINUTES, bucket__gte=start, bucket__lt=end)
        .annotate(at_ms=EpochMs("bucket"))
        .order_by("cluster_id", "metric", "labels", "bucket")
        .values_list("cluster_id", "metric", "labels", "at_ms", "min", "max", "avg", "count")
    )
    merged: dict[tuple[object, str, str, int], metrics.Aggregate] = {}
    for cluster_id, metric, labels, at_ms, lo, hi, avg, count in rows.iterator(chunk_size=5000):
        key = (cluster_id, metric, labels, metrics.bucket_ms(at_ms, seconds))
        agg = metrics.Aggregate(lo, hi, avg, count)
        merged[key] = merged[key].merge(agg) if key in merged else agg
    _upsert_rollups([_rollup_row(key, seconds, agg) for key, agg in merged.items()])
    return len(merged)


def prune(now: dt.datetime | None = None) -> tuple[int, int]:
    """Delete raw points and 1-minute rollups older than 24 hours, other rollups older than 30 days."""
    now = now or timezone.now()
    raw, _ = MetricPoint.objects.filter(ts__lt=now - RAW_RETENTION).delete()
    rolled, _ = MetricRollup.objects.filter(
        Q(seconds=MINUTE, bucket__lt=now - RAW_RETENTION) | Q(bucket__lt=now - ROLLUP_RETENTION)
    ).delete()
    CounterState.objects.filter(ts__lt=now - RAW_RETENTION).delete()
    return raw, rolled


def prune_and_rollup(now: dt.datetime | None = None) -> dict[str, int]:
    """The beat task's work: roll up first, so no point is pruned before it is rolled."""
    now = now or timezone.now()
    built = rollup(now)
    raw, rolled = prune(now)
    return {"rollups_built": built, "points_pruned": raw, "rollups_pruned": rolled}


# --- reading (charts, banner, Prometheus) -----------------------------------------------------------


class SeriesPoint(NamedTuple):
    """One chart point at ``at`` (ms since the epoch); ``value`` None breaks the line. Rollups carry
    the bucket's min and max. (A tuple: a 30-day page builds tens of thousands of them.)"""

    at: int
    value: float | None
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class Series:
    metric: str
    labels: str
    resolution: str  # "raw", "1m", "5m", "15m" or "1h"
    step_seconds: int
    points: list[SeriesPoint]


@dataclass(frozen=True)
class Resolution:
    name: str  # "raw", "1m", "5m", "15m" or "1h"
    seconds: int  # the step between points
    rollup: int | None  # the rollup tier read (MetricRollup.seconds), None for raw points
    tail_after: int | None  # the tier whose last bucket says where raw points take over


# (name, longest window, step and tier read, tier whose last bucket says where raw points take over)
RESOLUTIONS = (
    Resolution("raw", 0, None, None),  # step: the collector's interval
    Resolution("1m", MINUTE, MINUTE, MINUTE),
    Resolution("5m", FIVE_MINUTES, FIVE_MINUTES, FIVE_MINUTES),
    Resolution("15m", QUARTER, QUARTER, FIVE_MINUTES),
    Resolution("1h", HOUR, HOUR, FIVE_MINUTES),
)
SPANS = {
    "raw": dt.timedelta(hours=1),
    "1m": dt.timedelta(hours=6),
    "5m": dt.timedelta(hours=24),
    "15m": dt.timedelta(days=7),
}


def resolution_for(start: dt.datetime, end: dt.datetime, now: dt.datetime | None = None) -> Resolution:
    """At most ~700 points a line whatever the window: raw points up to an hour, 1-minute rollups up
    to 6 hours, 5-minute ones up to a day, 15-minute ones up to 7 days, hourly ones beyond. Raw
    points and 1-minute rollups are kept 24 hours, so an older window skips them even when short."""
    now = now or timezone.now()
    span, recent = end - start, start >= now - RAW_RETENTION
    for res in RESOLUTIONS:
        if res.rollup in (None, MINUTE) and not recent:
            continue
        if res.name not in SPANS or span <= SPANS[res.name]:
            return Resolution(res.name, res.seconds or interval(), res.rollup, res.tail_after)
    raise AssertionError("unreachable: the last resolution has no span limit")


Wanted = tuple[str, str | None]  # (metric, labels); labels None: every labels value of the metric


def read_series(
    cluster: Cluster,
    wanted: Iterable[Wanted],
    start: dt.datetime,
    end: dt.datetime,
    now: dt.datetime | None = None,
) -> dict[tuple[str, str], Series]:
    """The series of ``[start, end]`` for a chart page's lines, by ``(metric, labels)``.

    ``labels`` None asks for every labels value the metric has in the window (one chart line per
    database, state…); a labels value asked for by name is in the result even with no point.
    One query along the cluster's time (or tier and bucket) index, with times computed by the
    database; rollup windows add the raw points the last rollup has not reached yet (one query),
    aggregated here, so the live edge of a 6-hour or 30-day chart is as fresh as the last
    collection.
    """
    res = resolution_for(start, end, now)
    by_metric: dict[str, set[str] | None] = {}
    for metric, labels in wanted:
        if labels is None:
            by_metric[metric] = None
        elif metric not in by_metric or by_metric[metric] is not None:
            by_metric.setdefault(metric, set()).add(labels)  # type: ignore[union-attr]
    if not by_metric:
        return {}

    def keep(metric: str, labels: str) -> bool:
        asked = by_metric[metric]
        return asked is None or labels in asked

    # Rows by series in time order: (at, value) raw points or (at, avg, min, max, count) rollups.
    found: dict[tuple[str, str], list[tuple]] = {
        (metric, labels): [] for metric, asked in by_metric.items() for labels in sorted(asked or ())
    }
    if res.rollup is None:
        rows = _raw_rows(cluster, by_metric, start, end)
    else:
        rows = (
            MetricRollup.objects.filter(
                cluster=cluster,
                seconds=res.rollup,
                metric__in=sorted(by_metric),
                bucket__gte=start,
                bucket__lte=end,
            )
            .annotate(at_ms=EpochMs("bucket"))
            .order_by("bucket")
            .values_list("metric", "labels", "at_ms", "avg", "min", "max", "count")
        )
    for metric, labels, *row in rows:
        if keep(metric, labels):
            found.setdefault((metric, labels), []).append(tuple(row))
    if res.rollup is not None:
        # Raw points after the last rollup, aggregated the same way (the bucket in progress merges).
        last = _last_bucket(res.tail_after, cluster) if res.tail_after else None
        tail_from = start if last is None else max(start, last + dt.timedelta(seconds=res.tail_after or 0))
        tail: dict[tuple[str, str], list[tuple[int, float | None]]] = {}
        for metric, labels, at_ms, value in _raw_rows(cluster, by_metric, tail_from, end):
            if keep(metric, labels):
                tail.setdefault((metric, labels), []).append((at_ms, value))
        for key, points in tail.items():
            _merge_tail(found.setdefault(key, []), metrics.rollup(points, res.seconds))
    return {
        (metric, labels): Series(
            metric,
            labels,
            res.name,
            res.seconds,
            [SeriesPoint(*p[:4]) for p in metrics.with_gaps(rows, res.seconds)],
        )
        for (metric, labels), rows in found.items()
    }


def _raw_rows(
    cluster: Cluster, by_metric: dict[str, set[str] | None], start: dt.datetime, end: dt.datetime
) -> QuerySet[MetricPoint, tuple[str, str, int, float | None]]:
    """Every raw point of the metrics in the window, in time order (one range of the cluster's
    time index: cheaper than one query per line once a page has dozens of lines)."""
    return (
        MetricPoint.objects.filter(cluster=cluster, metric__in=sorted(by_metric), ts__gte=start, ts__lte=end)
        .annotate(at_ms=EpochMs("ts"))
        .order_by("ts")
        .values_list("metric", "labels", "at_ms", "value")
    )


def _merge_tail(rows: list[tuple], tail: dict[int, metrics.Aggregate]) -> None:
    """Append aggregated raw points to a series' rollup rows; the bucket the rollups already hold
    in part (an hour in progress) merges them."""
    for bucket, agg in tail.items():
        if rows and rows[-1][0] == bucket:
            _at, avg, lo, hi, count = rows.pop()
            agg = metrics.Aggregate(lo, hi, avg, count).merge(agg)
        rows.append((bucket, agg.avg, agg.min, agg.max, agg.count))


def series(cluster: Cluster, metric: str, labels: str, start: dt.datetime, end: dt.datetime) -> Series:
    """Points of one series in ``[start, end]`` at the resolution ``resolution_for`` picks."""
    return read_series(cluster, [(metric, labels)], start, end)[(metric, labels)]


def series_for_range(
    cluster: Cluster, metric: str, labels: str, range_key: str, now: dt.datetime | None = None
) -> Series:
    """``series()`` for one of the chart ranges: 1h, 6h, 24h, 7d, 30d."""
    now = now or timezone.now()
    return read_series(cluster, [(metric, labels)], now - RANGES[range_key], now, now)[(metric, labels)]


def labels_of(cluster: Cluster, metric: str, since: dt.timedelta = RAW_RETENTION) -> list[str]:
    """The label values a metric had recently (databases, pools, states…): one chart line each."""
    start = timezone.now() - since
    raw = MetricPoint.objects.filter(cluster=cluster, metric=metric, ts__gte=start)
    found = set(raw.values_list("labels", flat=True).distinct())
    if since > RAW_RETENTION:
        rolled = MetricRollup.objects.filter(cluster=cluster, metric=metric, seconds=HOUR, bucket__gte=start)
        found |= set(rolled.values_list("labels", flat=True).distinct())
    return sorted(found)


def server_started_at(cluster: Cluster) -> dt.datetime | None:
    """When the cluster's postmaster started, as its last collection read it (None if never)."""
    value = (
        CounterState.objects.filter(cluster=cluster, counter=START_COUNTER, labels="")
        .values_list("value", flat=True)
        .first()
    )
    return None if value is None else dt.datetime.fromtimestamp(value, dt.UTC)


@dataclass(frozen=True)
class Latest:
    """The values of the cluster's last collection; ``stale`` when it is older than three intervals."""

    at: dt.datetime | None
    values: dict[tuple[str, str], float]
    stale: bool

    def get(self, metric: str, labels: str = "") -> float | None:
        return self.values.get((metric, labels))


def latest(cluster: Cluster, now: dt.datetime | None = None) -> Latest:
    """The values of the cluster's last collection."""
    return latest_of(Cluster.objects.filter(pk=cluster.pk), now)[0][1]


def latest_of(clusters: QuerySet[Cluster], now: dt.datetime | None = None) -> list[tuple[Cluster, Latest]]:
    """``latest()`` of every cluster of ``clusters``, in two queries whatever their number (a
    ``/metrics`` scrape reads them all): the clusters with the time of their last collection, then
    the points of those collections."""
    now = now or timezone.now()
    last_at = (
        MetricPoint.objects.filter(
            cluster=OuterRef("pk"), metric="up", labels=metrics.label("source", POSTGRES)
        )
        .order_by("-ts")
        .values("ts")[:1]
    )
    found = list(clusters.annotate(last_at=Subquery(last_at)))
    collected = {c.pk: c.last_at for c in found if c.last_at is not None}  # type: ignore[attr-defined]
    values: dict[object, dict[tuple[str, str], float]] = {pk: {} for pk in collected}
    if collected:
        # Along the (cluster, ts) index; a row of another cluster's collection time is dropped here
        # (an OR of pairs instead would nest past SQLite's expression depth with many clusters).
        rows = MetricPoint.objects.filter(
            cluster_id__in=collected, ts__in=set(collected.values()), value__isnull=False
        ).values_list("cluster_id", "ts", "metric", "labels", "value")
        for cluster_id, ts, metric, labels, value in rows:
            if ts == collected[cluster_id]:
                values[cluster_id][(metric, labels)] = value
    stale_after = dt.timedelta(seconds=3 * interval())
    return [
        (
            c,
            Latest(at, values[c.pk], now - at > stale_after)
            if (at := collected.get(c.pk))
            else Latest(None, {}, True),
        )
        for c in found
    ]
