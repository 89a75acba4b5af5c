"""Counters → rates with resets, cache hit ratio, rollups and chart gaps (pure, no server)."""

from __future__ import annotations

import datetime as dt

import pytest

from panel.insights.lib import metrics
from panel.insights.lib.metrics import Aggregate, CounterReading

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)


def test_a_rate_is_the_delta_per_second() -> None:
    result = metrics.rate(CounterReading(100, 0), CounterReading(400, 15))
    assert result == metrics.RateResult(20.0, False)


def test_the_first_reading_starts_a_series_without_a_rate() -> None:
    assert metrics.rate(None, CounterReading(5, 0)) == metrics.RateResult(None, False)


@pytest.mark.parametrize(
    ("previous", "current"),
    [(CounterReading(500, 0), CounterReading(20, 15)), (CounterReading(5, 15), CounterReading(9, 15))],
)
def test_a_counter_going_backwards_or_no_time_passing_is_a_reset(
    previous: CounterReading, current: CounterReading
) -> None:
    assert metrics.rate(previous, current) == metrics.RateResult(None, True)


def test_a_long_gap_starts_a_new_series() -> None:
    assert metrics.rate(CounterReading(0, 0), CounterReading(60, 120), max_gap=60).reset
    assert metrics.rate(CounterReading(0, 0), CounterReading(60, 60), max_gap=60).rate == 1.0


def test_an_unchanged_counter_is_a_zero_rate() -> None:
    assert metrics.rate(CounterReading(7, 0), CounterReading(7, 15)).rate == 0.0


def test_cache_hit_percent_from_deltas() -> None:
    assert metrics.hit_percent(99, 1) == 99.0
    assert metrics.hit_percent(0, 0) is None  # nothing read: no figure, not 0 % or 100 %
    assert metrics.hit_percent(-5, 1) is None


def test_buckets_align_on_five_minutes() -> None:
    assert metrics.bucket_start(T0 + dt.timedelta(minutes=7, seconds=59)) == T0 + dt.timedelta(minutes=5)
    assert metrics.bucket_start(T0) == T0


def test_rollup_aggregates_each_bucket_and_ignores_gaps() -> None:
    t0 = int(T0.timestamp() * 1000)
    points = [
        (t0, 1.0),
        (t0 + 15_000, 3.0),
        (t0 + 30_000, None),
        (t0 + 300_000, 10.0),
        (t0 + 600_000, None),  # a bucket of gaps only is left out
        (t0 + 960_000 - 1, 4.0),  # the last millisecond of a minute stays in it
        (t0 + 960_000, 6.0),
    ]
    assert metrics.rollup(points) == {
        t0: Aggregate(1.0, 3.0, 2.0, 2),
        t0 + 300_000: Aggregate(10.0, 10.0, 10.0, 1),
        t0 + 900_000: Aggregate(4.0, 6.0, 5.0, 2),
    }
    by_minute = metrics.rollup(points, 60)
    assert sorted(by_minute) == [t0, t0 + 300_000, t0 + 900_000, t0 + 960_000]
    assert by_minute[t0 + 900_000] == Aggregate(4.0, 4.0, 4.0, 1)


def test_aggregates_merge_with_weighted_average() -> None:
    merged = Aggregate(1, 3, 2, 2).merge(Aggregate(0, 10, 8, 1))
    assert merged == Aggregate(0, 10, 4, 3)


def test_with_gaps_breaks_the_line_over_missing_collections() -> None:
    gapped = metrics.with_gaps([(0, 1.0), (15_000, 2.0), (120_000, 3.0), (135_000, None), (400_000, 4.0)], 15)
    # A break 15 s after the last point before a hole; none after a point that is already a gap.
    assert gapped == [
        (0, 1.0),
        (15_000, 2.0),
        (30_000, None),
        (120_000, 3.0),
        (135_000, None),
        (400_000, 4.0),
    ]


def test_every_rate_metric_is_in_the_catalogue() -> None:
    for rate_metric, _factor in metrics.COUNTER_RATES.values():
        assert rate_metric in metrics.CATALOGUE
    assert metrics.split_label("pool=test-pool") == ("pool", "test-pool")
    assert metrics.split_label("") is None
