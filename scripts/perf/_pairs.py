"""Side-by-side pairs of one run by hand and the same run through the panel (pure, issue 30).

Imported by ``benchmarks.py``, ``watched_run.py`` and ``story.py`` (run as scripts, so this
directory is on ``sys.path``) and by ``tests/test_perf_pairs.py``. No Django, no processes: the
runs are callables handed in.

Fairness: one warm-up run each way before the first pair (a cold cache and a fresh cluster's first
checkpoint favour whoever runs second, as the first measurements did: 0.75 rising to 0.96); then
the order alternates pair by pair, so drift on a shared machine favours neither side; the figure
is the median of the pairs' ratios, each pair run back to back.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PAIRS = 7
TARGET = 0.95


def load_average(path: Path = Path("/proc/loadavg")) -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (the machine may be shared: print them with figures)."""
    one, five, fifteen = path.read_text().split()[:3]
    return float(one), float(five), float(fifteen)


def format_load(load: tuple[float, float, float]) -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*load)


def order(pair_index: int) -> tuple[str, str]:
    """Which side goes first in pair ``pair_index`` (0-based): hand first in even pairs."""
    return ("hand", "panel") if pair_index % 2 == 0 else ("panel", "hand")


@dataclass
class Pairs:
    """The pairs measured for one comparison: (hand, panel) figures, in the order they ran."""

    label: str
    figures: list[tuple[float, float]] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [panel / hand for hand, panel in self.figures if hand > 0]

    @property
    def median_ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    def summary_line(self) -> str:
        """``ratio panel/hand median 0.973 (pairs: 0.95, 0.99, …)`` with its label and the target."""
        if not self.ratios:
            return f"{self.label}: ratio panel/hand: no pair ran"
        pairs = ", ".join(f"{ratio:.3f}" for ratio in self.ratios)
        met = "met" if (self.median_ratio or 0) >= TARGET else "missed"
        return (
            f"{self.label}: ratio panel/hand median {self.median_ratio:.3f} (pairs: {pairs}); "
            f"target ≥ {TARGET} {met}"
        )

    def medians(self) -> tuple[float, float]:
        """The median TPS by hand and through the panel (not paired: for the table)."""
        return (
            statistics.median(hand for hand, _ in self.figures),
            statistics.median(panel for _, panel in self.figures),
        )


def run_pairs(
    pairs: Pairs,
    count: int,
    by_hand: Callable[[], float],
    panel: Callable[[], float],
    *,
    report: Callable[[int, float, float], None] | None = None,
) -> Pairs:
    """``count`` pairs, the order alternating (see :func:`order`); ``report(i, hand, panel)`` after each."""
    sides = {"hand": by_hand, "panel": panel}
    for index in range(count):
        got = {side: sides[side]() for side in order(index)}
        pairs.figures.append((got["hand"], got["panel"]))
        if report is not None:
            report(index, got["hand"], got["panel"])
    return pairs


def argv_differences(hand: Sequence[str], panel: Sequence[str]) -> tuple[list[str], list[str]]:
    """The arguments only the hand run has, and those only the panel's has (program paths and
    options in the same order compared as a multiset of tokens)."""
    only_hand = list(hand)
    only_panel: list[str] = []
    for token in panel:
        if token in only_hand:
            only_hand.remove(token)
        else:
            only_panel.append(token)
    return only_hand, only_panel


def rotation(names: Sequence[str], round_index: int) -> list[str]:
    """The order of the sides in one round, rotated by one each round (two sides: alternating)."""
    if not names:
        return []
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


def run_rounds(
    count: int,
    sides: dict[str, Callable[[], float]],
    *,
    report: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, list[float]]:
    """``count`` rounds of every side, the order rotating (see :func:`rotation`): each side's
    figures, round by round; ``report(i, figures of round i)`` after each."""
    figures: dict[str, list[float]] = {name: [] for name in sides}
    for index in range(count):
        got = {name: sides[name]() for name in rotation(list(sides), index)}
        for name, value in got.items():
            figures[name].append(value)
        if report is not None:
            report(index, got)
    return figures


def pairs_of(label: str, hand: Sequence[float], panel: Sequence[float]) -> Pairs:
    """The rounds of two sides as pairs (same index: same round)."""
    return Pairs(label, list(zip(hand, panel, strict=True)))
