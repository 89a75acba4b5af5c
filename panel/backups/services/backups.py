"""Backups of a cluster: "Back up now" and the scheduled ones (a row, a task on the cluster's
node), taking one in the foreground, and what the Backups tab shows."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Model
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.backups.engine import runner as engine
from panel.backups.lib import pgbackrest
from panel.backups.models import BackupJob, JobKind, JobStatus
from panel.backups.services.archiving import ArchiveStatus, archive_status, check_archiving
from panel.clusters.face import dbconn, failures, transitions
from panel.clusters.models import Cluster, EventLevel
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError, Term, message_from_text, message_to_text
from panel.core.runas import EngineError
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)

_TYPE_WORDS = {"full": N_("Full"), "diff": N_("Differential"), "incr": N_("Incremental")}

# Marked here, translated when a page asks (the reader's language, not the one at import).
SCHEDULE_TEXT = N_(
    "Daily at %(hour)02d:00 UTC: a full backup on Sundays, a differential one on the other days; "
    "backups are kept for %(days)d days, with the WAL to restore to any moment in between."
)


def schedule_text() -> str:
    return _(SCHEDULE_TEXT) % {"hour": settings.PANEL_BACKUP_HOUR, "days": pgbackrest.RETENTION_DAYS}


def active_job(cluster: Cluster) -> BackupJob | None:
    return cluster.backup_jobs.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).first()


def request_backup(cluster: Cluster, backup_type: str = "full", *, scheduled: bool = False) -> BackupJob:
    """Queue a backup on the cluster's node (the web's "Back up now", the schedule)."""
    if not cluster.is_local:
        raise ServiceError(
            N_("The panel backs up the clusters it runs, not attached servers."),
            code="backup.unsupported",
            params={},
        )
    if backup_type not in pgbackrest.BACKUP_TYPES:
        raise ServiceError(
            N_("Unknown backup type %(t)s."),
            field="backup_type",
            code="backup.type_unknown",
            params={"t": backup_type},
        )
    if cluster.is_replica:
        raise ServiceError(
            N_(
                "A read-only replica has its source's data: back up the source (once promoted, it has backups of its own)."
            ),
            code="backup.replica",
            params={},
        )
    _require_free(cluster)
    job = BackupJob.objects.create(
        cluster=cluster, kind=JobKind.BACKUP, backup_type=backup_type, scheduled=scheduled
    )
    enqueue_job("panel.backups.tasks.backup", job, cluster, made=[job])
    return job


def _require_free(cluster: Cluster) -> None:
    """A backup needs the server running and no other backup or restore of it under way."""
    transitions.require_serving(cluster)
    if active_job(cluster) is not None:
        raise ServiceError(
            N_("A backup or restore of this cluster is already running."), code="backup.busy", params={}
        )


def enqueue_job(task: str, job: BackupJob, cluster: Cluster, *, made: Sequence[Model]) -> None:
    """Hand ``job`` to ``cluster``'s node, on its queue for long work (apart from control work and
    tenants' benchmarks); when the queue refuses, the rows ``made`` for it go again."""
    try:
        enqueue_task(task, str(job.pk), queue=cluster.backups_queue, time_limit=settings.PANEL_BACKUP_TIMEOUT)
    except ServiceError:
        for row in made:
            row.delete()
        raise


def create_backup(cluster: Cluster, backup_type: str = "full") -> BackupJob:
    """Take a backup in the foreground (the command line): a row, then ``perform_backup``."""
    _require_free(cluster)
    job = BackupJob.objects.create(cluster=cluster, kind=JobKind.BACKUP, backup_type=backup_type)
    perform_backup(job.pk)
    job.refresh_from_db()
    if job.status == JobStatus.FAILED:
        failed = message_from_text(job.error_message)
        if isinstance(failed, Message):
            raise ServiceError(failed.template, code="backup.failed", params=failed.params)
        raise ServiceError(failed)
    return job


def perform_backup(job_id: int) -> BackupJob | None:
    """The worker's half: ``pgbackrest backup`` as the cluster's user (expiring what the
    retention no longer needs), the job succeeded with the backup's label, or failed with
    pgBackRest's words."""
    job = BackupJob.objects.select_related("cluster").filter(pk=job_id).first()
    if job is None or not job.claim():
        return job
    cluster = job.cluster
    try:
        status = archive_status(cluster)
        if not status.active:
            raise ServiceError(
                N_(
                    "WAL archiving is not active on the running server; restart the cluster to enable backups."
                ),
                code="backup.archiving_inactive",
                params={},
            )
        if cluster.is_ha:
            checkpoint(cluster)
        result = engine.run(
            cluster, "backup", f"--type={job.backup_type}", timeout=settings.PANEL_BACKUP_TIMEOUT
        )
        engine.check(result, "pgbackrest backup")
        latest = engine.info(cluster).latest()
    except (EngineError, ServiceError, OSError) as exc:
        # pgBackRest's words name the repository's and the server's paths: the log only.
        log.warning("backup %s of cluster %s failed: %s", job.pk, cluster.pk, exc)
        failed = Message(N_("Backup failed: %(reason)s"), reason=failures.reason(exc))
        job.fail(message_to_text(failed))
        transitions.log_event(cluster, "backup-failed", failed, EventLevel.ERROR)
        return job
    job.succeed(latest.label if latest else "")
    transitions.log_event(
        cluster,
        "backup",
        Message(
            N_("%(type)s backup %(label)s taken."),
            type=Term(_TYPE_WORDS.get(job.backup_type, job.backup_type)),
            label=job.label,
        ),
    )
    return job


def checkpoint(cluster: Cluster) -> None:
    """A CHECKPOINT on the primary: one promoted by a failover or switchover writes its new
    timeline into pg_control only at its first checkpoint, and pgBackRest refuses a backup while
    pg_control's timeline and the WAL's differ ("WAL timeline 3 does not match pg_control
    timeline 1")."""
    try:
        with dbconn.admin_connection(cluster) as conn:
            conn.execute("CHECKPOINT")
    except dbconn.DatabaseError as exc:
        raise EngineError(str(exc)) from None


# --- what the tab shows ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BackupsPage:
    """The Backups tab: the repository's backups (newest first), the recovery window, a running
    backup's progress, and how archiving goes."""

    backups: list[pgbackrest.BackupSet] = field(default_factory=list)
    window_start: dt.datetime | None = None
    window_end: dt.datetime | None = None
    running: bool = False
    running_percent: int | None = None
    archive: ArchiveStatus | None = None
    # Rendered where it is read (the reader's language); pgBackRest's own words are the log's.
    problem: Message | str = ""

    def problem_error(self) -> ServiceError:
        """The problem as the refusal the API, a restore and the command line raise."""
        if isinstance(self.problem, Message):
            code = self.problem.code or "backup.repository_unreadable"
            return ServiceError(self.problem.template, code=code, params=self.problem.params)
        return ServiceError(self.problem)


REPOSITORY_UNREADABLE = N_(
    "The backup repository could not be read. The panel's log holds the details for an administrator."
)


@on_node()
def page(cluster: Cluster) -> BackupsPage:
    """Read on the cluster's node: ``pgbackrest info`` and ``pg_stat_archiver``."""
    try:
        info = engine.info(cluster)
    except (EngineError, OSError) as exc:
        log.warning("reading the backup repository of %s failed: %s", cluster.pk, exc)
        return BackupsPage(problem=Message(REPOSITORY_UNREADABLE, "backup.repository_unreadable"))
    archive = None
    try:
        archive = archive_status(cluster)
    except ServiceError as exc:
        return BackupsPage(backups=list(reversed(info.backups)), problem=exc.as_message())
    start = info.window_start()
    return BackupsPage(
        backups=list(reversed(info.backups)),
        window_start=start,
        window_end=recovery_end(archive) if start else None,
        running=info.running is not None,
        running_percent=info.running.percent if info.running else None,
        archive=archive,
    )


def recovery_end(archive: ArchiveStatus | None) -> dt.datetime:
    """The latest moment a restore reaches: now, while archiving works (the restore switches the
    WAL segment first); else the last segment archived."""
    if archive is not None and archive.active and not archive.failing:
        return timezone.now()
    if archive is not None and archive.last_archived_at is not None:
        return archive.last_archived_at
    return timezone.now()


def scheduled_round(now: dt.datetime | None = None) -> list[str]:
    """The periodic job on one node: each serving cluster with no backup gets a full one; after
    PANEL_BACKUP_HOUR each gets the day's (full on Sundays, differential otherwise) unless it
    has one from today; failing archiving is reported."""
    now = now or timezone.now()
    notes = []
    for cluster in Cluster.objects.here().select_related("node"):
        if cluster.is_local and engine.remove_passfile(cluster):
            # An earlier panel's: it held the superuser's password where the cluster's OS user reads.
            notes.append(f"{cluster.name}: pgBackRest's passfile removed")
        if not cluster.is_serving or cluster.is_replica:  # a replica's data is its source's backups'
            continue
        status = check_archiving(cluster)
        if status is None or not status.active or active_job(cluster) is not None:
            continue
        done = cluster.backup_jobs.filter(kind=JobKind.BACKUP, status=JobStatus.SUCCEEDED)
        has_full = done.filter(backup_type="full").exists()
        due = not has_full
        if now.hour >= settings.PANEL_BACKUP_HOUR:
            today = now.replace(hour=0, minute=0, second=0, microsecond=0)
            due = due or not done.filter(finished_at__gte=today).exists()
        if not due:
            continue
        kind = pgbackrest.backup_type_for(now.date(), has_full)
        try:
            request_backup(cluster, kind, scheduled=True)
            notes.append(f"{cluster.name}: {kind} backup queued")
        except ServiceError as exc:
            notes.append(f"{cluster.name}: {exc.message}")
    return notes
