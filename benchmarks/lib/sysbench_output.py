"""Parse what sysbench 1.0 (``oltp_*`` scripts, ``pgsql`` driver) writes (pure, no Django).

sysbench writes everything to **stdout**, one ``printf`` per line from one reporting thread: the
banner, an interval line every ``--report-interval`` seconds, ``FATAL:`` errors (a libpq message can
run over several lines: ``LINE 1: …`` and a caret line follow), and the final report. So one
streaming parser reads the one stream: :class:`SysbenchParser` turns interval lines into
:class:`ProgressSample` (the same type as pgbench's, so samples, charts and exports are shared),
errors into :class:`ErrorLine` with pgbench's kinds, and keeps the lines of the final report for
:func:`parse_report`. Nothing here raises on unexpected input.

An interval line gives TPS, queries and one latency percentile (``--percentile``, 95 by default),
not the average latency: samples carry the percentile as ``p95_ms`` and no average. Errors sysbench
ignores and retries (a deadlock in ``oltp_read_write``) are counted per second (``err/s``): they are
the sample's ``retried`` transactions, as pgbench's retried serialization and deadlock failures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmarks.lib.pgbench_output import (
    CLIENT_ABORTED,
    COMPLETED_WITH_ERRORS,
    CONNECTION_FAILED,
    DETAIL,
    FAILED,
    FATAL_KINDS,
    RUN_ABORTED,
    SCRIPT_ERROR,
    SUCCEEDED,
    WARNING,
    ErrorLine,
    ProgressSample,
)

__all__ = [
    "InitStep",
    "IntervalFigures",
    "SysbenchParser",
    "SysbenchReport",
    "classify_exit",
    "histogram_percentile",
    "parse_error_line",
    "parse_init_line",
    "parse_interval_line",
    "parse_report",
]

_F = r"(\d+(?:\.\d+)?)"
_I = r"(\d+)"

# [ 1s ] thds: 4 tps: 299.65 qps: 6086.94 (r/w/o: 4273.04/1202.60/611.29) lat (ms,95%): 27.17 err/s: 3.00 reconn/s: 0.00
_INTERVAL_RE = re.compile(
    rf"\[ {_I}s \] thds: {_I} tps: {_F} qps: {_F} \(r/w/o: {_F}/{_F}/{_F}\) "
    rf"lat \(ms,{_I}%\): {_F} err/s: {_F} reconn/s: {_F}"
)
_HISTOGRAM_ROW_RE = re.compile(rf"\s*{_F} \|\**\s+{_I}")
_CONNECTION_RE = re.compile(r"Connection to database failed: (?:connection to server .*? failed: )?(.*)$")
_THREAD_RUN_RE = re.compile(r"`thread_run' function failed: (?:\S+:\d+: )?(.*)$")
_LIBPQ_CALL_RE = re.compile(r"^PQ\w+\(\) failed: (?:\d+ )?(.*)$")
_SEVERITY_RE = re.compile(r"^(?:FATAL|ERROR):\s+")
_INIT_CREATE_RE = re.compile(r"Creating table 'sbtest(\d+)'\.\.\.")
_INIT_INSERT_RE = re.compile(r"Inserting (\d+) records into 'sbtest(\d+)'")
_INIT_INDEX_RE = re.compile(r"Creating a secondary index on 'sbtest(\d+)'\.\.\.")


@dataclass(frozen=True)
class IntervalFigures:
    """What an interval line says beyond the common sample: queries and their mix, the threads."""

    threads: int
    qps: float
    reads_per_s: float
    writes_per_s: float
    others_per_s: float
    percentile: int
    latency_pct_ms: float  # the latency at that percentile
    reconnects_per_s: float


def parse_interval_line(line: str, interval_s: int = 1) -> tuple[ProgressSample, IntervalFigures] | None:
    """One ``[ Ns ] thds: …`` line as a sample (``interval_s``: ``--report-interval``, to turn
    ``err/s`` into a count), or None when the line is anything else."""
    match = _INTERVAL_RE.fullmatch(line.strip())
    if match is None:
        return None
    elapsed, threads, tps, qps, reads, writes, others, pct, lat, errs, reconn = match.groups()
    sample = ProgressSample(
        elapsed_s=float(elapsed),
        tps=float(tps),
        latency_avg_ms=None,  # type: ignore[arg-type]  # sysbench prints no average per interval
        latency_stddev_ms=None,  # type: ignore[arg-type]
        failed=None,
        retried=round(float(errs) * interval_s),
    )
    figures = IntervalFigures(
        threads=int(threads),
        qps=float(qps),
        reads_per_s=float(reads),
        writes_per_s=float(writes),
        others_per_s=float(others),
        percentile=int(pct),
        latency_pct_ms=float(lat),
        reconnects_per_s=float(reconn),
    )
    return sample, figures


def parse_error_line(line: str) -> ErrorLine | None:
    """A ``FATAL:`` or ``WARNING:`` line as an :class:`ErrorLine` with pgbench's kinds, so the run
    page and the failure explanations read both tools alike."""
    text = line.strip()
    if text.startswith("WARNING:"):
        return ErrorLine(WARNING, text[len("WARNING:") :].strip(), raw=text)
    if not text.startswith("FATAL:"):
        return None
    body = text[len("FATAL:") :].strip()
    if body == "Thread initialization failed!":
        return ErrorLine(RUN_ABORTED, body, raw=text)
    if body.startswith("`thread_init' function failed"):
        # Follows the connection failure that caused it: context, not a second error.
        return ErrorLine(DETAIL, body, raw=text)
    match = _CONNECTION_RE.search(body)
    if match:
        return ErrorLine(CONNECTION_FAILED, _SEVERITY_RE.sub("", match.group(1)).strip(), raw=text)
    match = _THREAD_RUN_RE.search(body)
    if match:
        return ErrorLine(CLIENT_ABORTED, match.group(1).strip(), raw=text)
    match = _LIBPQ_CALL_RE.match(body)
    if match:
        return ErrorLine(SCRIPT_ERROR, _SEVERITY_RE.sub("", match.group(1)).strip(), raw=text)
    return ErrorLine(SCRIPT_ERROR, body, raw=text)


@dataclass(frozen=True)
class InitStep:
    """A line of ``prepare``: which table it is at, and whether the table's rows are done."""

    table: int
    message: str
    rows_done: bool


def parse_init_line(line: str) -> InitStep | None:
    """``Creating table 'sbtest2'...``, ``Inserting N records into 'sbtest2'``, ``Creating a
    secondary index on 'sbtest2'...`` (the rows of that table are in)."""
    text = line.strip()
    for pattern, table_group, done in (
        (_INIT_CREATE_RE, 1, False),
        (_INIT_INSERT_RE, 2, False),
        (_INIT_INDEX_RE, 1, True),
    ):
        match = pattern.fullmatch(text)
        if match:
            return InitStep(int(match.group(table_group)), text, done)
    return None


@dataclass(frozen=True)
class SysbenchReport:
    """The final report of ``sysbench … run``. Fields are None when the report lacks them."""

    threads: int | None = None
    reads: int | None = None
    writes: int | None = None
    others: int | None = None
    queries: int | None = None
    transactions: int | None = None
    tps: float | None = None
    qps: float | None = None
    ignored_errors: int | None = None
    reconnects: int | None = None
    total_time_s: float | None = None
    events: int | None = None
    latency_min_ms: float | None = None
    latency_avg_ms: float | None = None
    latency_max_ms: float | None = None
    latency_percentile: int | None = None
    latency_percentile_ms: float | None = None
    latency_sum_ms: float | None = None
    # From ``--histogram``: the whole run's percentiles, read off the latency distribution.
    histogram_count: int | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None

    def as_summary(self) -> dict[str, object]:
        """The stored summary: pgbench's names where the figure means the same (tps, latency,
        transactions, clients), sysbench's own after them."""
        summary: dict[str, object] = {
            "tps": self.tps,
            "latency_avg_ms": self.latency_avg_ms,
            "transactions_processed": self.transactions,
            "failed_transactions": 0 if self.transactions is not None else None,
            "clients": self.threads,
            "threads": self.threads,
            "duration_s": round(self.total_time_s) if self.total_time_s is not None else None,
            "qps": self.qps,
            "queries": self.queries,
            "reads": self.reads,
            "writes": self.writes,
            "others": self.others,
            "ignored_errors": self.ignored_errors,
            "reconnects": self.reconnects,
            "total_time_s": self.total_time_s,
            "latency_min_ms": self.latency_min_ms,
            "latency_max_ms": self.latency_max_ms,
            "latency_p50_ms": self.latency_p50_ms,
            "latency_p95_ms": self.latency_p95_ms,
            "latency_p99_ms": self.latency_p99_ms,
        }
        if self.latency_percentile is not None and self.latency_percentile not in (50, 95, 99):
            summary[f"latency_p{self.latency_percentile}_ms"] = self.latency_percentile_ms
        return summary


def _compiled(*rows: tuple[str, tuple[str, ...]]) -> tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]:
    return tuple((re.compile(pattern), fields) for pattern, fields in rows)


# A report line: its pattern, and the fields its numbers go to ("total:" and "queries:" both
# exist; "min:"… only under "Latency (ms):", in _LATENCY_FIELDS).
_REPORT_FIELDS = _compiled(
    (rf"Number of threads: {_I}", ("threads",)),
    (rf"read:\s+{_I}", ("reads",)),
    (rf"write:\s+{_I}", ("writes",)),
    (rf"other:\s+{_I}", ("others",)),
    (rf"total:\s+{_I}", ("queries",)),
    (rf"transactions:\s+{_I}\s+\({_F} per sec\.\)", ("transactions", "tps")),
    (rf"queries:\s+{_I}\s+\({_F} per sec\.\)", ("queries", "qps")),
    (rf"ignored errors:\s+{_I}\s+\(.*\)", ("ignored_errors",)),
    (rf"reconnects:\s+{_I}\s+\(.*\)", ("reconnects",)),
    (rf"total time:\s+{_F}s", ("total_time_s",)),
    (rf"total number of events:\s+{_I}", ("events",)),
)
_LATENCY_FIELDS = _compiled(
    (rf"min:\s+{_F}", ("latency_min_ms",)),
    (rf"avg:\s+{_F}", ("latency_avg_ms",)),
    (rf"max:\s+{_F}", ("latency_max_ms",)),
    (rf"{_I}th percentile:\s+{_F}", ("latency_percentile", "latency_percentile_ms")),
    (rf"sum:\s+{_F}", ("latency_sum_ms",)),
)
_INT_FIELDS = frozenset(
    {"threads", "reads", "writes", "others", "queries", "transactions", "ignored_errors", "reconnects"}
    | {"events", "latency_percentile"}
)


def histogram_percentile(rows: list[tuple[float, int]], percent: float) -> float | None:
    """The value under which ``percent`` % of the counted latencies fall (sysbench's rows: a
    bucket's value and its count, ascending), as sysbench computes its own percentile."""
    total = sum(count for _value, count in rows)
    if total == 0:
        return None
    wanted = total * percent / 100
    seen = 0
    for value, count in rows:
        seen += count
        if seen >= wanted:
            return value
    return rows[-1][0]


def parse_report(stdout_text: str) -> SysbenchReport | None:
    """The final report of a run, or None when sysbench printed none (it could not start)."""
    if "SQL statistics:" not in stdout_text:
        return None
    values: dict[str, float | int] = {}
    histogram: list[tuple[float, int]] = []
    in_histogram = False
    section = ""
    for raw in stdout_text.splitlines():
        text = raw.strip()
        if text.startswith("Latency histogram"):
            in_histogram = True
            continue
        if in_histogram:
            row = _HISTOGRAM_ROW_RE.fullmatch(raw)
            if row:
                histogram.append((float(row.group(1)), int(row.group(2))))
                continue
            if text.startswith("value"):
                continue
            in_histogram = False
        if text.endswith(":") and not text[:-1].strip().isdigit():
            section = text
            continue
        latency = _LATENCY_FIELDS if section == "Latency (ms):" else ()
        for pattern, fields in _REPORT_FIELDS + latency:
            match = pattern.fullmatch(text)
            if match:
                for field_name, value in zip(fields, match.groups(), strict=True):
                    values[field_name] = int(value) if field_name in _INT_FIELDS else float(value)
                break
    report = SysbenchReport(**values)  # type: ignore[arg-type]
    if histogram:
        report = SysbenchReport(
            **{**values, "histogram_count": sum(count for _v, count in histogram)},  # type: ignore[arg-type]
            latency_p50_ms=histogram_percentile(histogram, 50),
            latency_p95_ms=histogram_percentile(histogram, 95),
            latency_p99_ms=histogram_percentile(histogram, 99),
        )
    elif report.latency_percentile == 95:
        report = SysbenchReport(**{**values, "latency_p95_ms": report.latency_percentile_ms})  # type: ignore[arg-type]
    return report


class SysbenchParser:
    """Streaming parser for sysbench's stdout: feed it one line at a time, in arrival order.

    It keeps what a caller needs at the end: every :class:`ErrorLine`, whether sysbench gave up
    (``Thread initialization failed!``), and the text from the report on, for :func:`parse_report`.
    """

    def __init__(self, interval_s: int = 1) -> None:
        self.interval_s = interval_s
        self.errors: list[ErrorLine] = []
        self.run_aborted = False
        self.report_lines: list[str] = []
        self.last_figures: IntervalFigures | None = None
        self.samples = 0
        self._threads_line = ""

    def feed(self, line: str) -> ProgressSample | ErrorLine | None:
        text = line.rstrip("\r\n")
        if self.report_lines or text.startswith(("SQL statistics:", "Latency histogram")):
            self.report_lines.append(text)
            return None
        if text.startswith("Number of threads:"):
            self._threads_line = text
            return None
        parsed = parse_interval_line(text, self.interval_s)
        if parsed is not None:
            sample, self.last_figures = parsed
            self.samples += 1
            return sample
        error = parse_error_line(text)
        if error is None:
            return None
        if error.kind == RUN_ABORTED:
            self.run_aborted = True
        self.errors.append(error)
        return error

    @property
    def report_text(self) -> str:
        """The report, with the banner's threads line (the report itself does not say them)."""
        if not self.report_lines:
            return ""
        return "\n".join([self._threads_line, *self.report_lines])


def _first(errors: list[ErrorLine], kinds: frozenset[str] | set[str]) -> ErrorLine | None:
    return next((error for error in errors if error.kind in kinds), None)


def classify_exit(
    returncode: int, report: SysbenchReport | None, errors: list[ErrorLine], *, samples: int = 0
) -> tuple[str, str]:
    """Map sysbench's exit to ``(status, reason)``, in the words pgbench's runs use: 0 with a
    report ran; a report after a non-zero exit ran with errors; no report could not start (no
    interval seen) or stopped; a negative code is a signal (a missing table crashes sysbench 1.0)."""
    first = _first(errors, {CONNECTION_FAILED}) or _first(errors, FATAL_KINDS)
    said = first.message if first else ""
    if returncode == 0:
        if report is None:
            return FAILED, "sysbench exited without printing a report"
        return SUCCEEDED, ""
    if report is not None:
        aborted = _first(errors, {CLIENT_ABORTED})
        return COMPLETED_WITH_ERRORS, f"clients aborted: {aborted.message if aborted else said or returncode}"
    if returncode < 0:
        suffix = f" after: {said}" if said else ""
        return FAILED, f"sysbench was stopped by signal {-returncode}{suffix}"
    if samples == 0:
        return FAILED, f"could not start: {said or f'sysbench exited with code {returncode}'}"
    return FAILED, f"sysbench exited with code {returncode}{f': {said}' if said else ''}"
