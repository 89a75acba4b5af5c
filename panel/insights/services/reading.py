"""Reading the store: a chart page's series (a few hundred points a line whatever the window: raw
points, then 1-minute, 5-minute and coarser rollups, see ``resolution_for``), the labels a metric
had, and the values of the last collection (the banner, the overview, ``/metrics``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights.lib import metrics
from panel.insights.lib.metrics import POSTGRES
from panel.insights.models import CounterState, EpochMs, MetricPoint, MetricRollup
from panel.insights.services.rollups import last_bucket
from panel.insights.services.tiers import (
    FIVE_MINUTES,
    FOUR_HOURS,
    HOUR,
    MINUTE,
    RANGES,
    RAW_RETENTION,
    START_COUNTER,
    interval,
)


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


# (name, step, tier read, tier whose last bucket says where raw points take over): each window
# reads the tier that keeps a line at a few hundred points, more than a chart's width shows.
RESOLUTIONS = (
    Resolution("raw", 0, None, None),  # step: the collector's interval
    Resolution("1m", MINUTE, MINUTE, MINUTE),
    Resolution("5m", FIVE_MINUTES, FIVE_MINUTES, FIVE_MINUTES),
    Resolution("1h", HOUR, HOUR, FIVE_MINUTES),
    Resolution("4h", FOUR_HOURS, FOUR_HOURS, FIVE_MINUTES),
)
SPANS = {  # the longest window each resolution serves; the last serves any
    "raw": dt.timedelta(hours=1),
    "1m": dt.timedelta(hours=6),
    "5m": dt.timedelta(hours=24),
    "1h": dt.timedelta(days=7),
}


def resolution_for(start: dt.datetime, end: dt.datetime, now: dt.datetime | None = None) -> Resolution:
    """At most a few hundred points a line whatever the window: raw points up to an hour (240),
    1-minute rollups up to 6 hours (360), 5-minute ones up to a day (288), hourly ones up to 7
    days (168), 4-hour merges of the hourly ones beyond (180 for 30 days). Raw points and
    1-minute rollups are kept 24 hours, so an older window skips them even when short."""
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
    rows: Iterable[tuple[Any, ...]]  # raw points or rollups: (metric, labels, *figures)
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
        last = last_bucket(res.tail_after, cluster) if res.tail_after else None
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
    collected = {c.pk: c.last_at for c in found if c.last_at is not None}
    values: dict[object, dict[tuple[str, str], float]] = {pk: {} for pk in collected}
    if collected:
        # Along the (cluster, ts) index; a row of another cluster's collection time is dropped here
        # (an OR of pairs instead would nest past SQLite's expression depth with many clusters).
        rows = MetricPoint.objects.filter(
            cluster_id__in=collected, ts__in=set(collected.values()), value__isnull=False
        ).values_list("cluster_id", "ts", "metric", "labels", "value")
        for cluster_id, ts, metric, labels, value in rows:
            if ts == collected[cluster_id]:
                values[cluster_id][(metric, labels)] = cast(float, value)  # value__isnull=False
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
