"""The statistics of an interleaved benchmark: medians, spreads, paired ratios and verdicts (pure).

Imported by ``pool_cost.py`` (run as a script, so this directory is on ``sys.path``) and by
``tests/test_perf_interleaved.py``. No Django, no processes: lists of numbers in, words out.

The variants run one after the other within a round, round after round, so the machine's drift
(other people's load, a warm cache) hits all of them alike. A comparison of two variants is
therefore made round by round: the ratio of their figures in the same round. Only when every
round agrees (all ratios on the same side of the line) is a verdict stated; otherwise the spread is
too wide to conclude, and the output says so instead of printing a winner.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# A variant whose min–max spread passes this share of its median is flagged as noisy.
NOISY_SPREAD = 0.20
# Fewer rounds where both variants ran than this, and no verdict is stated: one or two rounds
# agreeing says little on a shared machine.
MIN_ROUNDS = 3


@dataclass(frozen=True)
class Summary:
    """One variant's figures over the rounds it completed (``missing``: rounds that did not run)."""

    n: int
    missing: int
    median: float | None = None
    low: float | None = None
    high: float | None = None
    q1: float | None = None
    q3: float | None = None

    @property
    def spread(self) -> float | None:
        """(max − min) / median: 0.10 means the rounds lie within 10 % of the median's size."""
        if self.median is None or self.low is None or self.high is None or self.median == 0:
            return None
        return (self.high - self.low) / self.median

    @property
    def noisy(self) -> bool:
        return self.spread is not None and self.spread > NOISY_SPREAD


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The first and third quartiles (the median of each half; the middle value goes to neither)."""
    ordered = sorted(values)
    half = len(ordered) // 2
    lower, upper = ordered[:half], ordered[len(ordered) - half :]
    if not lower:
        return ordered[0], ordered[0]
    return statistics.median(lower), statistics.median(upper)


def summarize(values: Sequence[float | None]) -> Summary:
    """Median, min–max and IQR of the rounds that ran; ``None`` is a round that did not run."""
    ran = [v for v in values if v is not None]
    missing = len(values) - len(ran)
    if not ran:
        return Summary(n=0, missing=missing)
    q1, q3 = quartiles(ran)
    return Summary(
        n=len(ran),
        missing=missing,
        median=statistics.median(ran),
        low=min(ran),
        high=max(ran),
        q1=q1,
        q3=q3,
    )


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` round by round: the median of the per-round ratios a/b and their range."""

    n: int
    ratio: float | None = None
    low: float | None = None
    high: float | None = None

    @property
    def decided(self) -> bool:
        """Whether every round puts ``a`` on the same side of ``b``, over at least MIN_ROUNDS rounds."""
        if self.n < MIN_ROUNDS or self.low is None or self.high is None:
            return False
        return self.low > 1 or self.high < 1

    def verdict(self, a: str, b: str) -> str:
        """``a`` ahead of / behind ``b``, or that the rounds disagree."""
        if self.n == 0 or self.ratio is None or self.low is None or self.high is None:
            return f"{a} vs {b}: no round where both ran"
        shown = f"{self.ratio:.2f}× {b} (rounds {self.low:.2f}–{self.high:.2f})"
        if self.n < MIN_ROUNDS:
            return f"{a} vs {b}: {shown}, only {self.n} round(s) where both ran: too few to conclude"
        if self.low > 1:
            return f"{a} ahead of {b}: {shown}"
        if self.high < 1:
            return f"{a} behind {b}: {shown}"
        return f"{a} vs {b}: {shown}, spread too wide to conclude"

    def within(self, tolerance: float) -> bool | None:
        """Whether ``a`` is no more than ``tolerance`` behind ``b`` in every round (True), more than
        that behind in every round (False), or the rounds disagree (None)."""
        if self.n < MIN_ROUNDS or self.low is None or self.high is None:
            return None
        if self.low >= 1 - tolerance:
            return True
        if self.high < 1 - tolerance:
            return False
        return None


def compare(a: Sequence[float | None], b: Sequence[float | None]) -> Comparison:
    """Pair the rounds of ``a`` and ``b`` (same index = same round); a round where either did not
    run is left out."""
    ratios = [x / y for x, y in zip(a, b, strict=False) if x is not None and y is not None and y > 0]
    if not ratios:
        return Comparison(n=0)
    return Comparison(n=len(ratios), ratio=statistics.median(ratios), low=min(ratios), high=max(ratios))


def within_verdict(a: str, b: str, comparison: Comparison, tolerance: float) -> str:
    """The goal "``a`` within ``tolerance`` of ``b``" (or ahead of it): met in every round, missed
    in every round, or not decidable because the rounds disagree."""
    percent = f"{tolerance * 100:g} %"
    met = comparison.within(tolerance)
    if comparison.n == 0 or comparison.ratio is None:
        return f"{a} within {percent} of {b}: no round where both ran"
    shown = f"{comparison.ratio:.3f}× {b} (rounds {comparison.low:.3f}–{comparison.high:.3f})"
    if comparison.n < MIN_ROUNDS:
        return f"{a} within {percent} of {b}? {shown}, only {comparison.n} round(s) where both ran: too few"
    if met is True:
        return f"{a} within {percent} of {b} or ahead, in every round: {shown}"
    if met is False:
        return f"{a} more than {percent} behind {b} in every round: {shown}"
    return f"{a} within {percent} of {b}? {shown}, spread too wide to conclude"


def rotation(names: Sequence[str], round_index: int) -> list[str]:
    """The order of the variants in one round: rotated by one each round, so that no variant
    always runs first (on a cold cache) or right after the same neighbour."""
    if not names:
        return []
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


def format_summary(summary: Summary) -> str:
    """``12,345  (min–max 11,900–12,800, IQR 12,100–12,500, spread 7 %)`` or why there is no figure."""
    if summary.median is None:
        return f"no figure: did not run in any of {summary.missing} rounds"
    assert summary.low is not None and summary.high is not None
    assert summary.q1 is not None and summary.q3 is not None
    spread = "" if summary.spread is None else f", spread {summary.spread * 100:.0f} %"
    text = (
        f"{summary.median:>9,.0f}  (min–max {summary.low:,.0f}–{summary.high:,.0f}, "
        f"IQR {summary.q1:,.0f}–{summary.q3:,.0f}{spread}"
    )
    if summary.noisy:
        text += ", noisy"
    if summary.missing:
        text += f"; did not run in {summary.missing} of {summary.n + summary.missing} rounds"
    return text + ")"
