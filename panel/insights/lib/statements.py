"""Statement statistics (``pg_stat_statements``) as deltas between collections, and a window's
totals from them (pure, no Django).

``pg_stat_statements`` keeps counters since its last reset, per statement (``queryid``), database
and role. Each collection turns the counters into what changed since the previous collection; a
window ("last hour") is the sum of the deltas stored in it, never a figure since the reset. A
statement whose counters went down (``pg_stat_statements_reset()``, an entry evicted and added
again, a crash that lost the file) and every statement after a reset the server reports counts
again from zero; one seen for the first time did all of its calls since the previous collection.

Standard deviations add up through the sum of squares: PostgreSQL reports the population
deviation, so ``Σx² = calls × (stddev² + mean²)``, and a window's deviation comes from the sums.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

Key = tuple[int, int, int]  # (queryid, dbid, userid), as pg_stat_statements keys its entries


@dataclass(frozen=True)
class Reading:
    """One entry of pg_stat_statements as read: counters since its reset."""

    queryid: int
    dbid: int
    userid: int
    database: str
    role: str
    calls: int
    total_ms: float
    sq_ms: float  # Σ of squared execution times (ms²)
    rows: int
    blks_hit: int
    blks_read: int

    @property
    def key(self) -> Key:
        return (self.queryid, self.dbid, self.userid)

    @classmethod
    def from_stats(
        cls,
        queryid: int,
        dbid: int,
        userid: int,
        database: str,
        role: str,
        calls: int,
        total_ms: float,
        mean_ms: float,
        stddev_ms: float,
        rows: int,
        blks_hit: int,
        blks_read: int,
    ) -> Reading:
        sq = calls * (stddev_ms * stddev_ms + mean_ms * mean_ms)
        return cls(queryid, dbid, userid, database, role, calls, total_ms, sq, rows, blks_hit, blks_read)


@dataclass(frozen=True)
class Figures:
    """What pg_stat_statements counts of one statement in one database as one role, over a span:
    between two collections (``Delta``) or summed over a window (``Totals``)."""

    queryid: int
    database: str
    role: str
    calls: int
    total_ms: float
    sq_ms: float
    rows: int
    blks_hit: int
    blks_read: int


@dataclass(frozen=True)
class Delta(Figures):
    """What one statement did between two collections."""


def _went_down(old: Reading, new: Reading) -> bool:
    return (
        new.calls < old.calls
        or new.rows < old.rows
        or new.blks_hit < old.blks_hit
        or new.blks_read < old.blks_read
        # float sums: a reset entry with as many calls is still smaller in time, almost surely
        or new.total_ms < old.total_ms
    )


def deltas(
    previous: Mapping[Key, Reading] | None, current: Iterable[Reading], *, reset: bool = False
) -> list[Delta]:
    """What changed since ``previous`` (None: the first reading, a baseline that yields nothing).

    ``reset``: the server reports a reset since ``previous`` was read, so every counter counts
    from zero. Statements that did not run since are left out."""
    if previous is None:
        return []
    out = []
    for new in current:
        old = None if reset else previous.get(new.key)
        if old is not None and _went_down(old, new):
            old = None
        if old is None:
            d = Delta(
                new.queryid,
                new.database,
                new.role,
                new.calls,
                new.total_ms,
                new.sq_ms,
                new.rows,
                new.blks_hit,
                new.blks_read,
            )
        else:
            d = Delta(
                new.queryid,
                new.database,
                new.role,
                new.calls - old.calls,
                new.total_ms - old.total_ms,
                max(new.sq_ms - old.sq_ms, 0.0),
                new.rows - old.rows,
                new.blks_hit - old.blks_hit,
                new.blks_read - old.blks_read,
            )
        if d.calls > 0:
            out.append(d)
    return out


def top(items: Iterable[Delta], limit: int) -> list[Delta]:
    """The ``limit`` deltas that took the most time: what one collection stores."""
    return sorted(items, key=lambda d: (-d.total_ms, -d.calls, d.queryid))[:limit]


@dataclass(frozen=True)
class Totals(Figures):
    """A statement's figures over a window: sums of its deltas, and what follows from them."""

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.calls if self.calls else 0.0

    @property
    def stddev_ms(self) -> float:
        if not self.calls:
            return 0.0
        mean = self.mean_ms
        return math.sqrt(max(self.sq_ms / self.calls - mean * mean, 0.0))

    @property
    def hit_percent(self) -> float | None:
        """Share of shared blocks found in the buffer cache; None when it read none."""
        blocks = self.blks_hit + self.blks_read
        return 100.0 * self.blks_hit / blocks if blocks else None

    @property
    def rows_per_call(self) -> float:
        return self.rows / self.calls if self.calls else 0.0


def combine(items: Iterable[Delta]) -> list[Totals]:
    """Deltas summed per (statement, database, role)."""
    sums: dict[tuple[int, str, str], list[float]] = {}
    for d in items:
        acc = sums.setdefault((d.queryid, d.database, d.role), [0, 0.0, 0.0, 0, 0, 0])
        acc[0] += d.calls
        acc[1] += d.total_ms
        acc[2] += d.sq_ms
        acc[3] += d.rows
        acc[4] += d.blks_hit
        acc[5] += d.blks_read
    return [
        Totals(q, db, role, int(a[0]), a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
        for (q, db, role), a in sums.items()
    ]


# Orders of the Queries tab: larger first, except the hit ratio (the worst cache use first).
SORTS: dict[str, Callable[[Totals], float]] = {
    "total": lambda t: -t.total_ms,
    "calls": lambda t: -t.calls,
    "mean": lambda t: -t.mean_ms,
    "stddev": lambda t: -t.stddev_ms,
    "rows": lambda t: -t.rows,
    "hit": lambda t: 101.0 if t.hit_percent is None else t.hit_percent,
}


def ordered(totals: Iterable[Totals], by: str = "total") -> list[Totals]:
    if by not in SORTS:
        raise ValueError(f"unknown order {by!r}: one of {', '.join(SORTS)}")
    key = SORTS[by]
    return sorted(totals, key=lambda t: (key(t), -t.total_ms, t.queryid, t.database, t.role))


# --- what a collection knows beforehand and brings back ------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """The previous reading of a cluster's statements, prepared before a collection."""

    checked_at: float | None  # epoch seconds of the collection that stored ``counters``
    stats_reset: float | None  # the server's reset time then (epoch seconds)
    counters: Mapping[Key, Reading] | None  # None: no reading yet (the next one is a baseline)
    known_texts: frozenset[int]


@dataclass
class Collected:
    """What one collection read of pg_stat_statements: a status, and when it answered, the
    readings, the deltas to store (the top ones) and the texts not stored yet."""

    status: str  # a StatementsStatus value
    message: str = ""
    stats_reset: float | None = None
    readings: list[Reading] | None = None
    deltas: list[Delta] | None = None
    texts: dict[int, str] | None = None
    created_extension: bool = False
    baseline: Baseline | None = None  # what the deltas were computed from
