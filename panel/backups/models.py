"""Backup and restore jobs of a cluster, and where a restored cluster came from."""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel.clusters.models import Cluster


class JobKind(models.TextChoices):
    BACKUP = "backup", _("Backup")
    RESTORE = "restore", _("Restore")


class JobStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")

    TERMINAL: ClassVar[frozenset[str]]


JobStatus.TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED})


BACKUP_TYPE_LABELS = {
    "full": _("Full backup"),
    "diff": _("Differential backup"),
    "incr": _("Incremental backup"),
}


class BackupJob(models.Model):
    """One backup of a cluster (``backup_type`` full/diff/incr), or one restore of it into a new
    cluster (``target_name``, at ``target_time``; none: the latest point): its state, progress and
    failure reason, shown on the Backups tab. Celery only carries its id."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="backup_jobs")
    kind = models.CharField(max_length=16, choices=JobKind.choices, default=JobKind.BACKUP)
    backup_type = models.CharField(max_length=8, blank=True)
    scheduled = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    label = models.CharField(max_length=64, blank=True)
    target_name = models.CharField(max_length=63, blank=True)
    target_time = models.DateTimeField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=("cluster", "status"), name="backupjob_cluster_status_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(progress__lte=100), name="backupjob_progress_at_most_100"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.backup_type} of {self.cluster_id}: {self.status}"

    @property
    def type_label(self) -> str:
        """ "Full backup", "Differential backup"… in the reader's language."""
        return str(BACKUP_TYPE_LABELS.get(self.backup_type, self.backup_type))

    @property
    def is_terminal(self) -> bool:
        return self.status in JobStatus.TERMINAL

    def claim(self) -> bool:
        """queued → running, atomically; False when another worker took it (or it ended)."""
        now = timezone.now()
        if not BackupJob.objects.filter(pk=self.pk, status=JobStatus.QUEUED).update(
            status=JobStatus.RUNNING, started_at=now
        ):
            return False
        self.status, self.started_at = JobStatus.RUNNING, now
        return True

    def succeed(self, label: str = "") -> None:
        if self.status != JobStatus.RUNNING:
            raise ValueError(f"a {self.status} job cannot succeed")
        self.status, self.progress, self.label = JobStatus.SUCCEEDED, 100, label or self.label
        self.finished_at = timezone.now()
        self.save(update_fields=["status", "progress", "label", "finished_at"])

    def fail(self, reason: str) -> None:
        if self.is_terminal:
            raise ValueError(f"a {self.status} job cannot fail")
        self.status, self.error_message, self.finished_at = JobStatus.FAILED, reason, timezone.now()
        self.save(update_fields=["status", "error_message", "finished_at"])


class RestoreOrigin(models.Model):
    """Where a restored or forked cluster came from (shown on its page). The source may since
    have been deleted: its name and id are kept."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="restore_origin")
    source = models.ForeignKey(
        Cluster, on_delete=models.SET_NULL, null=True, blank=True, related_name="restored_clusters"
    )
    source_name = models.CharField(max_length=63)
    # None: the latest point (a fork).
    target_time = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.cluster_id} from {self.source_name}"

    @property
    def is_fork(self) -> bool:
        return self.target_time is None


class KeptRepository(models.Model):
    """The backups of a deleted cluster, kept for the retention period (``expires_at``), then
    removed by the periodic job."""

    cluster_hex = models.CharField(max_length=32, unique=True)
    cluster_name = models.CharField(max_length=63)
    owner = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="kept_backups")
    node_name = models.CharField(max_length=40)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"backups of {self.cluster_name} until {self.expires_at:%Y-%m-%d}"


class ArchiveHealth(models.Model):
    """How a cluster's WAL archiving went at the last look (the periodic job, the Backups tab):
    the banner on every tab of the cluster while it fails or waits for a restart."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="archive_health")
    failing = models.BooleanField(default=False)
    needs_restart = models.BooleanField(default=False)
    last_failed_wal = models.CharField(max_length=64, blank=True)
    failing_since = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"archiving of {self.cluster_id}: {'failing' if self.failing else 'ok'}"


class DeleteChoice(models.Model):
    """What the owner chose in the delete form: keep the cluster's backups for the retention
    period (the default) or remove them with it."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="backup_delete_choice")
    keep_backups = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"{self.cluster_id}: keep backups {self.keep_backups}"
