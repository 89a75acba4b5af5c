"""The pairs of scripts/perf/benchmarks.py, watched_run.py and story.py: order, ratios, summary (pure)."""

from __future__ import annotations

from tests.fixtures.scripts import load_script

pairs_module = load_script("perf/_pairs.py")


def test_the_order_alternates_pair_by_pair():
    assert [pairs_module.order(i) for i in range(4)] == [
        ("hand", "panel"),
        ("panel", "hand"),
        ("hand", "panel"),
        ("panel", "hand"),
    ]


def test_run_pairs_calls_each_side_once_per_pair_in_alternating_order():
    calls: list[str] = []
    figures = iter([100.0, 90.0, 95.0, 100.0, 80.0, 80.0])

    def side(name: str):
        def run() -> float:
            calls.append(name)
            return next(figures)

        return run

    reported: list[tuple[int, float, float]] = []
    pairs = pairs_module.run_pairs(
        pairs_module.Pairs("x"),
        3,
        side("hand"),
        side("panel"),
        report=lambda i, h, p: reported.append((i, h, p)),
    )
    assert calls == ["hand", "panel", "panel", "hand", "hand", "panel"]
    # Each figure lands on its side, whichever ran first.
    assert pairs.figures == [(100.0, 90.0), (100.0, 95.0), (80.0, 80.0)]
    assert reported == [(0, 100.0, 90.0), (1, 100.0, 95.0), (2, 80.0, 80.0)]
    assert pairs.ratios == [0.9, 0.95, 1.0]
    assert pairs.median_ratio == 0.95
    assert pairs.medians() == (100.0, 90.0)


def test_the_summary_line_names_the_median_each_pair_and_the_target():
    pairs = pairs_module.Pairs("without percentiles", [(100.0, 97.0), (100.0, 93.0), (200.0, 198.0)])
    line = pairs.summary_line()
    assert line == (
        "without percentiles: ratio panel/hand median 0.970 (pairs: 0.970, 0.930, 0.990); target ≥ 0.95 met"
    )
    assert pairs_module.Pairs("x", [(100.0, 90.0)]).summary_line().endswith("missed")
    assert "no pair ran" in pairs_module.Pairs("x").summary_line()


def test_argv_differences_show_what_one_side_adds():
    hand = ["-h", "localhost", "-p", "5432", "-c", "10", "-P", "1"]
    panel = ["-h", "127.0.0.1", "-p", "5432", "-c", "10", "-P", "1", "-l", "--log-prefix=/tmp/x"]
    assert pairs_module.argv_differences(hand, panel) == (
        ["localhost"],
        ["127.0.0.1", "-l", "--log-prefix=/tmp/x"],
    )
    assert pairs_module.argv_differences(hand, hand) == ([], [])


def test_load_average_reads_the_three_figures(tmp_path):
    path = tmp_path / "loadavg"
    path.write_text("6.21 3.15 1.25 3/456 7890\n")
    load = pairs_module.load_average(path)
    assert load == (6.21, 3.15, 1.25)
    assert pairs_module.format_load(load) == "load average 6.21 3.15 1.25"


def test_run_rounds_rotates_three_sides_and_pairs_them_round_by_round():
    calls: list[str] = []
    values = {
        "hand": iter([100.0, 100.0, 100.0]),
        "watched": iter([96.0, 99.0, 90.0]),
        "closed": iter([97.0] * 3),
    }

    def side(name: str):
        def run() -> float:
            calls.append(name)
            return next(values[name])

        return run

    figures = pairs_module.run_rounds(3, {name: side(name) for name in ("hand", "watched", "closed")})
    assert calls == ["hand", "watched", "closed", "watched", "closed", "hand", "closed", "hand", "watched"]
    watched = pairs_module.pairs_of("watched", figures["hand"], figures["watched"])
    assert watched.ratios == [0.96, 0.99, 0.9]
    assert watched.median_ratio == 0.96
