"""Storing snapshots (rates, resets, gaps), rollups, pruning and chart series on known data."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.engine.collector import Snapshot
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
    # Past their retention: a 5-minute rollup of 31 days ago, a 1-minute one of 25 hours ago.
    for seconds, age in [(300, dt.timedelta(days=31)), (60, dt.timedelta(hours=25))]:
        MetricRollup.objects.create(
            cluster=cluster_row,
            metric="conn_total",
            seconds=seconds,
            bucket=NOW - age,
            min=1,
            max=1,
            avg=1,
            count=1,
        )
    # A 5-minute rollup of 2 days ago stays (30 days).
    MetricRollup.objects.create(
        cluster=cluster_row,
        metric="conn_total",
        bucket=NOW - dt.timedelta(days=2),
        min=1,
        max=1,
        avg=1,
        count=1,
    )

    result = services.prune_and_rollup(NOW)
    # 30 one-minute buckets, six 5-minute ones, the hour holding them and its 4-hour bucket; and,
    # the coarser tiers being empty, the hour and 4 hours of the 5-minute rollup of 2 days ago
    assert result == {"rollups_built": 40, "points_pruned": 1, "rollups_pruned": 2, "statements_pruned": 0}
    minute = MetricRollup.objects.get(cluster=cluster_row, seconds=60, bucket=start + dt.timedelta(minutes=2))
    # 11:32:00 … 11:32:45 are i = 8…11, and i = 9 is a gap
    assert (minute.min, minute.max, minute.avg, minute.count) == (32.0, 32.0, 32.0, 3)
    first = MetricRollup.objects.get(cluster=cluster_row, seconds=300, bucket=start)
    # 11:30:00 … 11:34:45: minutes 30–34, four points each, minus the gaps at i=9 and i=19
    assert (first.min, first.max, first.count) == (30.0, 34.0, 18)
    assert first.avg == pytest.approx((4 * (30 + 31 + 32 + 33 + 34) - 32 - 34) / 18)
    hour = MetricRollup.objects.get(cluster=cluster_row, seconds=3600, bucket=NOW - dt.timedelta(hours=1))
    assert (hour.bucket, hour.min, hour.max, hour.count) == (NOW - dt.timedelta(hours=1), 30.0, 59.0, 108)
    minutes = [(NOW - dt.timedelta(minutes=30) + dt.timedelta(seconds=15 * i)).minute for i in range(120)]
    assert hour.avg == pytest.approx(sum(m for i, m in enumerate(minutes) if i % 10 != 9) / 108)
    four_start = services.metrics.bucket_start(start, 4 * 3600)
    four = MetricRollup.objects.get(cluster=cluster_row, seconds=4 * 3600, bucket=four_start)
    assert (four.min, four.max, four.count) == (30.0, 59.0, 108) and four.avg == pytest.approx(hour.avg)
    # Idempotent: rebuilding gives the same rows.
    services.prune_and_rollup(NOW)
    assert MetricRollup.objects.filter(cluster=cluster_row, seconds=60).count() == 30
    assert MetricRollup.objects.filter(cluster=cluster_row, seconds=300).count() == 7
    # The older 5-minute rollup is kept; a pass merges again only what it rolled.
    assert MetricRollup.objects.filter(cluster=cluster_row, seconds=3600).count() == 2
    assert MetricRollup.objects.filter(cluster=cluster_row, seconds=4 * 3600).count() == 2


def ms(at: dt.datetime) -> int:
    return round(at.timestamp() * 1000)


@pytest.mark.parametrize(
    ("span", "age", "resolution", "step"),
    [
        (dt.timedelta(hours=1), dt.timedelta(0), "raw", 15),
        (dt.timedelta(hours=6), dt.timedelta(0), "1m", 60),
        (dt.timedelta(hours=24), dt.timedelta(0), "5m", 300),
        (dt.timedelta(days=7), dt.timedelta(0), "1h", 3600),
        (dt.timedelta(days=30), dt.timedelta(0), "4h", 4 * 3600),
        # raw points and 1-minute rollups are kept a day: an older short window reads 5 minutes
        (dt.timedelta(minutes=20), dt.timedelta(days=2), "5m", 300),
        (dt.timedelta(hours=3), dt.timedelta(hours=30), "5m", 300),
    ],
)
def test_each_window_reads_a_few_hundred_points_a_line(
    span: dt.timedelta, age: dt.timedelta, resolution: str, step: int
) -> None:
    end = NOW - age
    res = services.resolution_for(end - span, end, NOW)
    assert (res.name, res.seconds) == (resolution, step)
    assert span.total_seconds() / step <= 360  # a few hundred points: more than a chart shows


def test_an_hour_reads_raw_points_with_gaps(cluster_row: Cluster) -> None:
    now = timezone.now()
    MetricPoint.objects.bulk_create(
        [
            MetricPoint(
                cluster=cluster_row, metric="tps", labels="db=app", ts=now - dt.timedelta(seconds=s), value=s
            )
            for s in (600, 585, 570, 300, 285, 4000)  # nothing between 570 and 300: a gap
        ]
    )
    raw = services.series_for_range(cluster_row, "tps", "db=app", "1h", now)
    assert (raw.resolution, raw.step_seconds) == ("raw", 15)
    assert [p.value for p in raw.points] == [600, 585, 570, None, 300, 285]
    assert raw.points[0].at == ms(now - dt.timedelta(seconds=600))
    assert raw.points[3].at == ms(now - dt.timedelta(seconds=555))  # the break: one step on


def test_a_week_reads_hourly_rollups_then_the_raw_points_not_rolled_yet(cluster_row: Cluster) -> None:
    now = timezone.now()
    hour = dt.timedelta(hours=1)
    rolled_to = services.metrics.bucket_start(now - hour, 3600)  # the last hour rolled
    for days in (6, 5):
        at = services.metrics.bucket_start(now - dt.timedelta(days=days), 3600)
        MetricRollup.objects.create(
            cluster=cluster_row, metric="tps", labels="db=app", seconds=3600, bucket=at,
            min=days, max=days + 2, avg=days + 1, count=60,
        )  # fmt: skip
    MetricRollup.objects.create(
        cluster=cluster_row, metric="tps", labels="db=app", seconds=3600, bucket=rolled_to,
        min=1, max=3, avg=2, count=3,
    )  # fmt: skip
    # The rollup pass got as far as this 5-minute bucket; raw points after it are the live edge.
    last_five = rolled_to + dt.timedelta(minutes=5)
    MetricRollup.objects.create(
        cluster=cluster_row, metric="tps", labels="db=app", seconds=300, bucket=last_five,
        min=1, max=3, avg=2, count=3,
    )  # fmt: skip
    tail_start = last_five + dt.timedelta(minutes=5)
    MetricPoint.objects.bulk_create(
        [
            MetricPoint(cluster=cluster_row, metric="tps", labels="db=app", ts=at, value=value)
            for at, value in [
                (last_five + dt.timedelta(seconds=30), 999.0),  # already in the rollups: not counted twice
                (tail_start, 10.0),
                (tail_start + dt.timedelta(seconds=15), 20.0),
                (tail_start + dt.timedelta(seconds=30), None),
            ]
        ]
    )
    week = services.series_for_range(cluster_row, "tps", "db=app", "7d", now)
    assert (week.resolution, week.step_seconds) == ("1h", 3600)
    gap = (None, None, None)  # days apart: the line breaks between them
    values = [(p.value, p.min, p.max) for p in week.points]
    assert values[:4] == [(7, 6, 8), gap, (6, 5, 7), gap]
    # The raw edge falls in the hour in progress: merged with what the rollups hold of it.
    assert values[4:] == [(pytest.approx((2 * 3 + 10 + 20) / 5), 1, 20)]
    assert week.points[-1].at == ms(rolled_to)


def test_latest_gives_the_last_collection_and_says_when_it_is_stale(cluster_row: Cluster) -> None:
    now = timezone.now()
    services.store(cluster_row, snapshot(now - dt.timedelta(seconds=30), conn_total=4))
    services.store(cluster_row, snapshot(now, conn_total=7))
    last = services.latest(cluster_row)
    assert last.get("conn_total") == 7 and not last.stale
    assert services.latest(cluster_row, now=now + dt.timedelta(minutes=5)).stale


def test_thirty_days_read_four_hour_rollups_merged_weighted_by_count(cluster_row: Cluster) -> None:
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
    assert month.resolution == "4h" and month.step_seconds == 4 * 3600
    four = services.metrics.bucket_start(hour, 4 * 3600)
    assert [(p.at, p.value, p.min, p.max) for p in month.points] == [(ms(four), 4.0, 0.0, 9.0)]


def test_a_tier_new_in_this_version_is_built_from_every_five_minute_rollup_kept(cluster_row: Cluster) -> None:
    now = timezone.now()
    old = services.metrics.bucket_start(now - dt.timedelta(days=10))
    for at in (old, now - dt.timedelta(minutes=10)):
        MetricRollup.objects.create(
            cluster=cluster_row, metric="tps", labels="", seconds=300, bucket=services.metrics.bucket_start(at),
            min=1, max=3, avg=2, count=20,
        )  # fmt: skip
    # An upgrade: hourly rows exist (the tier is older), the 4-hour tier has none yet.
    MetricRollup.objects.create(
        cluster=cluster_row, metric="tps", labels="", seconds=3600, bucket=services.metrics.bucket_start(now, 3600),
        min=1, max=3, avg=2, count=20,
    )  # fmt: skip
    services.rollup(now)
    four = MetricRollup.objects.filter(cluster=cluster_row, seconds=4 * 3600).values_list("bucket", flat=True)
    assert services.metrics.bucket_start(old, 4 * 3600) in set(four)
    # The hourly tier, which had rows, is merged from where the pass began only.
    hours = MetricRollup.objects.filter(cluster=cluster_row, seconds=3600).values_list("bucket", flat=True)
    assert services.metrics.bucket_start(old, 3600) not in set(hours)


def test_read_series_reads_asked_lines_and_every_labels_value_in_few_queries(
    cluster_row: Cluster, django_assert_num_queries: Callable[[int], AbstractContextManager[object]]
) -> None:
    now = timezone.now()
    base = services.metrics.bucket_start(now) - dt.timedelta(minutes=10)  # on a 5-minute boundary
    MetricPoint.objects.bulk_create(
        [
            MetricPoint(
                cluster=cluster_row, metric=metric, labels=labels, ts=base + dt.timedelta(seconds=s), value=s
            )
            for metric, labels in [("tps", "db=app"), ("tps", "db=shop"), ("conn_state", "state=idle")]
            for s in (0, 15, 300)
        ]
    )
    # Stored, but not asked for: a metric × labels the asked keys do not name.
    MetricPoint.objects.create(
        cluster=cluster_row, metric="conn_state", labels="state=active", ts=now, value=1
    )
    wanted = [("tps", None), ("conn_state", "state=idle"), ("cpu_percent", "")]
    start, end = now - dt.timedelta(hours=1), now
    with django_assert_num_queries(1):  # the raw points of the window, along the cluster's time index
        found = services.read_series(cluster_row, wanted, start, end)
    assert set(found) == {
        ("tps", "db=app"),
        ("tps", "db=shop"),
        ("conn_state", "state=idle"),
        ("cpu_percent", ""),
    }
    assert [p.value for p in found[("tps", "db=app")].points] == [0, 15, None, 300]
    assert found[("cpu_percent", "")].points == []  # asked by name: present, empty
    assert found[("conn_state", "state=idle")] == services.series(
        cluster_row, "conn_state", "state=idle", start, end
    )
    assert services.read_series(cluster_row, [], start, end) == {}
    day = now - dt.timedelta(hours=24)
    with django_assert_num_queries(3):  # rollups of the window, how far they go, the raw edge after
        rolled = services.read_series(cluster_row, wanted, day, end)
    assert [p.value for p in rolled[("tps", "db=shop")].points] == [7.5, 300]
    assert [p.at for p in rolled[("tps", "db=shop")].points] == [ms(base), ms(base) + 300_000]
