"""Log records as a sink receives them (pure, no Django): syslog lines in RFC 5424, RFC 3164 or a
custom template (rsyslog's property names), framed by octet counting (RFC 6587), and
Elasticsearch/OpenSearch ``_bulk`` bodies.

A tenant writes what its records say (``RAISE WARNING E'x\nSET k v'``), so no control character
of a record reaches the wire as itself: every one is written as rsyslog writes those it receives
(``#012`` for a line feed). Framing alone would not do: a receiver that reads lines (or a service
that is no syslog server at all) would take the rest of the line as a message, or a command, of
its own.

The host name of every record is the cluster's name, the application ``postgresql`` or
``pgbouncer``: a sink that receives several clusters tells them apart.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

FACILITY_LOCAL0 = 16
# PostgreSQL's and PgBouncer's levels as syslog severities.
SEVERITIES = {
    "PANIC": 0, "FATAL": 2, "ERROR": 3, "WARNING": 4, "NOTICE": 5, "INFO": 6, "LOG": 6,
    "STATEMENT": 6, "DETAIL": 6, "HINT": 6, "CONTEXT": 6, "DEBUG": 7, "NOISE": 7,
}  # fmt: skip
_STAMP_RE = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d)[ T](?P<time>\d\d:\d\d:\d\d)(?P<frac>\.\d+)?\s*(?P<zone>UTC|GMT|Z|[+-]\d\d:?\d\d)?"
)
_PROPERTY_RE = re.compile(r"%([A-Za-z-]+)(:::[a-z0-9-]+)?%")
PROPERTIES = (
    "pri",
    "timestamp",
    "hostname",
    "app-name",
    "procid",
    "msgid",
    "msg",
    "structured-data",
    "syslogseverity-text",
)
_SD_ESCAPE = str.maketrans({"\n": " ", "\r": " "})


@dataclass(frozen=True)
class Record:
    """One log entry of one cluster, ready to send."""

    timestamp: str  # as the log wrote it
    host: str  # the cluster's name
    app: str  # postgresql, pgbouncer
    pid: str
    level: str
    user: str
    database: str
    message: str  # every line of the entry, without the prefixes

    @property
    def severity(self) -> int:
        return SEVERITIES.get(self.level.upper().rstrip("12345"), 6)

    @property
    def pri(self) -> int:
        return FACILITY_LOCAL0 * 8 + self.severity


def instant(stamp: str) -> dt.datetime | None:
    """The log's timestamp as an aware datetime (UTC unless it says otherwise); None if unreadable."""
    match = _STAMP_RE.match(stamp.strip())
    if match is None:
        return None
    frac = (match.group("frac") or "")[:7]
    zone = match.group("zone") or "UTC"
    offset = "+00:00" if zone in ("UTC", "GMT", "Z") else zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    try:
        return dt.datetime.fromisoformat(f"{match.group('date')}T{match.group('time')}{frac}{offset}")
    except ValueError:
        return None


def _rfc3339(record: Record) -> str:
    moment = instant(record.timestamp)
    if moment is None:
        return "-"
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _token(value: str, limit: int) -> str:
    """An RFC 5424 header field: printable ASCII without spaces, or ``-``."""
    cleaned = "".join(ch for ch in value if 33 <= ord(ch) <= 126)[:limit]
    return cleaned or "-"


def rfc5424(record: Record, sd: str | None = None) -> str:
    header = f"<{record.pri}>1 {_rfc3339(record)} {_token(record.host, 255)} {_token(record.app, 48)}"
    return f"{header} {_token(record.pid, 128)} {_token(record.level, 32)} {sd or '-'} {record.message}"


def rfc3164(record: Record) -> str:
    moment = instant(record.timestamp) or dt.datetime.now(dt.UTC)
    moment = moment.astimezone(dt.UTC)
    stamp = f"{moment:%b} {moment.day:2d} {moment:%H:%M:%S}"
    tag = f"{_token(record.app, 32)}[{_token(record.pid, 10)}]"
    return f"<{record.pri}>{stamp} {_token(record.host, 255)} {tag}: {record.message}"


def unknown_properties(template: str) -> list[str]:
    """The ``%property%`` names of a custom template the panel does not fill in."""
    return [name for name, _opt in _PROPERTY_RE.findall(template) if name.lower() not in PROPERTIES]


def custom(record: Record, template: str, sd: str | None = None) -> str:
    values = {
        "pri": str(record.pri),
        "timestamp": _rfc3339(record),
        "hostname": _token(record.host, 255),
        "app-name": _token(record.app, 48),
        "procid": _token(record.pid, 128),
        "msgid": _token(record.level, 32),
        "msg": record.message,
        "structured-data": (sd or "-").translate(_SD_ESCAPE),
        "syslogseverity-text": record.level.lower(),
    }
    return _PROPERTY_RE.sub(lambda m: values.get(m.group(1).lower(), ""), template)


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character (line breaks above all) as ``#`` and its three
    octal digits, as rsyslog's EscapeControlCharactersOnReceive writes them."""
    return _CONTROL_RE.sub(lambda m: f"#{ord(m.group()):03o}", text)


def syslog_line(record: Record, fmt: str, *, logline: str | None = None, sd: str | None = None) -> str:
    """The record as one line in ``fmt``: no control character left in it."""
    if fmt == "rfc3164":
        line = rfc3164(record)
    elif fmt == "custom":
        line = custom(record, logline or "", sd)
    else:
        line = rfc5424(record, sd)
    return escape_controls(line)


def octet_frame(message: str) -> bytes:
    """RFC 6587 octet counting: ``LEN SP MSG``."""
    data = message.encode("utf-8", errors="replace")
    return f"{len(data)} ".encode() + data


def document(record: Record) -> dict[str, object]:
    moment = instant(record.timestamp)
    return {
        "@timestamp": _rfc3339(record) if moment else None,
        "cluster": record.host,
        "source": record.app,
        "level": record.level,
        "pid": record.pid,
        "user": record.user or None,
        "database": record.database or None,
        "message": record.message,
    }


def index_name(prefix: str, record: Record, today: dt.date) -> str:
    """``prefix-YYYY.MM.DD`` of the record's day (today's when the log's stamp is unreadable)."""
    moment = instant(record.timestamp)
    day = moment.astimezone(dt.UTC).date() if moment else today
    return f"{prefix}-{day:%Y.%m.%d}"


def bulk_body(records: Iterable[Record], prefix: str, today: dt.date) -> bytes:
    """An Elasticsearch/OpenSearch ``_bulk`` request body (NDJSON, ending in a newline)."""
    lines = []
    for record in records:
        lines.append(json.dumps({"index": {"_index": index_name(prefix, record, today)}}))
        lines.append(json.dumps(document(record), ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode("utf-8")


def expired_indices(names: Iterable[str], prefix: str, today: dt.date, days_max: int) -> list[str]:
    """The daily indices ``prefix-YYYY.MM.DD`` older than ``days_max`` days (others untouched)."""
    found = []
    for name in names:
        match = re.fullmatch(re.escape(prefix) + r"-(\d{4})\.(\d\d)\.(\d\d)", name)
        if match is None:
            continue
        try:
            day = dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        except ValueError:
            continue
        if (today - day).days > days_max:
            found.append(name)
    return sorted(found)
