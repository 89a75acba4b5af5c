"""The sweep grid's arithmetic: medians of repeats, the best cell, the crossover, the best size."""

from __future__ import annotations

from benchmarks.lib.sweep_grid import Observation, best_cell, best_per_clients, crossover, summarise

DIRECT = "direct"
POOL = "pool test-pool"


def grid_of(table: dict[str, dict[int, float | None]]):
    return summarise(
        [Observation(series, clients, tps) for series, row in table.items() for clients, tps in row.items()],
        list(table),
    )


def test_repeats_become_their_median_and_failed_repeats_count_as_zero() -> None:
    grid = summarise(
        [
            Observation(DIRECT, 10, 100.0, 2.0, 0),
            Observation(DIRECT, 10, 300.0, 4.0, 1),
            Observation(DIRECT, 10, 200.0, 3.0, 2),
            Observation(DIRECT, 50, 500.0, 5.0),
            Observation(DIRECT, 50, None),  # could not start
        ]
    )
    ten, fifty = grid.cell(DIRECT, 10), grid.cell(DIRECT, 50)
    assert ten is not None and fifty is not None
    assert (ten.tps, ten.latency_ms, ten.failed_transactions, ten.runs, ten.failed_runs) == (
        200.0,
        3.0,
        3,
        3,
        0,
    )
    # An even count: the mean of the middle two, the failed repeat at 0 TPS among them.
    assert (fifty.tps, fifty.latency_ms, fifty.failed_runs) == (250.0, 5.0, 1)
    assert grid.clients == (10, 50) and grid.series == (DIRECT,)


def test_series_keep_the_given_order_then_the_order_seen_and_clients_ascend() -> None:
    grid = summarise(
        [Observation("size 20", 50, 1.0), Observation("size 5", 10, 1.0), Observation("size 2", 2, 1.0)],
        ["size 2", "size 5"],
    )
    assert grid.series == ("size 2", "size 5", "size 20") and grid.clients == (2, 10, 50)


def test_the_pool_wins_from_the_first_count_after_which_it_stays_ahead() -> None:
    grid = grid_of(
        {
            DIRECT: {2: 900.0, 10: 2000.0, 50: 2300.0, 100: 1800.0, 150: None},
            POOL: {2: 500.0, 10: 2100.0, 50: 2200.0, 100: 1900.0, 150: 1700.0},
        }
    )
    # Ahead at 10, behind at 50: the streak that reaches the largest count starts at 100.
    assert crossover(grid, DIRECT, POOL) == 100
    assert crossover(grid, POOL, DIRECT) is None


def test_no_crossover_when_the_pool_is_behind_at_the_largest_count() -> None:
    grid = grid_of({DIRECT: {2: 900.0, 10: 2000.0}, POOL: {2: 1000.0, 10: 1500.0}})
    assert crossover(grid, DIRECT, POOL) is None


def test_ahead_everywhere_is_a_crossover_at_the_smallest_count() -> None:
    grid = grid_of({DIRECT: {2: 1.0, 10: 2.0}, POOL: {2: 3.0, 10: 4.0}})
    assert crossover(grid, DIRECT, POOL) == 2


def test_equal_throughput_is_not_ahead() -> None:
    grid = grid_of({DIRECT: {2: 100.0, 10: 200.0}, POOL: {2: 150.0, 10: 200.0}})
    assert crossover(grid, DIRECT, POOL) is None
    grid = grid_of({DIRECT: {2: 100.0, 10: 200.0}, POOL: {2: 100.0, 10: 250.0}})
    assert crossover(grid, DIRECT, POOL) == 10


def test_only_counts_both_measured_decide_the_crossover() -> None:
    # The pool's 50 is still running: it is no observation, so 10 is the largest shared count.
    grid = grid_of({DIRECT: {2: 100.0, 10: 200.0, 50: 300.0}, POOL: {2: 150.0, 10: 250.0}})
    assert crossover(grid, DIRECT, POOL) == 2
    assert crossover(grid, DIRECT, "pool absent") is None


def test_the_best_cell_is_the_highest_median_and_ties_go_to_fewer_clients_then_the_first_series() -> None:
    grid = grid_of({DIRECT: {2: 100.0, 10: 400.0, 50: 400.0}, POOL: {2: 100.0, 10: 400.0, 50: 300.0}})
    best = best_cell(grid)
    assert best is not None and (best.series, best.clients, best.tps) == (DIRECT, 10, 400.0)
    grid = grid_of({DIRECT: {2: 100.0, 10: 300.0}, POOL: {2: 100.0, 10: 301.0}})
    best = best_cell(grid)
    assert best is not None and (best.series, best.clients) == (POOL, 10)


def test_no_best_cell_when_nothing_ran() -> None:
    assert best_cell(grid_of({DIRECT: {2: None}})) is None
    assert best_cell(summarise([])) is None


def test_the_best_size_per_client_count_lists_ties_in_series_order() -> None:
    grid = grid_of(
        {
            "size 2": {10: 900.0, 50: 800.0, 100: None},
            "size 5": {10: 1200.0, 50: 1500.0, 100: None},
            "size 20": {10: 1200.0, 50: 1400.0, 100: None},
        }
    )
    assert best_per_clients(grid) == {10: ["size 5", "size 20"], 50: ["size 5"]}
