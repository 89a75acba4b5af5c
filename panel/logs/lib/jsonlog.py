"""PostgreSQL 15's ``jsonlog`` (``log_destination = 'stderr,jsonlog'``): one JSON object per line,
parsed as a structured record into the same ``LogEntry`` the text log gives (pure, no Django).

The text log's prefix (``%m [%p] %q%u@%d``) can be forged: a database or role name may hold a line
break followed by a made-up prefix, so a panel session's line could be read as a tenant's (issue
29). In a JSON record every string is escaped, one record is one line, and who wrote it is a field
(``user``, ``dbname``, ``backend_type``): hiding the panel's sessions reads those, never text.

A record as PostgreSQL 15 writes it (fields that are empty are left out)::

    {"timestamp":"2026-11-27 16:30:00.123 UTC","user":"doadmin","dbname":"defaultdb","pid":4242,
     "remote_host":"127.0.0.1","session_id":"…","line_num":2,"ps":"SELECT","error_severity":"ERROR",
     "state_code":"22012","message":"division by zero","statement":"SELECT 1/0",
     "application_name":"psql","backend_type":"client backend","query_id":0}

The entry's ``lines`` are the record written out as the text log would show it (the download,
``manage.py logs``, the search), with every name's control characters escaped (``\\n``), so no
line of one entry can pass for another's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from panel.logs.lib.logfile import Chunk, LogEntry, lines_of

# The parts of a record shown after its message, in PostgreSQL's own order, with their level.
FOLLOWING = (
    ("detail", "DETAIL"),
    ("hint", "HINT"),
    ("internal_query", "QUERY"),
    ("context", "CONTEXT"),
    ("statement", "STATEMENT"),
)


def escaped(text: str) -> str:
    """``text`` with every unprintable character written as Python would (``\\n``, ``\\x1b``)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    return value if isinstance(value, str) else "" if value is None else str(value)


def _block(prefix: str, level: str, text: str) -> list[str]:
    """``PREFIX LEVEL:  first line`` and the other lines after a tab, as PostgreSQL's text log."""
    first, *more = text.split("\n")
    return [f"{prefix}{level}:  {first}", *(f"\t{line}" for line in more)]


def entry_of(record: dict[str, Any], file: str, offset: int) -> LogEntry | None:
    """The entry of one record, or None when it is not one PostgreSQL wrote."""
    severity = _text(record, "error_severity")
    timestamp = _text(record, "timestamp")
    if not severity or not timestamp or "message" not in record:
        return None
    level = "DEBUG" if severity.startswith("DEBUG") else severity
    user, database = escaped(_text(record, "user")), escaped(_text(record, "dbname"))
    pid = escaped(_text(record, "pid"))
    # %q: a process that is no session (checkpointer, postmaster) shows no user@database.
    who = f"{user}@{database} " if user or database else ""
    prefix = f"{escaped(timestamp)} [{pid}] {who}"
    entry = LogEntry(
        file,
        offset,
        escaped(timestamp),
        pid,
        level,
        user,
        database,
        prefix=prefix,
        sqlstate=escaped(_text(record, "state_code")),
        backend_type=escaped(_text(record, "backend_type")),
    )
    entry.lines += _block(prefix, level, _text(record, "message"))
    entry.levels.append(level)
    for key, name in FOLLOWING:
        if _text(record, key):
            entry.lines += _block(prefix, name, _text(record, key))
            entry.levels.append(name)
    return entry


def parse(chunks: Sequence[Chunk]) -> list[LogEntry]:
    """The entries of ``chunks``, one per record; a line that is no record (cut by where a read
    started, or not JSON) is left out."""
    entries: list[LogEntry] = []
    for chunk in chunks:
        for offset, line in lines_of(chunk):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                entry = entry_of(record, chunk.file, offset)
                if entry is not None:
                    entries.append(entry)
    return entries
