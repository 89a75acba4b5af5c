"""Statement deltas between collections and a window's totals (pure): resets, statements that
appear mid-window, idle ones, and deviations that add up through sums of squares."""

from __future__ import annotations

import math
import statistics

import pytest

from panel.insights.lib.statements import Delta, Reading, Totals, combine, deltas, ordered, top


def reading(
    queryid: int,
    calls: int,
    total: float,
    *,
    sq: float | None = None,
    rows: int = 0,
    hit: int = 0,
    read: int = 0,
    dbid: int = 5,
    userid: int = 10,
) -> Reading:
    return Reading(
        queryid,
        dbid,
        userid,
        "defaultdb",
        "doadmin",
        calls,
        total,
        total * total if sq is None else sq,
        rows,
        hit,
        read,
    )


def by_query(items: list[Delta]) -> dict[int, Delta]:
    return {d.queryid: d for d in items}


def test_the_first_reading_is_a_baseline_and_yields_nothing() -> None:
    assert deltas(None, [reading(1, 100, 50.0)]) == []


def test_a_delta_is_the_difference_between_two_readings() -> None:
    before = reading(1, 100, 50.0, rows=100, hit=300, read=10)
    after = reading(1, 160, 80.0, rows=160, hit=420, read=12)
    (d,) = deltas({before.key: before}, [after])
    assert (d.calls, d.total_ms, d.rows, d.blks_hit, d.blks_read) == (60, 30.0, 60, 120, 2)


def test_statements_that_did_not_run_since_are_left_out() -> None:
    same = reading(1, 100, 50.0)
    assert deltas({same.key: same}, [same]) == []


def test_a_statement_that_appears_mid_window_counts_all_of_its_calls() -> None:
    old = reading(1, 100, 50.0)
    new = reading(2, 7, 3.5)
    assert by_query(deltas({old.key: old}, [old, new]))[2].calls == 7


def test_counters_that_went_down_count_again_from_zero() -> None:
    # pg_stat_statements_reset(), or an entry evicted and added again: never a negative delta.
    before = reading(1, 1000, 500.0)
    after = reading(1, 40, 20.0)
    (d,) = deltas({before.key: before}, [after])
    assert (d.calls, d.total_ms) == (40, 20.0)


def test_a_reset_the_server_reports_counts_every_statement_from_zero() -> None:
    # More calls after the reset than before it: only the server's reset time tells.
    before = reading(1, 10, 5.0)
    after = reading(1, 30, 15.0)
    assert by_query(deltas({before.key: before}, [after], reset=True))[1].calls == 30
    assert by_query(deltas({before.key: before}, [after], reset=False))[1].calls == 20


def test_the_same_statement_in_another_database_or_role_is_another_entry() -> None:
    mine = reading(1, 10, 5.0, dbid=5)
    theirs = reading(1, 4, 2.0, dbid=6)
    assert [d.calls for d in deltas({mine.key: mine}, [mine, theirs])] == [4]


def test_a_window_adds_deltas_up_and_its_deviation_is_that_of_every_call_in_it() -> None:
    first, second = [1.0, 2.0, 3.0], [10.0, 20.0]
    r1 = Reading.from_stats(
        1, 5, 10, "db", "r", 3, sum(first), statistics.fmean(first), statistics.pstdev(first), 3, 9, 1
    )
    all_calls = first + second
    r2 = Reading.from_stats(
        1,
        5,
        10,
        "db",
        "r",
        5,
        sum(all_calls),
        statistics.fmean(all_calls),
        statistics.pstdev(all_calls),
        5,
        15,
        5,
    )
    window = deltas({r1.key: r1}, [r2]) + deltas({}, [r1])  # the second call set, then the first
    (totals,) = combine(window)
    assert totals.calls == 5 and totals.total_ms == pytest.approx(36.0)
    assert totals.mean_ms == pytest.approx(7.2)
    assert totals.stddev_ms == pytest.approx(statistics.pstdev(all_calls))
    assert totals.hit_percent == pytest.approx(75.0)
    (later,) = combine(deltas({r1.key: r1}, [r2]))
    assert later.stddev_ms == pytest.approx(statistics.pstdev(second))


def test_a_statement_that_read_no_block_has_no_hit_ratio() -> None:
    assert Totals(1, "db", "r", 3, 1.0, 1.0, 3, 0, 0).hit_percent is None
    assert math.isclose(Totals(1, "db", "r", 0, 0.0, 0.0, 0, 0, 0).mean_ms, 0.0)


def test_each_collection_keeps_the_statements_that_took_the_most_time() -> None:
    items = [Delta(q, "db", "r", 1, float(q), 0.0, 0, 0, 0) for q in range(10)]
    assert [d.queryid for d in top(items, 3)] == [9, 8, 7]


def test_the_tab_orders_by_any_column_and_refuses_unknown_ones() -> None:
    slow = Totals(1, "db", "r", 10, 100.0, 1100.0, 10, 90, 10)
    busy = Totals(2, "db", "r", 1000, 50.0, 3.0, 5, 1000, 0)
    assert [t.queryid for t in ordered([busy, slow], "total")] == [1, 2]
    assert [t.queryid for t in ordered([slow, busy], "calls")] == [2, 1]
    assert [t.queryid for t in ordered([busy, slow], "mean")] == [1, 2]
    assert [t.queryid for t in ordered([busy, slow], "stddev")] == [1, 2]
    assert [t.queryid for t in ordered([slow, busy], "rows")] == [1, 2]
    assert [t.queryid for t in ordered([busy, slow], "hit")] == [1, 2]  # the worst cache use first
    with pytest.raises(ValueError):
        ordered([slow], "text")
