"""Parse what pgbench (v15, with fallbacks for older forms) writes while it runs.

pgbench writes progress lines and errors to stderr and the summary to stdout, from several threads
and with several ``fprintf`` calls per line, so stderr lines can be garbled mid-line and the two
streams' order is not reliable. Each stream is parsed on its own, line by line:

- a progress sample is only produced from a line that matches the whole v15 format (optionally
  checked against the shape the command line implies, see :class:`ProgressShape`), so a garbled line
  is dropped rather than turned into a wrong point on a chart;
- error messages are recognised anywhere in a line, because each message body is written by one
  ``fprintf`` call and survives garbling of its ``pgbench: error:`` prefix.

Nothing here raises on unexpected input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from benchmarks.lib.pgbench_summary import RUN_ABORTED_TEXT, StatementLatency, Summary, parse_summary
from panel.clusters.lib.refusals import without_paths

__all__ = [
    "CLIENT_ABORTED",
    "COMPLETED_WITH_ERRORS",
    "CONNECTION_FAILED",
    "DETAIL",
    "FAILED",
    "FATAL_KINDS",
    "IGNORED",
    "NO_CONNECTION",
    "RUN_ABORTED",
    "SCRIPT_ERROR",
    "SUCCEEDED",
    "TX_FAILURE",
    "WARNING",
    "ErrorLine",
    "InitDone",
    "InitPhase",
    "InitProgress",
    "ProgressSample",
    "ProgressShape",
    "StatementLatency",
    "StderrEvent",
    "StderrParser",
    "Summary",
    "classify_exit",
    "parse_error_line",
    "parse_progress_line",
    "parse_stderr",
    "parse_summary",
]

_F = r"(\d+(?:\.\d+)?)"  # pgbench prints non-negative fixed-point numbers: "%.1f", "%.3f"
_I = r"(\d+)"


@dataclass(frozen=True)
class ProgressShape:
    """Which optional parts a run's progress lines carry, known from its command line.

    ``lag`` with ``--rate``; ``skipped`` with ``--rate`` and ``--latency-limit``; ``retries`` when
    ``--max-tries`` is not 1. A line missing a part the run must print was cut short: it is refused.
    """

    lag: bool = False
    skipped: bool = False
    retries: bool = False


@dataclass(frozen=True)
class ProgressSample:
    """One ``progress:`` line; the counts are per interval, not cumulative."""

    elapsed_s: float
    tps: float
    latency_avg_ms: float
    latency_stddev_ms: float
    failed: int | None  # None before v15, which did not report failures
    lag_ms: float | None = None
    skipped: int | None = None
    retried: int | None = None
    retries: int | None = None


@dataclass(frozen=True)
class InitProgress:
    """One ``N of M tuples (P%) done`` line of ``pgbench -i`` (client-side generation only)."""

    done: int
    total: int
    percent: int
    elapsed_s: float
    remaining_s: float


@dataclass(frozen=True)
class InitPhase:
    """``pgbench -i`` started a step (``dropping old tables...`` and so on)."""

    step: str
    message: str


@dataclass(frozen=True)
class InitDone:
    """The final ``done in X s (drop tables 0.00 s, ...).`` line of ``pgbench -i``."""

    elapsed_s: float
    steps: dict[str, float] = field(default_factory=dict)


# ErrorLine kinds. Only FATAL_KINDS explain why a run failed; the others are context.
CONNECTION_FAILED = "connection_failed"  # libpq: connection to server ... failed: <message>
NO_CONNECTION = "no_connection"  # could not create connection for client N / for setup
CLIENT_ABORTED = "client_aborted"  # client N ... aborted ...: <message>
RUN_ABORTED = "run_aborted"  # Run was aborted; the above results are incomplete.
SCRIPT_ERROR = "error"  # any other "pgbench: error:" (bad script, bad option, ...)
TX_FAILURE = "transaction_failure"  # --verbose-errors: one transaction failed or is retried
IGNORED = "ignored"  # errors pgbench ignores: VACUUM/TRUNCATE before the run
WARNING = "warning"  # server WARNING lines (e.g. vacuum skipped: not the owner)
DETAIL = "detail"  # "pgbench: detail:" / "pgbench: hint:"
FATAL_KINDS = frozenset({CONNECTION_FAILED, NO_CONNECTION, CLIENT_ABORTED, SCRIPT_ERROR})


@dataclass(frozen=True)
class ErrorLine:
    """An error or warning pgbench (or sysbench) printed; ``message`` has the server severity
    prefix removed and names no path (libpq's ``on socket "/…/.s.PGSQL.5432"`` is "on the server's
    socket"): it is what pages, exports and stored reasons show. ``raw`` is the line as printed."""

    kind: str
    message: str
    client_id: int | None = None
    raw: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", without_paths(self.message))


StderrEvent: TypeAlias = ProgressSample | InitProgress | InitPhase | InitDone | ErrorLine

# Exact decimals as pgbench prints them ("%.1f" tps, "%.3f" ms; elapsed "%.1f", or "%.3f" with
# --progress-timestamp): a line cut inside its last number then cannot pass for a complete one.
_D1 = r"(\d+\.\d)"
_D3 = r"(\d+\.\d{3})"
_PROGRESS_RE = re.compile(
    rf"progress: (\d+\.\d(?:\d\d)?) s, {_D1} tps, lat {_D3} ms stddev {_D3}"
    rf"(?:, {_I} failed)?"
    rf"(?:, lag {_D3} ms(?:, {_I} skipped)?)?"
    rf"(?:, {_I} retried, {_I} retries)?"
)
_INIT_PROGRESS_RE = re.compile(rf"{_I} of {_I} tuples \({_I}%\) done \(elapsed {_F} s, remaining {_F} s\)")
_INIT_DONE_RE = re.compile(rf"done in {_F} s \((.*)\)\.")
_INIT_DONE_STEP_RE = re.compile(rf"([a-z -]+?) {_F} s")
_INIT_PHASES = {
    "dropping old tables...": "drop_tables",
    "creating tables...": "create_tables",
    "generating data (client-side)...": "generate_client",
    "generating data (server-side)...": "generate_server",
    "vacuuming...": "vacuum",
    "creating primary keys...": "primary_keys",
    "creating foreign keys...": "foreign_keys",
}
_PARTITIONS_RE = re.compile(r"creating \d+ partitions\.\.\.")

_SEVERITY_RE = re.compile(r"^(?:FATAL|ERROR|PANIC|WARNING):\s+")
# Message bodies, searched anywhere in a line because a garbled prefix must not hide them.
_ABORT_V15_RE = re.compile(r"(?<!\d)client (\d+) script \d+ aborted in command \d+ query \d+: (.*)$")
_ABORT_META_RE = re.compile(r"(?<!\d)client (\d+) aborted in command \d+ \(\w+\) of script \d+; (.*)$")
_ABORT_OTHER_RE = re.compile(r"(?<!\d)client (\d+) (aborted\b.*)$")
_TX_FAILURE_RE = re.compile(
    r"(?<!\d)client (\d+) (?:got an error in command \d+ \(SQL\) of script \d+; (.*)|repeats the .*)$"
)
_NO_CONNECTION_RE = re.compile(r"could not create connection for (?:client (\d+)|(setup|initialization))$")
_CONNECTION_FAILED_RE = re.compile(r"connection to server (?:at .*?|on socket .*?) failed: (.*)$")
_PREFIX_RE = re.compile(r"^(?:\s*(?:pgbench:|error:|fatal:))+\s*")
_DETAIL_RE = re.compile(r"^pgbench: (?:detail|hint): (.*)$")


def _strip_severity(message: str) -> str:
    return _SEVERITY_RE.sub("", message.strip()).strip()


def parse_progress_line(line: str, shape: ProgressShape | None = None) -> ProgressSample | None:
    """Return the sample of one intact ``progress:`` line, or None for anything else."""
    match = _PROGRESS_RE.fullmatch(line.rstrip("\r\n"))
    if match is None:
        return None
    elapsed, tps, lat, stddev, failed, lag, skipped, retried, retries = match.groups()
    if shape is not None and (
        (lag is not None) != shape.lag
        or (skipped is not None) != shape.skipped
        or (retries is not None) != shape.retries
        or failed is None  # the shape is only known for v15 runs, which always print failures
    ):
        return None
    return ProgressSample(
        elapsed_s=float(elapsed),
        tps=float(tps),
        latency_avg_ms=float(lat),
        latency_stddev_ms=float(stddev),
        failed=None if failed is None else int(failed),
        lag_ms=None if lag is None else float(lag),
        skipped=None if skipped is None else int(skipped),
        retried=None if retried is None else int(retried),
        retries=None if retries is None else int(retries),
    )


def parse_error_line(line: str) -> ErrorLine | None:
    """Classify one stderr line that is not a progress line; None when it says nothing useful."""
    raw = line.rstrip("\r\n")
    text = raw.strip()
    if not text or text.startswith("NOTICE:"):
        return None
    detail = _DETAIL_RE.match(text)
    if detail:
        return ErrorLine(DETAIL, detail.group(1).strip(), raw=raw)
    for pattern in (_ABORT_V15_RE, _ABORT_META_RE):
        match = pattern.search(text)
        if match:
            return ErrorLine(CLIENT_ABORTED, _strip_severity(match.group(2)), int(match.group(1)), raw)
    match = _ABORT_OTHER_RE.search(text)
    if match:
        return ErrorLine(CLIENT_ABORTED, match.group(2).strip(), int(match.group(1)), raw)
    match = _TX_FAILURE_RE.search(text)
    if match:  # --verbose-errors: a failed or retried transaction, not a dead client
        message = _strip_severity(match.group(2) or match.group(0))
        return ErrorLine(TX_FAILURE, message, int(match.group(1)), raw)
    match = _NO_CONNECTION_RE.search(text)
    if match:
        client = match.group(1)
        message = f"could not create connection for {'client ' + client if client else match.group(2)}"
        return ErrorLine(NO_CONNECTION, message, int(client) if client else None, raw)
    match = _CONNECTION_FAILED_RE.search(text)
    if match:
        reason = match.group(1).strip()
        if _SEVERITY_RE.match(reason):
            # The server answered and refused: its message is the useful part.
            return ErrorLine(CONNECTION_FAILED, _strip_severity(reason), raw=raw)
        return ErrorLine(CONNECTION_FAILED, text[match.start() :], raw=raw)
    if RUN_ABORTED_TEXT in text:
        return ErrorLine(RUN_ABORTED, RUN_ABORTED_TEXT, raw=raw)
    if text.startswith("WARNING:"):
        return ErrorLine(WARNING, _strip_severity(text), raw=raw)
    if "error:" in text or "fatal:" in text:
        body = _PREFIX_RE.sub("", text[text.find("pgbench:") :] if "pgbench:" in text else text)
        return ErrorLine(SCRIPT_ERROR, _strip_severity(body) or text, raw=raw)
    if _SEVERITY_RE.match(text):  # a server message continued on its own line
        return ErrorLine(SCRIPT_ERROR, _strip_severity(text), raw=raw)
    return None


def _parse_init_line(text: str) -> InitProgress | InitPhase | InitDone | None:
    match = _INIT_PROGRESS_RE.fullmatch(text)
    if match:
        done, total, percent, elapsed, remaining = match.groups()
        return InitProgress(int(done), int(total), int(percent), float(elapsed), float(remaining))
    if text in _INIT_PHASES:
        return InitPhase(_INIT_PHASES[text], text)
    if _PARTITIONS_RE.fullmatch(text):
        return InitPhase("create_partitions", text)
    match = _INIT_DONE_RE.fullmatch(text)
    if match:
        steps = {name.strip(): float(value) for name, value in _INIT_DONE_STEP_RE.findall(match.group(2))}
        return InitDone(float(match.group(1)), steps)
    return None


class StderrParser:
    """Streaming parser for pgbench's stderr: feed it one line at a time, in arrival order.

    It also keeps what a caller needs at the end: every :class:`ErrorLine` seen, whether pgbench
    said the run was aborted, and which clients aborted.
    """

    def __init__(self, shape: ProgressShape | None = None) -> None:
        self.shape = shape
        self.errors: list[ErrorLine] = []
        self.run_aborted = False
        self.aborted_clients: set[int] = set()
        self._in_vacuum = False

    def feed(self, line: str) -> StderrEvent | None:
        """Parse one line (with or without its newline); never raises."""
        text = line.rstrip("\r\n")
        if "\r" in text:  # a terminal-style progress bar: only the last state matters
            text = text.rsplit("\r", 1)[-1]
        sample = parse_progress_line(text, self.shape)
        if sample is not None:
            return sample
        stripped = text.strip()
        init = _parse_init_line(stripped)
        if init is not None:
            return init
        if stripped.startswith("starting vacuum..."):
            # pgbench prints "end." once VACUUM and TRUNCATE are done, and ignores their errors.
            self._in_vacuum = not stripped.endswith("end.")
            stripped = stripped[len("starting vacuum...") :]
        elif self._in_vacuum and stripped.endswith("end."):
            self._in_vacuum = False
            stripped = stripped[: -len("end.")]
        error = parse_error_line(stripped)
        if error is None:
            return None
        if self._in_vacuum and error.kind in FATAL_KINDS:
            error = replace(error, kind=IGNORED)
        if error.kind == RUN_ABORTED:
            self.run_aborted = True
        if error.kind == CLIENT_ABORTED and error.client_id is not None:
            self.aborted_clients.add(error.client_id)
        self.errors.append(error)
        return error


def parse_stderr(text: str, shape: ProgressShape | None = None) -> list[StderrEvent]:
    """Parse a whole stderr capture; see :class:`StderrParser`."""
    parser = StderrParser(shape)
    events = (parser.feed(line) for line in text.splitlines())
    return [event for event in events if event is not None]


SUCCEEDED = "succeeded"
FAILED = "failed"
COMPLETED_WITH_ERRORS = "completed_with_errors"


def _first(errors: list[ErrorLine], kinds: set[str] | frozenset[str]) -> ErrorLine | None:
    return next((error for error in errors if error.kind in kinds), None)


def classify_exit(returncode: int, summary: Summary | None, errors: list[ErrorLine]) -> tuple[str, str]:
    """Map pgbench's exit to ``(status, reason)``: 0 ran, 1 could not start, 2 some clients aborted."""
    if returncode == 0:
        if summary is None:
            return FAILED, "pgbench exited without printing a summary"
        return SUCCEEDED, ""
    if returncode == 1:
        first = _first(errors, {CONNECTION_FAILED}) or _first(errors, FATAL_KINDS)
        return FAILED, f"could not start: {first.message if first else 'pgbench exited with code 1'}"
    if returncode == 2:
        aborted = {error.client_id for error in errors if error.kind == CLIENT_ABORTED}
        first_abort = _first(errors, {CLIENT_ABORTED})
        clients = summary.clients if summary and summary.clients else None
        count = f"{len(aborted)} of {clients}" if clients else str(len(aborted))
        noun = "client" if len(aborted) == 1 and not clients else "clients"
        reason = f"{count} {noun} aborted"
        if first_abort is not None:
            message = first_abort.message
            refused = _first(errors, {CONNECTION_FAILED})
            if message.startswith("aborted while establishing connection") and refused is not None:
                message = f"{message}: {refused.message}"
            reason = f"{reason}: {message}"
        if summary is None:
            reason = f"{reason} (no summary)"
        return COMPLETED_WITH_ERRORS, reason
    if returncode < 0:
        return FAILED, f"pgbench was stopped by signal {-returncode}"
    first = _first(errors, FATAL_KINDS)
    suffix = f": {first.message}" if first else ""
    return FAILED, f"pgbench exited with code {returncode}{suffix}"
