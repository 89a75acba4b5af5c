"""Parse the summary pgbench prints on stdout at the end of a run (v15, tolerant of older forms).

Every field is optional: pgbench prints them depending on options (``-t``/``-T``, ``--rate``,
``--latency-limit``, ``--max-tries``, ``-C``, ``-r``) and version; unknown lines are skipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_F = r"(\d+(?:\.\d+)?)"
RUN_ABORTED_TEXT = "Run was aborted; the above results are incomplete."


def _number(text: str) -> float | None:
    value = float(text)
    return None if math.isnan(value) or math.isinf(value) else value


@dataclass(frozen=True)
class StatementLatency:
    """One line of the ``-r`` per-statement report."""

    latency_ms: float
    failures: int
    retries: int | None
    command: str


@dataclass(frozen=True)
class Summary:
    """The stdout summary of a run. Every field is optional: pgbench prints them by option and version."""

    pgbench_version: str | None = None
    server_version: str | None = None
    transaction_type: str | None = None
    scaling_factor: int | None = None
    partition_method: str | None = None
    partitions: int | None = None
    query_mode: str | None = None
    clients: int | None = None
    threads: int | None = None
    max_tries: int | None = None
    duration_s: int | None = None
    transactions_per_client: int | None = None
    transactions_processed: int | None = None
    transactions_expected: int | None = None  # with -t: clients x transactions per client
    failed_transactions: int | None = None
    failed_percent: float | None = None  # None when pgbench printed NaN% (0 transactions)
    serialization_failures: int | None = None
    deadlock_failures: int | None = None
    retried_transactions: int | None = None
    retried_percent: float | None = None
    total_retries: int | None = None
    skipped_transactions: int | None = None
    skipped_percent: float | None = None
    latency_limit_ms: float | None = None
    late_transactions: int | None = None
    late_percent: float | None = None
    latency_avg_ms: float | None = None
    latency_includes_failures: bool = False
    latency_stddev_ms: float | None = None
    schedule_lag_avg_ms: float | None = None
    schedule_lag_max_ms: float | None = None
    initial_connection_time_ms: float | None = None
    average_connection_time_ms: float | None = None  # with -C
    tps: float | None = None
    tps_includes_connections: bool = False  # with -C: "(including reconnection times)"
    statement_latencies: tuple[StatementLatency, ...] = ()
    aborted: bool = False


_PCT = r"\(([-+]?(?:\d+(?:\.\d+)?|(?i:nan|inf)))%\)"
_SUMMARY_FIELDS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(r"transaction type: (.+)"), ("transaction_type",)),
    (re.compile(r"scaling factor: (\d+)"), ("scaling_factor",)),
    (re.compile(r"partition method: (\S+)"), ("partition_method",)),
    (re.compile(r"partitions: (\d+)"), ("partitions",)),
    (re.compile(r"query mode: (\S+)"), ("query_mode",)),
    (re.compile(r"number of clients: (\d+)"), ("clients",)),
    (re.compile(r"number of threads: (\d+)"), ("threads",)),
    (re.compile(r"maximum number of tries: (\d+)"), ("max_tries",)),
    (re.compile(r"duration: (\d+) s"), ("duration_s",)),
    (re.compile(r"number of transactions per client: (\d+)"), ("transactions_per_client",)),
    (
        re.compile(r"number of transactions actually processed: (\d+)(?:/(\d+))?"),
        ("transactions_processed", "transactions_expected"),
    ),
    (re.compile(rf"number of failed transactions: (\d+) {_PCT}"), ("failed_transactions", "failed_percent")),
    (re.compile(rf"number of serialization failures: (\d+) {_PCT}"), ("serialization_failures", "")),
    (re.compile(rf"number of deadlock failures: (\d+) {_PCT}"), ("deadlock_failures", "")),
    (
        re.compile(rf"number of transactions retried: (\d+) {_PCT}"),
        ("retried_transactions", "retried_percent"),
    ),
    (re.compile(r"total number of retries: (\d+)"), ("total_retries",)),
    (
        re.compile(rf"number of transactions skipped: (\d+) {_PCT}"),
        ("skipped_transactions", "skipped_percent"),
    ),
    (
        re.compile(rf"number of transactions above the {_F} ms latency limit: (\d+)/\d+ {_PCT}"),
        ("latency_limit_ms", "late_transactions", "late_percent"),
    ),
    (re.compile(rf"latency stddev = {_F} ms"), ("latency_stddev_ms",)),
    (
        re.compile(rf"rate limit schedule lag: avg {_F} \(max {_F}\) ms"),
        ("schedule_lag_avg_ms", "schedule_lag_max_ms"),
    ),
    (re.compile(rf"initial connection time = {_F} ms"), ("initial_connection_time_ms",)),
    (re.compile(rf"average connection time = {_F} ms"), ("average_connection_time_ms",)),
]
_INT_FIELDS = {
    "scaling_factor",
    "partitions",
    "clients",
    "threads",
    "max_tries",
    "duration_s",
    "transactions_per_client",
    "transactions_processed",
    "transactions_expected",
    "failed_transactions",
    "serialization_failures",
    "deadlock_failures",
    "retried_transactions",
    "total_retries",
    "skipped_transactions",
    "late_transactions",
}
_STR_FIELDS = {"transaction_type", "partition_method", "query_mode"}
_HEADER_RE = re.compile(r"pgbench \((.*)\)")
_LATENCY_AVG_RE = re.compile(rf"latency average = {_F} ms( \(including failures\))?")
_TPS_RE = re.compile(r"tps = ([\d.]+) \((.+)\)")
_STATEMENTS_HEADER_RE = re.compile(r"(?: - )?statement latencies in milliseconds(.*):")
_STATEMENT_RE = re.compile(r"\s+([\d.]+)\s+(\d+)(?:\s+(\d+))?  (\S.*)")
_STATEMENT_NO_RETRIES_RE = re.compile(r"\s+([\d.]+)\s+(\d+)  (\S.*)")


def _convert(name: str, text: str | None) -> int | float | str | None:
    if text is None:
        return None
    if name in _INT_FIELDS:
        return int(text)
    if name in _STR_FIELDS:
        return text.strip()
    return _number(text)


def parse_summary(stdout_text: str, *, run_aborted: bool = False) -> Summary | None:
    """Parse pgbench's stdout; None when it holds no summary (pgbench could not start).

    The "Run was aborted" line goes to stderr: pass ``run_aborted`` from :class:`StderrParser`
    (the line is also recognised here, for callers that merged both streams).
    """
    values: dict[str, object] = {}
    statements: list[StatementLatency] = []
    statements_have_retries: bool | None = None
    found = False
    aborted = run_aborted
    for raw_line in stdout_text.splitlines():
        line = raw_line.rstrip("\r\n")
        text = line.strip()
        if statements_have_retries is not None:
            pattern = _STATEMENT_RE if statements_have_retries else _STATEMENT_NO_RETRIES_RE
            match = pattern.fullmatch(line)
            if match:
                groups = match.groups()
                retries = int(groups[2]) if statements_have_retries and groups[2] is not None else None
                statements.append(StatementLatency(float(groups[0]), int(groups[1]), retries, groups[-1]))
                continue
            statements_have_retries = None
        if RUN_ABORTED_TEXT in text:
            aborted = True
            continue
        header = _HEADER_RE.fullmatch(text)
        if header:
            client, _, server = header.group(1).partition(", server ")
            values["pgbench_version"] = client
            values["server_version"] = server or None
            continue
        match = _STATEMENTS_HEADER_RE.fullmatch(text)
        if match:
            statements_have_retries = "retries" in match.group(1)
            continue
        match = _LATENCY_AVG_RE.fullmatch(text)
        if match:
            values["latency_avg_ms"] = _number(match.group(1))
            values["latency_includes_failures"] = match.group(2) is not None
            continue
        match = _TPS_RE.fullmatch(text)
        if match:
            including = match.group(2).startswith("including")
            # Before v14 pgbench printed both tps lines; keep the one without connection time.
            if "tps" not in values or not including:
                values["tps"] = _number(match.group(1))
                values["tps_includes_connections"] = including
            continue
        for pattern, names in _SUMMARY_FIELDS:
            match = pattern.fullmatch(text)
            if match:
                found = found or names[0] == "transaction_type"
                for name, group in zip(names, match.groups(), strict=False):
                    if name:
                        values[name] = _convert(name, group)
                break
    if not found:
        return None
    return Summary(**values, statement_latencies=tuple(statements), aborted=aborted)  # type: ignore[arg-type]
