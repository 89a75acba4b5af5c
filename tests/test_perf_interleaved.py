"""The statistics of scripts/perf/pool_cost.py: medians, spreads, paired ratios, verdicts (pure)."""

from __future__ import annotations

import pytest

from tests.fixtures.scripts import load_script

stats = load_script("perf/_interleaved.py")


def test_summary_of_odd_and_even_rounds():
    odd = stats.summarize([100.0, 90.0, 110.0, 95.0, 105.0])
    assert (odd.n, odd.missing, odd.median, odd.low, odd.high) == (5, 0, 100.0, 90.0, 110.0)
    assert (odd.q1, odd.q3) == (92.5, 107.5)
    assert odd.spread == pytest.approx(0.20)
    even = stats.summarize([4.0, 1.0, 3.0, 2.0])
    assert (even.median, even.q1, even.q3) == (2.5, 1.5, 3.5)
    one = stats.summarize([7.0])
    assert (one.median, one.q1, one.q3, one.spread) == (7.0, 7.0, 7.0, 0.0)


def test_rounds_that_did_not_run_are_counted_not_averaged():
    summary = stats.summarize([None, 200.0, None, 100.0])
    assert (summary.n, summary.missing, summary.median) == (2, 2, 150.0)
    nothing = stats.summarize([None, None])
    assert (nothing.n, nothing.missing, nothing.median, nothing.spread) == (0, 2, None, None)
    assert stats.format_summary(nothing) == "no figure: did not run in any of 2 rounds"
    assert "did not run in 2 of 4 rounds" in stats.format_summary(summary)


def test_a_zero_median_has_no_spread():
    zero = stats.summarize([0.0, 0.0, 0.0])
    assert zero.spread is None and not zero.noisy
    assert "spread" not in stats.format_summary(zero)


def test_noisy_flag_follows_the_spread():
    assert not stats.summarize([100.0, 110.0, 105.0]).noisy  # 10 %
    wide = stats.summarize([100.0, 130.0, 105.0])  # 29 %
    assert wide.noisy
    assert "noisy" in stats.format_summary(wide)


def test_paired_ratios_decide_only_when_every_round_agrees():
    # The machine got slower round by round: the medians' intervals overlap, but within each
    # round a beats b by 10 %, which the paired ratios see.
    a = [1100.0, 880.0, 660.0, 990.0, 770.0]
    b = [1000.0, 800.0, 600.0, 900.0, 700.0]
    ahead = stats.compare(a, b)
    assert ahead.n == 5 and ahead.ratio == pytest.approx(1.1) and ahead.decided
    assert ahead.verdict("panel", "hand").startswith("panel ahead of hand: 1.10× hand")
    behind = stats.compare(b, a)
    assert behind.decided and behind.verdict("hand", "panel").startswith("hand behind panel")
    mixed = stats.compare([1100.0, 900.0, 1000.0], [1000.0, 1000.0, 1000.0])
    assert mixed.ratio == pytest.approx(1.0) and not mixed.decided
    assert mixed.verdict("panel", "direct").endswith("spread too wide to conclude")


def test_rounds_where_either_did_not_run_are_left_out():
    c = stats.compare([None, 300.0, 200.0], [100.0, None, 100.0])
    assert (c.n, c.ratio) == (1, 2.0)
    # One round agreeing with itself is no verdict.
    assert not c.decided and c.within(0.03) is None
    assert c.verdict("panel", "direct").endswith("too few to conclude")
    assert "too few" in stats.within_verdict("panel", "best", c, 0.03)
    none = stats.compare([None, None], [100.0, 100.0])
    assert none.n == 0 and not none.decided
    assert none.verdict("panel", "direct") == "panel vs direct: no round where both ran"
    assert stats.within_verdict("panel", "best", none, 0.03).endswith("no round where both ran")


@pytest.mark.parametrize(
    ("ratios", "met", "words"),
    [
        ([0.98, 0.99, 1.02], True, "within 3 % of best or ahead, in every round"),
        ([1.10, 1.20, 1.05], True, "within 3 % of best or ahead, in every round"),
        ([0.90, 0.95, 0.96], False, "more than 3 % behind best in every round"),
        ([0.95, 0.99, 1.01], None, "spread too wide to conclude"),
        ([0.97, 0.97, 0.97], True, "within 3 %"),
    ],
)
def test_within_tolerance(ratios, met, words):
    c = stats.compare([100.0 * r for r in ratios], [100.0] * len(ratios))
    assert c.within(0.03) is met
    assert words in stats.within_verdict("panel", "best", c, 0.03)


def test_rotation_puts_each_variant_first_once_per_cycle():
    names = ["direct", "panel", "hand", "best"]
    orders = [stats.rotation(names, r) for r in range(4)]
    assert [order[0] for order in orders] == names
    assert all(sorted(order) == sorted(names) for order in orders)
    assert stats.rotation(names, 4) == names
    assert stats.rotation([], 3) == []
