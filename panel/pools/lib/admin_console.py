"""Parsers for PgBouncer admin console results and log lines (pure, no Django).

The console speaks only the simple query protocol: callers use psycopg 3 with ``ClientCursor``
and pass ``[col.name for col in cur.description]`` and ``cur.fetchall()`` here. Columns are read by
name because their set changes between PgBouncer versions; unknown columns are ignored and missing
optional ones become ``None``. Values may arrive as ints (psycopg) or text (psql captures).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from panel.pools.lib.pgbouncer_ini import ADMIN_DATABASE, PoolSpec, ServerTarget

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Rows = Sequence[Sequence[Any]]
R = TypeVar("R", bound="DataclassInstance")


class AdminConsoleError(ValueError):
    """A result that cannot be what the SHOW command returns (a required column is missing)."""


@dataclass(frozen=True)
class DatabaseRow:
    """One row of ``SHOW DATABASES``; ``pool_mode`` is None when the database uses the default."""

    name: str
    host: str | None
    port: int | None
    database: str | None
    force_user: str | None
    pool_size: int | None
    pool_mode: str | None
    max_connections: int | None
    current_connections: int | None
    paused: bool | None
    disabled: bool | None


@dataclass(frozen=True)
class PoolRow:
    """One row of ``SHOW POOLS``: a (database, user) pair; ``maxwait`` in seconds."""

    database: str
    user: str
    cl_active: int | None
    cl_waiting: int | None
    cl_cancel_req: int | None
    sv_active: int | None
    sv_idle: int | None
    sv_used: int | None
    sv_tested: int | None
    sv_login: int | None
    maxwait: float | None
    pool_mode: str | None


@dataclass(frozen=True)
class StatsRow:
    """One row of ``SHOW STATS``: totals since start and averages over the last stats period.

    Times are microseconds; ``avg_*_count`` are per second.
    """

    database: str
    total_xact_count: int | None
    total_query_count: int | None
    total_received: int | None
    total_sent: int | None
    total_xact_time: int | None
    total_query_time: int | None
    total_wait_time: int | None
    avg_xact_count: int | None
    avg_query_count: int | None
    avg_recv: int | None
    avg_sent: int | None
    avg_xact_time: int | None
    avg_query_time: int | None
    avg_wait_time: int | None


@dataclass(frozen=True)
class ClientRow:
    """One row of ``SHOW CLIENTS``: enough to count who is connected to which pool."""

    user: str
    database: str
    state: str | None
    addr: str | None
    port: int | None
    application_name: str | None


# --- value conversion --------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if text != "" else None


def _int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError as exc:
        raise AdminConsoleError(f"Expected a number, got {value!r}.") from exc


def _bool(value: Any) -> bool | None:
    number = _int(value)
    return None if number is None else number != 0


def _records(column_names: Sequence[str], rows: Rows, required: Sequence[str]) -> list[dict[str, Any]]:
    names = [name.lower() for name in column_names]
    missing = [name for name in required if name not in names]
    if missing:
        raise AdminConsoleError(
            f"The result has no {', '.join(missing)} column (columns: {', '.join(names)})."
        )
    records = []
    for row in rows:
        if len(row) != len(names):
            raise AdminConsoleError(f"A row has {len(row)} values for {len(names)} columns: {row!r}.")
        records.append(dict(zip(names, row, strict=True)))
    return records


def _required_text(record: Mapping[str, Any], key: str) -> str:
    value = record[key]
    return "" if value is None else str(value)


# --- SHOW parsers ------------------------------------------------------------------------------

# A field's type says how its column is read; a plain ``str`` names a column every row has.
_READERS: dict[str, Callable[[Any], Any]] = {"str | None": _text, "int | None": _int, "bool | None": _bool}


def _read(record: Mapping[str, Any], field: dataclasses.Field[Any]) -> Any:
    if field.type == "str":
        return _required_text(record, field.name)
    return _READERS[str(field.type)](record.get(field.name))


def _parse(
    row_type: type[R], column_names: Sequence[str], rows: Rows, **derived: Callable[[Mapping[str, Any]], Any]
) -> list[R]:
    """The rows as ``row_type``, each field read from the column of its name (see ``_READERS``);
    ``derived`` makes the fields that combine columns."""
    read = [field for field in dataclasses.fields(row_type) if field.name not in derived]
    required = [field.name for field in read if field.type == "str"]
    return [
        row_type(
            **{field.name: _read(r, field) for field in read},
            **{name: derive(r) for name, derive in derived.items()},
        )
        for r in _records(column_names, rows, required)
    ]


def parse_show_databases(column_names: Sequence[str], rows: Rows) -> list[DatabaseRow]:
    return _parse(DatabaseRow, column_names, rows)


def _maxwait(record: Mapping[str, Any]) -> float | None:
    seconds = _int(record.get("maxwait"))
    micros = _int(record.get("maxwait_us"))
    if seconds is None and micros is None:
        return None
    return (seconds or 0) + (micros or 0) / 1_000_000


def _cancel_requests(record: Mapping[str, Any]) -> int | None:
    # 1.18 splits cancel requests into active/waiting; older versions had one column.
    parts = [_int(record.get(key)) for key in ("cl_active_cancel_req", "cl_waiting_cancel_req")]
    known = [part for part in parts if part is not None]
    return sum(known) if known else _int(record.get("cl_cancel_req"))


def parse_show_pools(column_names: Sequence[str], rows: Rows) -> list[PoolRow]:
    return _parse(PoolRow, column_names, rows, cl_cancel_req=_cancel_requests, maxwait=_maxwait)


def parse_show_stats(column_names: Sequence[str], rows: Rows) -> list[StatsRow]:
    return _parse(StatsRow, column_names, rows)


def parse_show_clients(column_names: Sequence[str], rows: Rows) -> list[ClientRow]:
    return _parse(ClientRow, column_names, rows)


@dataclass(frozen=True)
class PoolTotals:
    """``SHOW POOLS`` of one pool summed over its rows (an inbound-user pool has one per role)."""

    cl_active: int = 0
    cl_waiting: int = 0
    sv_active: int = 0
    sv_idle: int = 0
    sv_used: int = 0
    sv_tested: int = 0
    sv_login: int = 0
    maxwait: float = 0.0  # the longest wait of any of its rows, seconds

    @property
    def servers_active(self) -> int:
        """Server connections in use, logging in included."""
        return self.sv_active + self.sv_login

    @property
    def servers_idle(self) -> int:
        """Server connections held without a client: sv_used (idle longer than server_check_delay)
        and sv_tested (being checked before reuse) hold a slot on the server like sv_idle."""
        return self.sv_idle + self.sv_used + self.sv_tested


_SUMMED = ("cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")


def pool_totals(rows: Sequence[PoolRow]) -> dict[str, PoolTotals]:
    """``SHOW POOLS`` summed per pool name (the admin console's own row included, if present)."""
    sums: dict[str, dict[str, Any]] = {}
    for row in rows:
        s = sums.setdefault(row.database, dict.fromkeys(_SUMMED, 0) | {"maxwait": 0.0})
        for key in _SUMMED:
            s[key] += getattr(row, key) or 0
        s["maxwait"] = max(s["maxwait"], row.maxwait or 0.0)
    return {name: PoolTotals(**s) for name, s in sums.items()}


def clients_by_state(clients: Sequence[ClientRow], database: str) -> dict[str, int]:
    """``{"active": 20, "waiting": 20}`` for one pool: who a removal would disconnect."""
    return dict(Counter(c.state or "unknown" for c in clients if c.database == database))


# --- intended vs loaded ------------------------------------------------------------------------


def diff_databases(
    intended: Sequence[PoolSpec],
    loaded: Sequence[DatabaseRow],
    *,
    target: ServerTarget | None = None,
    default_mode: str = "session",
) -> list[str]:
    """What PgBouncer serves that differs from what the panel meant, one sentence per mismatch.

    RELOAD reports success even for a file it loaded only in part, so this is the real check.
    ``default_mode`` is what an empty ``pool_mode`` means (PgBouncer's built-in default).
    """
    by_name = {row.name: row for row in loaded if row.name != ADMIN_DATABASE}
    problems = []
    for pool in sorted(intended, key=lambda p: p.name):
        row = by_name.pop(pool.name, None)
        if row is None:
            problems.append(f"Pool {pool.name!r} is missing from PgBouncer.")
            continue
        if row.database != pool.dbname:
            problems.append(
                f"Pool {pool.name!r} points at database {row.database!r} instead of {pool.dbname!r}."
            )
        if row.force_user != pool.user:
            want = "the inbound user" if pool.user is None else repr(pool.user)
            have = "the inbound user" if row.force_user is None else repr(row.force_user)
            problems.append(f"Pool {pool.name!r} logs in as {have} instead of {want}.")
        if row.pool_size != pool.size:
            problems.append(f"Pool {pool.name!r} has size {row.pool_size} instead of {pool.size}.")
        mode = row.pool_mode or default_mode
        if mode != pool.mode:
            problems.append(f"Pool {pool.name!r} is in {mode} mode instead of {pool.mode}.")
        cap = pool.size if pool.user is None else 0
        if row.max_connections is not None and row.max_connections != cap:
            problems.append(
                f"Pool {pool.name!r} allows {row.max_connections} server connections in all instead of {cap}."
            )
        if target is not None and (row.host, row.port) != (target.host, target.port):
            problems.append(
                f"Pool {pool.name!r} connects to {row.host}:{row.port} instead of {target.host}:{target.port}."
            )
    for name in sorted(by_name):
        problems.append(f"PgBouncer still serves pool {name!r}, which should not exist.")
    return problems


def quote_ident(name: str) -> str:
    """Quote a pool name for ``PAUSE``/``KILL``/``RESUME`` (``KILL test-pool`` is a syntax error)."""
    return '"' + name.replace('"', '""') + '"'


# --- log ---------------------------------------------------------------------------------------

_LOG_LINE_RE = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?(?: \S+)?) \[(?P<pid>\d+)\] "
    r"(?P<level>[A-Z]+) (?P<message>.*)$"
)
_PROBLEM_LEVELS = frozenset({"WARNING", "ERROR", "FATAL"})


def parse_log_errors(log_text: str, since_offset: int = 0) -> list[str]:
    """The WARNING, ERROR and FATAL lines of ``pgbouncer.log`` from ``since_offset`` (characters).

    A caller notes the log's length before RELOAD and passes it here afterwards; a line cut by the
    offset does not start with a timestamp and is skipped.
    """
    problems = []
    for line in log_text[since_offset:].splitlines():
        match = _LOG_LINE_RE.match(line.strip())
        if match and match.group("level") in _PROBLEM_LEVELS:
            problems.append(line.strip())
    return problems


# --- psql text tables (golden tests) -----------------------------------------------------------


def parse_table_text(text: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """Columns and rows of a psql table: aligned (header, dashes, ``(N rows)``) or ``-A`` with ``|``.

    Values stay text; an empty cell is ``""``, as the parsers above accept.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise AdminConsoleError("No table in the text.")
    aligned = len(lines) > 1 and re.fullmatch(r"-+(\+-+)*", lines[1].strip()) is not None
    columns = [cell.strip() for cell in lines[0].split("|")]
    rows = []
    for line in lines[2:] if aligned else lines[1:]:
        if re.fullmatch(r"\(\d+ rows?\)", line.strip()):
            continue
        cells = line.split("|")
        if aligned:
            cells = [cell.strip() for cell in cells]
        if len(cells) != len(columns):
            raise AdminConsoleError(f"A row has {len(cells)} cells for {len(columns)} columns: {line!r}.")
        rows.append(tuple(cells))
    return columns, rows
