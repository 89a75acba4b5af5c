"""Retention and rollups: raw points rolled into 1- and 5-minute buckets, those merged into hourly and
4-hour ones, each bucket's min, max, average and count computed by the database (GROUP BY),
then written with one upsert; old rows pruned."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import (
    Avg,
    BigIntegerField,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights.lib import metrics
from panel.insights.models import CounterState, EpochMs, MetricPoint, MetricRollup
from panel.insights.services.queries import prune_statements
from panel.insights.services.tiers import (
    FIVE_MINUTES,
    MERGED_TIERS,
    MINUTE,
    RAW_RETENTION,
    RAW_TIERS,
    ROLLUP_RETENTION,
)


def _at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def last_bucket(seconds: int, cluster: Cluster | None = None) -> dt.datetime | None:
    """The newest bucket of a tier, of one cluster or of all."""
    rows = MetricRollup.objects.filter(seconds=seconds)
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    return rows.order_by("-bucket").values_list("bucket", flat=True).first()


def rollup(now: dt.datetime | None = None) -> int:
    """Build (or rebuild) the 1- and 5-minute rollups of every complete bucket since the last one,
    then the hourly and 4-hour ones (the bucket in progress too) from the 5-minute ones."""
    now = now or timezone.now()
    built = 0
    for seconds in RAW_TIERS:
        count, start = rollup_raw(seconds, now)
        built += count
    # ``start`` is where the 5-minute pass began: every 5-minute bucket since has been (re)built.
    # A tier with no row yet (new in this version) is built from every 5-minute rollup kept.
    for seconds in MERGED_TIERS:
        since = start if last_bucket(seconds) is not None else now - ROLLUP_RETENTION
        built += rollup_merged(seconds, metrics.bucket_start(since, seconds), metrics.bucket_start(now))
    return built


def rollup_raw(seconds: int, now: dt.datetime) -> tuple[int, dt.datetime]:
    """Roll the raw points into ``seconds`` buckets since the last such bucket; returns how many
    buckets were written and where the pass started."""
    end = metrics.bucket_start(now, seconds)
    last = last_bucket(seconds)
    # The last rolled bucket is rebuilt: points stored after it was rolled join it.
    start = last if last is not None else end - RAW_RETENTION
    start = max(start, now - RAW_RETENTION)
    points = MetricPoint.objects.filter(ts__gte=start, ts__lt=end, value__isnull=False)
    rows = in_buckets(points, "ts", seconds).annotate(
        lo=Min("value"), hi=Max("value"), mean=Avg("value"), n=Count("value")
    )
    rollups = [_row(r, seconds) for r in rows.values_list(*BUCKET_ROW).iterator(chunk_size=5000)]
    upsert_rollups(rollups)
    return len(rollups), start


# What a bucketed query returns, per bucket: its series, its start (ms), min, max, average, count.
BUCKET_ROW = ("cluster_id", "metric", "labels", "slot", "lo", "hi", "mean", "n")


def in_buckets(rows: QuerySet[Any], time_field: str, seconds: int) -> QuerySet[Any]:
    """``rows`` grouped by series and ``seconds``-wide bucket (aligned on the epoch), for the
    aggregates the caller annotates; ``slot`` is the bucket's start in ms."""
    width = Value(seconds * 1000, output_field=BigIntegerField())
    slot = ExpressionWrapper(EpochMs(time_field) / width * width, output_field=BigIntegerField())
    return rows.annotate(slot=slot).values("cluster_id", "metric", "labels", "slot").order_by()


def merged(rows: QuerySet[MetricRollup], seconds: int) -> QuerySet[Any]:
    """Rollups merged into ``seconds`` buckets by the database: the average weighted by count."""
    weighted = ExpressionWrapper(Sum(F("avg") * F("count")) / Sum("count"), output_field=FloatField())
    return in_buckets(rows, "bucket", seconds).annotate(
        lo=Min("min"), hi=Max("max"), mean=weighted, n=Sum("count")
    )


def _row(row: tuple[Any, ...], seconds: int) -> MetricRollup:
    cluster_id, metric, labels, slot, lo, hi, mean, count = row
    return MetricRollup(
        cluster_id=cluster_id,
        metric=metric,
        labels=labels,
        seconds=seconds,
        bucket=_at(slot),
        min=lo,
        max=hi,
        avg=mean,
        count=count,
    )


def upsert_rollups(rollups: list[MetricRollup]) -> None:
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
    five = MetricRollup.objects.filter(seconds=FIVE_MINUTES, bucket__gte=start, bucket__lt=end)
    rollups = [
        _row(r, seconds) for r in merged(five, seconds).values_list(*BUCKET_ROW).iterator(chunk_size=5000)
    ]
    upsert_rollups(rollups)
    return len(rollups)


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
    statements = prune_statements(now)
    return {
        "rollups_built": built,
        "points_pruned": raw,
        "rollups_pruned": rolled,
        "statements_pruned": statements,
    }
