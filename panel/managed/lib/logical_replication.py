"""The replication settings file a cluster's server includes (pure)."""

from __future__ import annotations

from collections.abc import Sequence

FILE = "replication.conf"


def _conf_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def identifier_list(names: Sequence[str]) -> str:
    """Names as one list setting of double-quoted identifiers (a ``"`` doubled, as PostgreSQL's
    SplitIdentifierString reads it) in a config-file string; line breaks escaped."""
    items = ",".join('"' + name.replace('"', '""') + '"' for name in names)
    return _conf_string(items).replace("\n", "\\n").replace("\r", "\\r")


def render(logical_roles: Sequence[str]) -> str:
    """``wal_level = logical`` (logical decoding needs it; it takes a restart) and the roles the
    guard keeps to logical replication."""
    return (
        "# Written by the control panel (pg_allow_replication); edits here are overwritten.\n"
        "wal_level = logical\n"
        f"pgpanel_guard.logical_replication_roles = {identifier_list(sorted(logical_roles))}\n"
    )
