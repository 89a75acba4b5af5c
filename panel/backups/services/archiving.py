"""Continuous archiving of every local cluster: its pgBackRest files written with the server's
configuration (a hook of panel.clusters), its stanza created once it is online, and what
``pg_stat_archiver`` says of it (a failing ``archive_command`` becomes an alert and a banner)."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from panel.backups.engine import runner as engine
from panel.backups.models import ArchiveHealth
from panel.clusters.face import dbconn, transitions
from panel.clusters.models import Cluster, EventLevel
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.insights.face import alerts

log = logging.getLogger(__name__)


def ensure_stanza(cluster: Cluster) -> None:
    """``stanza-create`` (it does nothing on a stanza that exists for this server)."""
    result = engine.run(cluster, "stanza-create", timeout=settings.PANEL_COMMAND_TIMEOUT)
    engine.check(result, "pgbackrest stanza-create")


@dataclass(frozen=True)
class ArchiveStatus:
    """Whether the running server archives to its repository, and how that goes."""

    configured: bool  # backup.conf is written
    active: bool  # the running server archives with the panel's command
    archived_count: int = 0
    failed_count: int = 0
    last_archived_wal: str = ""
    last_archived_at: dt.datetime | None = None
    last_failed_wal: str = ""
    last_failed_at: dt.datetime | None = None

    serving: bool = True

    @property
    def needs_restart(self) -> bool:
        """A running server that does not archive (created before backups, or its archiving
        settings written since): archive_mode only changes with a restart."""
        return self.serving and not self.active

    @property
    def failing(self) -> bool:
        """The last attempt failed: nothing archived since (pg_wal grows meanwhile)."""
        if self.last_failed_at is None:
            return False
        return self.last_archived_at is None or self.last_failed_at > self.last_archived_at


@on_node()
def archive_status(cluster: Cluster) -> ArchiveStatus:
    """What the running server says (its settings and ``pg_stat_archiver``)."""
    configured = cluster.is_local and (cluster.pgdata / engine.SERVER_FILE).is_file()
    if not cluster.is_serving:
        return ArchiveStatus(configured=configured, active=False, serving=False)
    wanted = engine.paths(cluster).config
    try:
        with dbconn.admin_connection(cluster) as conn:
            mode = conn.execute("SELECT pg_catalog.current_setting('archive_mode')").fetchone()
            command = conn.execute("SELECT pg_catalog.current_setting('archive_command')").fetchone()
            row = conn.execute(
                "SELECT archived_count, failed_count, coalesce(last_archived_wal, ''), last_archived_time,"
                " coalesce(last_failed_wal, ''), last_failed_time FROM pg_catalog.pg_stat_archiver"
            ).fetchone()
    except dbconn.DatabaseError as exc:
        # The server's or libpq's words (its socket's path when it is down): the log's.
        log.warning("reading the archiving status of %s failed: %s", cluster.pk, exc)
        raise ServiceError(
            N_(
                "The panel could not read how WAL archiving goes: the server did not answer. Check the "
                "cluster is online; if it is, the panel's log holds the details for an administrator."
            ),
            code="backup.archive_status_unreadable",
            params={},
        ) from None
    active = bool(mode and mode[0] == "on" and command and f"--config={wanted} " in command[0])
    assert row is not None
    return ArchiveStatus(
        configured=configured,
        active=active,
        archived_count=int(row[0]),
        failed_count=int(row[1]),
        last_archived_wal=row[2],
        last_archived_at=row[3],
        last_failed_wal=row[4],
        last_failed_at=row[5],
    )


def check_archiving(cluster: Cluster) -> ArchiveStatus | None:
    """The periodic look: a failing archive_command is an event (once per failure) and a banner
    on the cluster's pages while it lasts (``ArchiveHealth``); so is a restart still needed."""
    try:
        status = archive_status(cluster)
    except ServiceError:
        return None
    record_health(cluster, status)
    return status


def record_health(cluster: Cluster, status: ArchiveStatus) -> None:
    health, _created = ArchiveHealth.objects.get_or_create(cluster=cluster)
    if status.failing and not health.failing:
        health.failing_since = timezone.now()
        message = Message(
            N_(
                "WAL archiving fails (segment %(wal)s): the WAL piles up on the cluster's disk and recent "
                "changes cannot be restored until it works again."
            ),
            wal=status.last_failed_wal,
        )
        transitions.log_event(cluster, "archive-failed", message, EventLevel.ERROR)
        # The alert channel of Insights: the owner's email.
        transaction.on_commit(lambda: alerts.notify_owner(cluster, Message(N_("WAL archiving")), message))
    elif health.failing and not status.failing:
        health.failing_since = None
        transitions.log_event(cluster, "archive-recovered", Message(N_("WAL archiving works again.")))
    health.failing = status.failing
    health.needs_restart = status.needs_restart
    health.last_failed_wal = status.last_failed_wal
    health.checked_at = timezone.now()
    health.save()
