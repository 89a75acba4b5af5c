"""What a user names to migrate from (host, port, database, user, SSL, databases to leave out):
checked, and written into the strings libpq and PostgreSQL read (pure, no Django).

``conninfo`` quotes every value as libpq's connection strings want (``key='va\\'lue'``), so no
value can add a keyword of its own; ``pgpass_line`` escapes ``:`` and ``\\`` as a password file
wants. The replication objects' names derive from the migration's id only, never from the user.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from panel.core.errors import N_, CodedError

# Databases never migrated: the templates and the maintenance database.
SKIPPED_DATABASES = frozenset({"template0", "template1", "postgres"})
# Names PostgreSQL accepts unquoted and the panel accepts for users and databases.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_$-]{0,62}")
MAX_IGNORED = 100


class InvalidSource(CodedError, ValueError):
    """A value of the migration form that cannot be used, with the field it is about."""

    def __init__(self, message: str, field: str, code: str, **params: object) -> None:
        super().__init__(message, field=field, code=code, params=params)


@dataclass(frozen=True)
class Source:
    """The server to migrate from, as the user named it (the password apart, never logged)."""

    host: str
    port: int
    dbname: str
    username: str
    disable_ssl: bool = False
    ignore_dbs: tuple[str, ...] = field(default_factory=tuple)

    @property
    def sslmode(self) -> str:
        return "disable" if self.disable_ssl else "require"


def check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise InvalidSource(
            N_(
                "“%(value)s” is not a name the panel migrates: letters, digits, underscores, hyphens "
                "and dollar signs, starting with a letter or underscore, at most 63 characters."
            ),
            what,
            "migration.name_invalid",
            value=str(value)[:70],
        )
    return value


def check(source: Source) -> Source:
    """``source`` when every field can be used; InvalidSource naming the first that cannot."""
    if not isinstance(source.port, int) or isinstance(source.port, bool) or not 1 <= source.port <= 65535:
        raise InvalidSource(N_("A port is a number from 1 to 65535."), "port", "migration.port_invalid")
    check_name(source.dbname, "dbname")
    check_name(source.username, "username")
    if len(source.ignore_dbs) > MAX_IGNORED:
        raise InvalidSource(
            N_("At most %(max)s databases can be left out."),
            "ignore_dbs",
            "migration.too_many",
            max=MAX_IGNORED,
        )
    for name in source.ignore_dbs:
        check_name(name, "ignore_dbs")
    return source


def databases_to_migrate(found: Iterable[str], ignored: Iterable[str]) -> list[str]:
    """The source's databases the migration copies, in name order: not a template, not the
    maintenance database, not left out by the user."""
    left_out = set(ignored) | SKIPPED_DATABASES
    return sorted(name for name in found if name not in left_out)


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def conninfo(params: Mapping[str, object]) -> str:
    """A libpq connection string of ``params`` (None values left out), every value quoted."""
    return " ".join(f"{key}={_quote(str(value))}" for key, value in params.items() if value is not None)


def pgpass_line(password: str) -> str:
    """A password file's line that gives ``password`` to any host, port, database and user: the
    file is the migration's own and names one server."""
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    return f"*:*:*:*:{escaped}\n"


def object_name(migration_id: str) -> str:
    """The publication, subscription, slot and role name of one migration: ``pgpanel_mig_`` and
    the id's first 12 hex digits (one migration per cluster at a time; the id is random)."""
    digits = re.sub(r"[^0-9a-f]", "", migration_id.lower())[:12]
    if len(digits) < 12:
        raise ValueError(f"not a migration id: {migration_id!r}")
    return f"pgpanel_mig_{digits}"


def lag_text(lag_bytes: int | None) -> str:
    """A lag in bytes as people read it (``0 B``, ``12.5 kB``); unknown as an em dash."""
    if lag_bytes is None:
        return "—"
    size = float(lag_bytes)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
