"""PostgreSQL's and PgBouncer's log files: read from the end within a cap, split into entries,
the panel's own lines hidden, secrets redacted, filtered (pure, no Django).

PostgreSQL writes with the panel's ``log_line_prefix = '%m [%p] %q%u@%d '``::

    2026-11-25 18:00:00.123 UTC [4242] doadmin@defaultdb ERROR:  division by zero
    2026-11-25 18:00:00.123 UTC [4242] doadmin@defaultdb STATEMENT:  SELECT 1/0
    2026-11-25 18:00:01.000 UTC [4100] LOG:  checkpoint starting: time

A message of several lines continues on lines that start with a tab; DETAIL, HINT, QUERY,
CONTEXT, LOCATION and STATEMENT lines of the same process belong to the message before them.
PgBouncer writes one line per message::

    2026-11-25 18:00:00.123 UTC [77] LOG C-0x55d0c8: defaultdb/doadmin@127.0.0.1:5000 login attempt: ...

A read never holds more than its cap in memory: it starts that many bytes before the end of the
newest file and goes on into the rotated ones (``postgresql.log.1``…) only while the cap allows.
Lines cut by where a read starts (a continuation whose first line was not read) are dropped, so
that no part of a hidden entry can show on its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

POSTGRES = "postgres"
PGBOUNCER = "pgbouncer"

# The levels a filter offers, most severe first.
POSTGRES_LEVELS = ("PANIC", "FATAL", "ERROR", "WARNING", "NOTICE", "INFO", "LOG", "DEBUG", "STATEMENT", "DETAIL", "HINT", "CONTEXT")  # fmt: skip
PGBOUNCER_LEVELS = ("FATAL", "ERROR", "WARNING", "LOG", "DEBUG")
# Lines that add to the message before them (same process) rather than start one.
FOLLOWING_LEVELS = frozenset({"DETAIL", "HINT", "QUERY", "CONTEXT", "LOCATION", "STATEMENT"})

_PG_LEVEL = (
    r"PANIC|FATAL|ERROR|WARNING|NOTICE|INFO|LOG|DEBUG[1-5]?|DETAIL|HINT|QUERY|CONTEXT|LOCATION|STATEMENT"
)
_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [A-Za-z0-9+:-]+"
_PG_LINE_RE = re.compile(
    rf"^(?P<ts>{_STAMP}) \[(?P<pid>\d+)\] (?P<who>.*?)(?P<level>{_PG_LEVEL}):  (?P<message>.*)$"
)
_BOUNCER_LINE_RE = re.compile(
    rf"^(?P<ts>{_STAMP}) \[(?P<pid>\d+)\] (?P<level>FATAL|ERROR|WARNING|LOG|DEBUG|NOISE) (?P<message>.*)$"
)
# The start of a line whose level never came (see ``_take``).
_PG_CUT_PREFIX_RE = re.compile(rf"^(?P<ts>{_STAMP}) \[(?P<pid>\d+)\] (?P<who>[^\t]*@.*)$")
# ``C-0x55d0c8: defaultdb/doadmin@127.0.0.1:5000 …``: a client's (C) or server's (S) connection.
_BOUNCER_WHO_RE = re.compile(r"^[CS]-0x[0-9a-f]+: (?P<database>[^/\s]*)/(?P<user>[^@\s]*)@")

REDACTED = "[redacted]"
# Literals after PASSWORD (CREATE/ALTER ROLE … [ENCRYPTED] PASSWORD '…'), plain, E'…' or
# dollar-quoted, even when the literal runs over several lines or is cut at the end. A backslash
# escapes the next character in any literal: in a standard one that may redact a little more
# than the literal, never less.
_PASSWORD_LITERAL_RE = re.compile(
    r"(?P<head>\bPASSWORD\s*)(?:[EU]&?)?(?:'(?:[^'\\]|\\.|'')*(?:'|$)|(?P<tag>\$[A-Za-z_0-9]*\$).*?(?:(?P=tag)|$))",
    re.IGNORECASE | re.DOTALL,
)
# ``password=…`` in a connection string (dblink, CREATE SUBSCRIPTION, postgres_fdw options).
_CONNINFO_PASSWORD_RE = re.compile(
    r"(?P<head>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s'\"]+)", re.IGNORECASE
)
# Stored secrets themselves: SCRAM verifiers and MD5 hashes, wherever they appear.
_STORED_SECRET_RE = re.compile(r"SCRAM-SHA-256\$[^\s'\"]+|\bmd5[0-9a-f]{32}\b")
# A known secret shorter than this is not searched for (it would redact ordinary words).
MIN_SECRET_LENGTH = 8


@dataclass
class LogEntry:
    """One message: its first line's fields, and every line of it (continuations included). The
    entry every reader of a log works with (the Logs tab, ``manage.py logs``, forwarding)."""

    file: str
    offset: int  # where its first line starts in ``file`` (bytes)
    timestamp: str
    pid: str
    level: str
    user: str
    database: str
    lines: list[str] = field(default_factory=list)
    # The level of each prefixed line (ERROR, then STATEMENT…): a filter matches any of them.
    levels: list[str] = field(default_factory=list)
    # From a structured record (lib/jsonlog.py): the prefix its lines were written with, its
    # SQLSTATE and the kind of process that wrote it ("client backend", "checkpointer").
    prefix: str = ""
    sqlstate: str = ""
    backend_type: str = ""

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def message(self) -> str:
        """The first line without its prefix."""
        first = self.lines[0] if self.lines else ""
        if self.prefix:
            return first.removeprefix(self.prefix).removeprefix(f"{self.level}:  ")
        match = _PG_LINE_RE.match(first) or _BOUNCER_LINE_RE.match(first)
        return match.group("message") if match else first

    @property
    def details(self) -> list[str]:
        """The lines after the first, without their prefix (``STATEMENT:  SELECT 1/0``)."""
        if self.prefix:
            return [line.removeprefix(self.prefix) for line in self.lines[1:]]
        shown = []
        for line in self.lines[1:]:
            match = _PG_LINE_RE.match(line)
            shown.append(f"{match.group('level')}:  {match.group('message')}" if match else line)
        return shown


@dataclass(frozen=True)
class Chunk:
    """Whole lines read from one file: the bytes and where they start."""

    file: str
    start: int
    data: bytes


# --- parsing -----------------------------------------------------------------------------------


def lines_of(chunk: Chunk) -> Iterable[tuple[int, str]]:
    """(offset, text) of each line of the chunk."""
    offset = chunk.start
    for raw in chunk.data.split(b"\n"):
        if raw:
            yield offset, raw.decode("utf-8", errors="replace").rstrip("\r")
        offset += len(raw) + 1


def _who(text: str) -> tuple[str, str]:
    """(user, database) from the ``%q%u@%d `` part of a PostgreSQL line (empty for a background
    process). A name may hold ``@`` or spaces; the user is taken up to the first ``@``."""
    text = text[:-1] if text.endswith(" ") else text
    user, _sep, database = text.partition("@")
    return user, database


def parse(chunks: Sequence[Chunk], kind: str) -> list[LogEntry]:
    """The entries of ``chunks`` (oldest first within each chunk, chunks as given)."""
    entries: list[LogEntry] = []
    for chunk in chunks:
        current: LogEntry | None = None
        for offset, line in lines_of(chunk):
            entry, current = _take(line, offset, chunk.file, kind, current)
            if entry is not None:
                entries.append(entry)
    return entries


def _take(
    line: str, offset: int, file: str, kind: str, current: LogEntry | None
) -> tuple[LogEntry | None, LogEntry | None]:
    """A new entry to append (or None when ``line`` joined ``current``), and the current one."""
    if kind == POSTGRES:
        match = _PG_LINE_RE.match(line)
        if match:
            level = match.group("level")
            level = "DEBUG" if level.startswith("DEBUG") else level
            user, database = _who(match.group("who"))
            if current is not None and level in FOLLOWING_LEVELS and match.group("pid") == current.pid:
                current.lines.append(line)
                current.levels.append(level)
                # A line of another user in the same process (SET ROLE cannot, but a reconnect
                # with a reused pid can) marks the entry with it too: hiding looks at every line.
                if user and user != current.user:
                    current.user = f"{current.user}\n{user}"
                return None, current
            entry = LogEntry(file, offset, match.group("ts"), match.group("pid"), level, user, database)
            entry.lines.append(line)
            entry.levels.append(level)
            return entry, entry
        cut = _PG_CUT_PREFIX_RE.match(line)
        if cut:
            # A prefix cut by a line break in a user or database name (a quoted name may hold
            # one): its own entry, whose user is what precedes the first "@", so that a panel
            # session's line is hidden with what follows it rather than joined to the line before.
            user, database = _who(cut.group("who"))
            entry = LogEntry(
                file, offset, cut.group("ts"), cut.group("pid"), "LOG", user, database, [line], ["LOG"]
            )
            return entry, entry
    else:
        match = _BOUNCER_LINE_RE.match(line)
        if match:
            who = _BOUNCER_WHO_RE.match(match.group("message"))
            user, database = (who.group("user"), who.group("database")) if who else ("", "")
            entry = LogEntry(
                file, offset, match.group("ts"), match.group("pid"), match.group("level"), user, database
            )
            entry.lines.append(line)
            entry.levels.append(entry.level)
            return entry, entry
    if current is None:
        # A continuation whose first line was not read: dropped (see the module's docstring).
        return None, None
    current.lines.append(line)
    return None, current


# --- what a tenant may see ---------------------------------------------------------------------


def hidden(entry: LogEntry, roles: Iterable[str]) -> bool:
    """Whether any line of the entry is a session of one of the panel's own ``roles``."""
    users = set(entry.user.split("\n"))
    return any(role in users for role in roles)


def redact(text: str, secrets: Iterable[str] = (), paths: Iterable[str] = ()) -> str:
    """``text`` with password literals, stored secrets and the given ``secrets`` replaced, and
    the server's own directories (``paths``) shortened to ``…``."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for path in sorted({p.rstrip("/") for p in paths if len(p.rstrip("/")) > 1}, key=len, reverse=True):
        text = text.replace(path, "…")
    text = _PASSWORD_LITERAL_RE.sub(lambda m: f"{m.group('head')}'{REDACTED}'", text)
    text = _CONNINFO_PASSWORD_RE.sub(lambda m: f"{m.group('head')}{REDACTED}", text)
    return _STORED_SECRET_RE.sub(REDACTED, text)


def _cleaned(entry: LogEntry, secrets: Sequence[str], paths: Sequence[str]) -> LogEntry:
    entry.lines = redact(entry.text, secrets, paths).split("\n")
    entry.user = entry.user.split("\n")[0]
    return entry


def shown(
    entries: Iterable[LogEntry], roles: Iterable[str], secrets: Iterable[str] = (), paths: Iterable[str] = ()
) -> list[LogEntry]:
    """The entries a tenant may see: the panel's own sessions left out, secrets redacted, the
    server's directories shortened."""
    roles, secrets, paths = tuple(roles), tuple(secrets), tuple(paths)
    return [_cleaned(entry, secrets, paths) for entry in entries if not hidden(entry, roles)]


def newest(
    entries: Sequence[LogEntry],
    limit: int,
    *,
    roles: Iterable[str],
    secrets: Iterable[str] = (),
    paths: Iterable[str] = (),
    level: str = "",
    search: str = "",
) -> tuple[list[LogEntry], bool]:
    """The newest ``limit`` entries a tenant may see that match, newest first, and whether more
    matched. ``shown`` then ``matches``, newest first, redacting only what it looks at (a read
    holds tens of thousands of entries; a page shows a few hundred)."""
    roles, secrets, paths = tuple(roles), tuple(secrets), tuple(paths)
    found: list[LogEntry] = []
    for entry in reversed(entries):
        # The level is no secret: checked before the redaction it spares.
        if hidden(entry, roles) or not matches(entry, level):
            continue
        if matches(_cleaned(entry, secrets, paths), search=search):
            if len(found) == limit:
                return found, True
            found.append(entry)
    return found, False


def matches(entry: LogEntry, level: str = "", search: str = "") -> bool:
    """``level``: the entry or one of its lines is at that level; ``search``: the text holds it
    (case-insensitive). Call it on redacted entries, so a search cannot probe a hidden secret."""
    if level and level.upper() not in entry.levels:
        return False
    return not search or search.casefold() in entry.text.casefold()


# --- reading within a cap ----------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """The end of what was read from the newest file: a later read starts there (the live tail).
    A file with another inode, or shorter than ``offset``, was rotated or truncated meanwhile;
    ``NOTHING_READ`` stands for a file that did not exist yet."""

    inode: int
    offset: int

    def __str__(self) -> str:
        return f"{self.inode}:{self.offset}"

    @classmethod
    def parse(cls, text: str) -> Position | None:
        inode, sep, offset = (text or "").partition(":")
        if not (sep and inode.isdigit() and offset.isdigit()):
            return None
        return cls(int(inode), int(offset))


NOTHING_READ = "0:0"


@dataclass(frozen=True)
class Read:
    """What a read returns: whole lines newest file last, where it ended, and whether older
    lines (before the cap) were left unread."""

    chunks: tuple[Chunk, ...]
    end: Position | None
    older_not_read: bool
    bytes_read: int
    files: tuple[str, ...]


def log_files(current: Path) -> list[Path]:
    """The log file and its rotated copies (``NAME.1``, ``NAME.2``…), newest first."""
    found = [current] if current.exists() else []
    rotated = []
    for path in current.parent.glob(current.name + ".*"):
        suffix = path.name[len(current.name) + 1 :]
        if suffix.isdigit():
            rotated.append((int(suffix), path))
    return found + [path for _n, path in sorted(rotated)]


def _read_range(fh: BinaryIO, start: int, end: int) -> bytes:
    fh.seek(start)
    return fh.read(end - start)


def _whole_lines(data: bytes, start: int, *, cut_head: bool) -> tuple[bytes, int]:
    """``data`` from its first line start (when it may begin mid-line) to its last newline."""
    if cut_head:
        first = data.find(b"\n")
        if first < 0:
            return b"", start
        data, start = data[first + 1 :], start + first + 1
    last = data.rfind(b"\n")
    return (data[: last + 1], start) if last >= 0 else (b"", start)


def read_tail(current: Path, cap: int, after: Position | None = None) -> Read:
    """The last ``cap`` bytes (at most) of the log, in whole lines; with ``after``, only what the
    newest file gained since that position (its last ``cap`` bytes if it gained more), or all of
    it when it is another file than the one ``after`` was in."""
    files = log_files(current)
    names = tuple(path.name for path in files)
    if not files or files[0] != current:
        return Read((), None, False, 0, names)
    chunks: list[Chunk] = []
    budget = cap
    older_not_read = False
    with open(current, "rb") as fh:
        stat = os.fstat(fh.fileno())
        size = stat.st_size
        if after is not None:
            # Another file than the cursor's (rotated, or created since), or one cut shorter: all
            # of it is new.
            same = after.inode == stat.st_ino and after.offset <= size
            begin = since = after.offset if same else 0
            if size - begin > cap:
                begin, older_not_read = size - cap, True
            data, start = _whole_lines(_read_range(fh, begin, size), begin, cut_head=begin != since)
            end = Position(stat.st_ino, start + len(data))
            return Read((Chunk(current.name, start, data),), end, older_not_read, len(data), names)
        begin = max(0, size - budget)
        data, start = _whole_lines(_read_range(fh, begin, size), begin, cut_head=begin > 0)
    end = Position(stat.st_ino, start + len(data))
    chunks.append(Chunk(current.name, start, data))
    budget -= size - begin
    older_not_read = begin > 0
    for older in files[1:]:
        if budget <= 0:
            older_not_read = True
            break
        with open(older, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            begin = max(0, size - budget)
            # A rotated file is complete: its last line ends it even without a newline.
            raw = _read_range(fh, begin, size)
            data, start = _whole_lines(raw if raw.endswith(b"\n") else raw + b"\n", begin, cut_head=begin > 0)
        chunks.insert(0, Chunk(older.name, start, data))
        budget -= size - begin
        older_not_read = begin > 0
    bytes_read = sum(len(chunk.data) for chunk in chunks)
    return Read(tuple(chunks), end, older_not_read, bytes_read, names)
