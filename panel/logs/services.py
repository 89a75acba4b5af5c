"""A cluster's logs, read where the cluster lives: one function per use (the Logs tab and
``manage.py logs`` read entries and follow them, the download takes the text).

Every read goes through ``_hiding``: the panel's own sessions (its superuser, its monitoring
role, PgBouncer's admin console) are left out, password literals and the panel's own secrets
redacted, before any filter or search runs, so neither the page nor a search can reveal them.

PostgreSQL's source is its ``jsonlog`` file (``postgresql.json`` beside ``postgresql.log``), read
as structured records: whose session wrote an entry is the record's ``user`` field, which no
database or role name can forge (issue 29). A cluster made before writes it from the reload that
follows its next reconciler pass (``panel.clusters.reconciler``), or its next start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext_lazy

from panel.clusters.models import Cluster, credentials
from panel.core.agent import on_node
from panel.core.errors import N_, ServiceError
from panel.logs.lib import jsonlog, logfile
from panel.logs.lib.logfile import LogEntry, Position
from panel.pools.face import ADMIN_ROLE, bouncer_files
from panel.pools.models import Pooler

POSTGRES = "postgres"
POOLER = "pooler"
SOURCES = {POSTGRES: gettext_lazy("PostgreSQL"), POOLER: gettext_lazy("Connection pooler (PgBouncer)")}
LEVELS = {POSTGRES: logfile.POSTGRES_LEVELS, POOLER: logfile.PGBOUNCER_LEVELS}

# What one read of the Logs tab may hold in memory, and the download (whole lines, newest).
READ_CAP_BYTES = 4 * 1024 * 1024
DOWNLOAD_CAP_BYTES = 16 * 1024 * 1024
DEFAULT_ENTRIES = 200
MAX_ENTRIES = 2000


@dataclass
class LogPage:
    """Entries newest first, and where the next live-tail read starts (``cursor``)."""

    source: str
    entries: list[LogEntry] = field(default_factory=list)
    cursor: str = ""
    # Older lines were not read (the read's cap), or more entries matched than were returned.
    older_not_read: bool = False
    more_entries: bool = False
    bytes_read: int = 0
    files: list[str] = field(default_factory=list)


@dataclass
class LogText:
    """The visible text of the log files (the download)."""

    source: str
    text: str
    older_not_read: bool
    files: list[str]


def _check(cluster: Cluster, source: str) -> None:
    if source not in SOURCES:
        raise ServiceError(
            N_("Unknown log source “%(source)s”; choose postgres or pooler."),
            field="source",
            code="logs.source_unknown",
            params={"source": source},
        )
    if not cluster.is_local:
        raise ServiceError(
            N_(
                "The panel reads the logs of the clusters it runs; an attached server keeps its log where it runs."
            ),
            code="logs.attached_unsupported",
            params={},
        )


def json_log_file(cluster: Cluster) -> Path:
    """Where PostgreSQL writes its ``jsonlog``: ``log_filename``'s ``.log`` becomes ``.json``."""
    return cluster.log_file.with_suffix(".json")


def _path(cluster: Cluster, source: str) -> Path:
    return json_log_file(cluster) if source == POSTGRES else bouncer_files(cluster).logfile


def parse(read: logfile.Read, source: str) -> list[LogEntry]:
    """The entries of a read: PostgreSQL's structured records, PgBouncer's text lines."""
    if source == POSTGRES:
        return jsonlog.parse(read.chunks)
    return logfile.parse(read.chunks, logfile.PGBOUNCER)


def hidden_roles(source: str) -> tuple[str, ...]:
    """Whose sessions the tenant does not see: the panel's own roles."""
    if source == POSTGRES:
        return settings.PANEL_ROLES
    return (ADMIN_ROLE,)


def panel_secrets(cluster: Cluster) -> list[str]:
    """The passwords of the panel's own roles on this cluster, redacted wherever they appear."""
    secrets = []
    if cluster.superuser_password_encrypted:
        secrets.append(credentials.superuser_password(cluster))
    if cluster.monitor_password_encrypted:
        secrets.append(credentials.monitor_password(cluster))
    pooler = Pooler.objects.filter(cluster=cluster).first()
    if pooler is not None and pooler.admin_password_encrypted:
        secrets.append(pooler.admin_password)
    return secrets


def _hiding(cluster: Cluster, source: str) -> dict[str, tuple[str, ...]]:
    """What ``logfile.shown`` and ``logfile.newest`` leave out or redact for this cluster."""
    return {
        "roles": hidden_roles(source),
        "secrets": tuple(panel_secrets(cluster)),
        # Where the panel keeps the cluster on the node is no business of the tenant's.
        "paths": (str(cluster.data_root), str(settings.PANEL_DATA_DIR)),
    }


def _read(cluster: Cluster, source: str, cap: int, after: Position | None = None) -> logfile.Read:
    try:
        return logfile.read_tail(_path(cluster, source), cap, after)
    except OSError as exc:
        raise ServiceError.because(
            N_("Could not read the log: %(reason)s"), "logs.read_failed", exc.strerror or exc
        ) from None


@on_node(timeout=30)
def read_log(
    cluster: Cluster,
    source: str = POSTGRES,
    *,
    level: str = "",
    search: str = "",
    limit: int = DEFAULT_ENTRIES,
    after: str = "",
) -> LogPage:
    """The newest ``limit`` entries that match ``level`` and ``search``, newest first. With
    ``after`` (a previous page's cursor) only entries written since then: the live tail."""
    _check(cluster, source)
    level = level.upper()
    if level and level not in LEVELS[source]:
        raise ServiceError(
            N_("Unknown level “%(level)s”."),
            field="level",
            code="logs.level_unknown",
            params={"level": level},
        )
    limit = max(1, min(int(limit), MAX_ENTRIES))
    position = Position.parse(after) if after else None
    read = _read(cluster, source, READ_CAP_BYTES, position)
    entries = parse(read, source)
    found, more = logfile.newest(entries, limit, level=level, search=search, **_hiding(cluster, source))
    return LogPage(
        source=source,
        entries=found,
        # No log yet: the tail reads the file from its start once it exists.
        cursor=str(read.end) if read.end else logfile.NOTHING_READ,
        older_not_read=read.older_not_read,
        more_entries=more,
        bytes_read=read.bytes_read,
        files=list(read.files),
    )


@on_node(timeout=120)
def log_text(cluster: Cluster, source: str = POSTGRES) -> LogText:
    """The log as the tab shows it, oldest line first, as one text (the newest
    ``DOWNLOAD_CAP_BYTES`` of the files at most)."""
    _check(cluster, source)
    read = _read(cluster, source, DOWNLOAD_CAP_BYTES)
    hiding = _hiding(cluster, source)
    entries = logfile.shown(parse(read, source), **hiding)
    lines = [line for entry in entries for line in entry.lines]
    return LogText(
        source=source,
        text="\n".join(lines) + ("\n" if lines else ""),
        older_not_read=read.older_not_read,
        files=list(read.files),
    )
