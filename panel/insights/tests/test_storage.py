"""Storing snapshots (rates, resets, gaps), rollups, pruning and chart series on known data."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.collector import Snapshot
from panel.insights.models import CounterState, MetricPoint, MetricRollup
from panel.insights.tests.conftest import snapshot

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def counters_snapshot(at: dt.datetime, xacts: float, *, started: float = 1000.0) -> Snapshot:
    snap = Snapshot(at=at, up={"postgres": True}, started_at=started)
    snap.counter("postgres", "xact_total", "db=app", xacts)
    snap.counter("postgres", "blks_hit", "db=app", xacts * 9)
    snap.counter("postgres", "blks_read", "db=app", xacts)
    snap.gauge("conn_total", "", 3)
    return snap


def stored(cluster: Cluster, metric: str, labels: str = "") -> list[float | None]:
    rows = MetricPoint.objects.filter(cluster=cluster, metric=metric, labels=labels).order_by("ts")
    return list(rows.values_list("value", flat=True))


def test_counters_become_rates_and_a_reset_starts_a_new_series(cluster_row: Cluster) -> None:
    for i, xacts in enumerate([100, 400, 700, 50, 350]):
        services.store(cluster_row, counters_snapshot(NOW + dt.timedelta(seconds=15 * i), xacts))
    # first reading: no rate; 300 per 15 s; the drop to 50: a gap; then rates again
    assert stored(cluster_row, "tps", "db=app") == [20.0, 20.0, None, 20.0]
    assert stored(cluster_row, "cache_hit_percent", "db=app") == [90.0, 90.0, None, 90.0]


def test_a_new_postmaster_start_time_restarts_every_postgres_rate(cluster_row: Cluster) -> None:
    services.store(cluster_row, counters_snapshot(NOW, 100))
    services.store(cluster_row, counters_snapshot(NOW + dt.timedelta(seconds=15), 400))
    # Higher than before, but the server restarted (stats kept across a clean shutdown).
    services.store(cluster_row, counters_snapshot(NOW + dt.timedelta(seconds=30), 900, started=2000.0))
    services.store(cluster_row, counters_snapshot(NOW + dt.timedelta(seconds=45), 1200, started=2000.0))
    assert stored(cluster_row, "tps", "db=app") == [20.0, None, 20.0]


def test_a_silent_source_records_a_gap_and_forgets_its_counters(cluster_row: Cluster) -> None:
    services.store(cluster_row, counters_snapshot(NOW, 100))
    down = Snapshot(at=NOW + dt.timedelta(seconds=15), up={"postgres": False}, errors={"postgres": "refused"})
    services.store(cluster_row, down)
    assert stored(cluster_row, "up", "source=postgres") == [1.0, 0.0]
    assert stored(cluster_row, "conn_total") == [3.0, None]
    assert not CounterState.objects.filter(cluster=cluster_row, source="postgres").exists()
    services.store(cluster_row, counters_snapshot(NOW + dt.timedelta(seconds=30), 50))
    assert stored(cluster_row, "tps", "db=app") == []  # a new series: no rate across the outage


def test_rollup_and_prune_produce_the_expected_aggregates(cluster_row: Cluster) -> None:
    start = NOW - dt.timedelta(minutes=30)
    # 30 minutes at 15 s: value = minute of the hour; a gap point every 10th.
    rows = []
    for i in range(120):
        at = start + dt.timedelta(seconds=15 * i)
        value = None if i % 10 == 9 else float(at.minute)
        rows.append(MetricPoint(cluster=cluster_row, metric="conn_total", labels="", ts=at, value=value))
    old = NOW - dt.timedelta(hours=25)
    rows.append(MetricPoint(cluster=cluster_row, metric="conn_total", labels="", ts=old, value=1.0))
    MetricPoint.objects.bulk_create(rows)
    MetricRollup.objects.create(
        cluster=cluster_row,
        metric="conn_total",
        bucket=NOW - dt.timedelta(days=31),
        min=1,
        max=1,
        avg=1,
        count=1,
    )

    result = services.prune_and_rollup(NOW)
    # six 5-minute buckets and the hour holding them
    assert result == {"rollups_built": 7, "points_pruned": 1, "rollups_pruned": 1}
    first = MetricRollup.objects.get(cluster=cluster_row, seconds=300, bucket=start)
    # 11:30:00 … 11:34:45: minutes 30–34, four points each, minus the gaps at i=9 and i=19
    assert (first.min, first.max, first.count) == (30.0, 34.0, 18)
    assert first.avg == pytest.approx((4 * (30 + 31 + 32 + 33 + 34) - 32 - 34) / 18)
    hour = MetricRollup.objects.get(cluster=cluster_row, seconds=3600)
    assert (hour.bucket, hour.min, hour.max, hour.count) == (NOW - dt.timedelta(hours=1), 30.0, 59.0, 108)
    minutes = [(NOW - dt.timedelta(minutes=30) + dt.timedelta(seconds=15 * i)).minute for i in range(120)]
    assert hour.avg == pytest.approx(sum(m for i, m in enumerate(minutes) if i % 10 != 9) / 108)
    # Idempotent: rebuilding gives the same rows.
    services.prune_and_rollup(NOW)
    assert MetricRollup.objects.filter(cluster=cluster_row, seconds=300).count() == 6
    assert MetricRollup.objects.filter(cluster=cluster_row, seconds=3600).count() == 1


def test_series_reads_raw_points_for_a_day_and_rollups_beyond(cluster_row: Cluster, settings: object) -> None:
    now = timezone.now()
    MetricPoint.objects.bulk_create(
        [
            MetricPoint(
                cluster=cluster_row, metric="tps", labels="db=app", ts=now - dt.timedelta(seconds=s), value=s
            )
            for s in (600, 585, 570, 300, 285)  # nothing between 570 and 300: a gap
        ]
    )
    MetricRollup.objects.bulk_create(
        [
            MetricRollup(
                cluster=cluster_row,
                metric="tps",
                labels="db=app",
                bucket=now - dt.timedelta(days=d),
                min=d,
                max=d + 2,
                avg=d + 1,
                count=20,
            )
            for d in (6, 5, 2)
        ]
    )
    raw = services.series_for_range(cluster_row, "tps", "db=app", "1h", now)
    assert raw.resolution == "raw"
    assert [p.value for p in raw.points] == [600, 585, 570, None, 300, 285]
    week = services.series_for_range(cluster_row, "tps", "db=app", "7d", now)
    assert week.resolution == "5m"
    gap = (None, None, None)  # days apart: the line breaks between them
    assert [(p.value, p.min, p.max) for p in week.points] == [(7, 6, 8), gap, (6, 5, 7), gap, (3, 2, 4)]
    assert services.labels_of(cluster_row, "tps") == ["db=app"]


def test_latest_gives_the_last_collection_and_says_when_it_is_stale(cluster_row: Cluster) -> None:
    now = timezone.now()
    services.store(cluster_row, snapshot(now - dt.timedelta(seconds=30), conn_total=4))
    services.store(cluster_row, snapshot(now, conn_total=7))
    last = services.latest(cluster_row)
    assert last.get("conn_total") == 7 and not last.stale
    assert services.latest(cluster_row, now=now + dt.timedelta(minutes=5)).stale


def test_thirty_days_read_hourly_rollups_merged_weighted_by_count(cluster_row: Cluster) -> None:
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    hour = now.replace(minute=0) - dt.timedelta(hours=3)
    for minutes, avg, lo, hi, count in [(0, 1.0, 0.0, 2.0, 10), (5, 5.0, 4.0, 9.0, 30)]:
        MetricRollup.objects.create(
            cluster=cluster_row,
            metric="tps",
            labels="",
            bucket=hour + dt.timedelta(minutes=minutes),
            min=lo,
            max=hi,
            avg=avg,
            count=count,
        )
    services.rollup(now)
    month = services.series_for_range(cluster_row, "tps", "", "30d", now)
    assert month.resolution == "1h" and month.step_seconds == 3600
    assert [(p.ts, p.value, p.min, p.max) for p in month.points] == [(hour, 4.0, 0.0, 9.0)]


def test_series_many_reads_each_asked_line_as_series_does(
    cluster_row: Cluster, django_assert_num_queries: Callable[[int], AbstractContextManager[object]]
) -> None:
    now = timezone.now()
    MetricPoint.objects.bulk_create(
        [
            MetricPoint(
                cluster=cluster_row, metric=metric, labels=labels, ts=now - dt.timedelta(seconds=s), value=s
            )
            for metric, labels in [("tps", "db=app"), ("tps", "db=shop"), ("conn_state", "state=idle")]
            for s in (600, 585, 300)
        ]
    )
    # Stored, but not asked for: metric × labels of the asked keys must not bring it in.
    MetricPoint.objects.create(cluster=cluster_row, metric="conn_state", labels="db=app", ts=now, value=1)
    keys = [("tps", "db=app"), ("conn_state", "state=idle"), ("tps", "db=none")]
    start, end = now - dt.timedelta(hours=1), now
    with django_assert_num_queries(3):  # one per line, along the series index
        found = services.series_many(cluster_row, keys, start, end)
    assert set(found) == set(keys)
    for metric, labels in keys:
        assert found[(metric, labels)] == services.series(cluster_row, metric, labels, start, end)
    assert [p.value for p in found[("tps", "db=app")].points] == [600, 585, None, 300]
    assert found[("tps", "db=none")].points == []
    assert services.series_many(cluster_row, [], start, end) == {}
