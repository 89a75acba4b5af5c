"""Read pgbench's transaction logs (``-l``): per-transaction lines and ``--aggregate-interval`` rows.

pgbench writes one log file per thread, ``<prefix>.<pid>`` for the first and ``<prefix>.<pid>.<n>``
for the others, through stdio buffers: a file grows by blocks, and its last line can be incomplete
while the run goes on. :class:`TxLogTail` returns only complete lines and keeps the rest for later.

Per-transaction line (v15)::

    client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

``time`` is the latency in microseconds, or ``skipped``/``failed`` (``serialization``/``deadlock``
with ``--failures-detailed``). ``schedule_lag`` is present with ``--rate``, ``retries`` when
``--max-tries`` is not 1: a 7-field line is ambiguous, so the reader is told which (:class:`TxLogFormat`).

Aggregate line (v15): always 15 fields, zero when an option is off (see :class:`AggregateRow`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

TX_OK = "ok"
TX_FAILED_STATUSES = frozenset({"failed", "serialization", "deadlock"})
TX_STATUSES = frozenset({"skipped"}) | TX_FAILED_STATUSES


@dataclass(frozen=True)
class TxLogFormat:
    """Which optional columns the per-transaction log has: from ``--rate`` and ``--max-tries``."""

    schedule_lag: bool = False
    retries: bool = False

    @classmethod
    def for_options(cls, rate: float | None, max_tries: int | None) -> TxLogFormat:
        return cls(schedule_lag=rate is not None, retries=max_tries is not None and max_tries != 1)

    @property
    def field_count(self) -> int:
        return 6 + int(self.schedule_lag) + int(self.retries)


@dataclass(frozen=True)
class TxRecord:
    """One transaction from a ``-l`` log; ``latency_us`` is None unless ``status`` is ``ok``."""

    client_id: int
    transaction_no: int
    status: str
    latency_us: int | None
    script_no: int
    time_epoch: int
    time_us: int
    schedule_lag_us: int | None = None
    retries: int | None = None

    @property
    def end_time(self) -> float:
        """Completion time as a Unix timestamp."""
        return self.time_epoch + self.time_us / 1_000_000

    @property
    def latency_ms(self) -> float | None:
        return None if self.latency_us is None else self.latency_us / 1000


def parse_txlog_line(line: str, fmt: TxLogFormat | None = None) -> TxRecord | None:
    """Parse one per-transaction line; None for a line of another shape (comment, cut, garbage)."""
    fmt = fmt or TxLogFormat()
    parts = line.split()
    if len(parts) != fmt.field_count:
        return None
    time_field = parts[2]
    numbers = parts[:2] + parts[3:]
    if not all(part.isdigit() for part in numbers):
        return None
    if time_field.isdigit():
        status, latency = TX_OK, int(time_field)
    elif time_field in TX_STATUSES:
        status, latency = time_field, None
    else:
        return None
    extra = [int(part) for part in parts[6:]]
    lag = extra.pop(0) if fmt.schedule_lag else None
    retries = extra.pop(0) if fmt.retries else None
    return TxRecord(
        client_id=int(parts[0]),
        transaction_no=int(parts[1]),
        status=status,
        latency_us=latency,
        script_no=int(parts[3]),
        time_epoch=int(parts[4]),
        time_us=int(parts[5]),
        schedule_lag_us=lag,
        retries=retries,
    )


def parse_txlog(text: str, fmt: TxLogFormat | None = None) -> list[TxRecord]:
    return _records(text.splitlines(), fmt)


def _records(lines: Iterable[str], fmt: TxLogFormat | None) -> list[TxRecord]:
    """The transactions of ``lines`` (lines of another shape are skipped)."""
    records = (parse_txlog_line(line, fmt) for line in lines)
    return [record for record in records if record is not None]


@dataclass(frozen=True)
class AggregateRow:
    """One ``--aggregate-interval`` line. Times are microseconds; counts are per interval."""

    interval_start: int
    transactions: int
    latency_sum_us: float
    latency_sum2_us: float
    latency_min_us: float
    latency_max_us: float
    lag_sum_us: float
    lag_sum2_us: float
    lag_min_us: float
    lag_max_us: float
    skipped: int
    retried: int
    retries: int
    serialization_failures: int
    deadlock_failures: int

    @property
    def latency_avg_ms(self) -> float | None:
        if not self.transactions:
            return None
        return self.latency_sum_us / self.transactions / 1000

    @property
    def latency_stddev_ms(self) -> float | None:
        if not self.transactions:
            return None
        mean = self.latency_sum_us / self.transactions
        variance = max(self.latency_sum2_us / self.transactions - mean * mean, 0.0)
        return math.sqrt(variance) / 1000


_INT_RE = re.compile(r"\d+")
_AGGREGATE_INT_FIELDS = {0, 1, 10, 11, 12, 13, 14}


def parse_aggregate_line(line: str) -> AggregateRow | None:
    """Parse one 15-field aggregate line; None for anything else."""
    parts = line.split()
    if len(parts) != 15 or not all(_INT_RE.fullmatch(part) for part in parts):
        return None
    values = [int(part) if i in _AGGREGATE_INT_FIELDS else float(part) for i, part in enumerate(parts)]
    return AggregateRow(*values)  # type: ignore[arg-type]


def parse_aggregate_log(text: str) -> list[AggregateRow]:
    rows = (parse_aggregate_line(line) for line in text.splitlines())
    return [row for row in rows if row is not None]


@dataclass
class _FileState:
    offset: int = 0
    partial: bytes = b""


@dataclass
class TxLogTail:
    """Incrementally read the complete lines appended to one run's log files.

    ``prefix`` is the ``--log-prefix`` value (default ``pgbench_log`` in pgbench's working
    directory); give ``pid`` when several runs share a prefix. Files appearing later are picked up.
    """

    prefix: str | Path
    pid: int | None = None
    fmt: TxLogFormat = field(default_factory=TxLogFormat)
    _states: dict[Path, _FileState] = field(default_factory=dict, init=False, repr=False)

    def files(self) -> list[Path]:
        """This run's log files, first thread first."""
        prefix = Path(self.prefix)
        pid = str(self.pid) if self.pid is not None else r"\d+"
        pattern = re.compile(rf"{re.escape(prefix.name)}\.({pid})(?:\.(\d+))?")
        found: list[tuple[int, int, Path]] = []
        directory = prefix.parent
        if not directory.is_dir():
            return []
        for path in directory.iterdir():
            match = pattern.fullmatch(path.name)
            if match and path.is_file():
                found.append((int(match.group(1)), int(match.group(2) or 0), path))
        return [path for _, _, path in sorted(found)]

    def read_lines(self, *, final: bool = False) -> list[str]:
        """New complete lines since the last call; with ``final`` also an unterminated last line."""
        lines: list[str] = []
        for path in self.files():
            state = self._states.setdefault(path, _FileState())
            try:
                # The directory belongs to pgbench's user: never follow a link it holds.
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as handle:
                    size = handle.seek(0, 2)
                    if size < state.offset:  # truncated or replaced: start again
                        state.offset, state.partial = 0, b""
                    handle.seek(state.offset)
                    data = handle.read(size - state.offset)
            except OSError:
                continue
            state.offset += len(data)
            chunks = (state.partial + data).split(b"\n")
            state.partial = chunks.pop()
            if final and state.partial:
                chunks.append(state.partial)
                state.partial = b""
            lines.extend(chunk.decode("utf-8", errors="replace") for chunk in chunks if chunk)
        return lines

    def poll(self, *, final: bool = False) -> list[TxRecord]:
        """New transactions since the last call (lines of another shape are skipped)."""
        return _records(self.read_lines(final=final), self.fmt)


@dataclass(frozen=True)
class LatencyPercentiles:
    """Latency percentiles of one interval, in ms, and how many transactions they describe."""

    p50_ms: float
    p95_ms: float
    p99_ms: float
    count: int

    @classmethod
    def of(cls, sorted_values: list[float]) -> LatencyPercentiles:
        """The percentiles of an ascending, non-empty list of latencies in ms."""
        return cls(
            percentile(sorted_values, 50),
            percentile(sorted_values, 95),
            percentile(sorted_values, 99),
            len(sorted_values),
        )


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list: the smallest value with at least
    ``p`` % of the values at or below it (no interpolation, so the result is a measured latency)."""
    # round() keeps 95 % of 20 at rank 19 despite binary floating point
    rank = max(1, math.ceil(round(p * len(sorted_values) / 100, 9)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def interval_index(end_time: float, start_epoch: float, interval_s: float) -> int:
    """The progress interval a transaction completed in: ``k`` covers
    ``[start_epoch + k*interval_s, start_epoch + (k+1)*interval_s)``; before the start counts in 0."""
    return max(0, math.floor((end_time - start_epoch) / interval_s))


def percentiles_by_interval(
    records: Iterable[TxRecord], interval_s: float, start_epoch: float
) -> dict[int, LatencyPercentiles]:
    """Latency percentiles (ms) of completed transactions, by completion interval.

    Key ``k`` covers ``[start_epoch + k*interval_s, start_epoch + (k+1)*interval_s)``, so key 0
    matches the progress line at ``interval_s``. Skipped and failed transactions have no latency
    and are not counted; a transaction stamped before ``start_epoch`` (clock rounding) counts in 0.
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    buckets: dict[int, list[float]] = {}
    for record in records:
        if record.latency_us is None:
            continue
        key = interval_index(record.end_time, start_epoch, interval_s)
        buckets.setdefault(key, []).append(record.latency_us / 1000)
    return {key: LatencyPercentiles.of(sorted(buckets[key])) for key in sorted(buckets)}
