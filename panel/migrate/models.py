"""An online migration into a cluster: the source it reads, the databases it copies, its state."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel import crypto
from panel.clusters.models import Cluster
from panel.core.errors import N_, ServiceError
from panel.migrate.lib import source as source_lib


class MigrationStatus(models.TextChoices):
    """The managed service's words: ``running`` while the schema and the rows are copied,
    ``syncing`` once every table follows the source, then ``done`` (cut over), ``canceled`` or
    ``error``."""

    RUNNING = "running", _("copying")
    SYNCING = "syncing", _("syncing")
    DONE = "done", _("cut over")
    CANCELED = "canceled", _("canceled")
    ERROR = "error", _("failed")


ACTIVE = frozenset({MigrationStatus.RUNNING, MigrationStatus.SYNCING})
TERMINAL = frozenset({MigrationStatus.DONE, MigrationStatus.CANCELED, MigrationStatus.ERROR})


class OnlineMigration(models.Model):
    """One migration from a server the owner named into ``cluster``; the source's password is
    kept encrypted and only for as long as the migration runs."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="online_migrations")
    status = models.CharField(max_length=16, choices=MigrationStatus.choices, default=MigrationStatus.RUNNING)
    host = models.CharField(max_length=255)
    # The address the host resolved to when the migration started: every later connection goes
    # there, so a second DNS answer cannot send the panel elsewhere.
    address = models.GenericIPAddressField()
    port = models.PositiveIntegerField()
    dbname = models.CharField(max_length=63)
    username = models.CharField(max_length=63)
    password_encrypted = models.TextField(blank=True)
    disable_ssl = models.BooleanField(default=False)
    ignore_dbs = models.JSONField(default=list, blank=True)
    # The databases copied (name order), and those the migration created on the cluster.
    databases = models.JSONField(default=list, blank=True)
    created_databases = models.JSONField(default=list, blank=True)
    # What is set up so far, for the clean-up: subscription names by database, publications made.
    subscriptions = models.JSONField(default=dict, blank=True)
    publications = models.JSONField(default=list, blank=True)
    progress_message = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            models.UniqueConstraint(
                fields=("cluster",),
                condition=Q(status__in=["running", "syncing"]),
                name="online_migration_one_active_per_cluster",
            )
        ]

    def __str__(self) -> str:
        return f"{self.host}:{self.port} → {self.cluster_id}"

    password = crypto.Encrypted("password_encrypted", blank=True)

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE

    @property
    def name(self) -> str:
        return source_lib.object_name(self.id.hex)

    @property
    def source(self) -> source_lib.Source:
        return source_lib.Source(
            host=self.host,
            port=self.port,
            dbname=self.dbname,
            username=self.username,
            disable_ssl=self.disable_ssl,
            ignore_dbs=tuple(self.ignore_dbs),
        )

    def mark_syncing(self) -> bool:
        """Copying → syncing, once; False when another reader got there first or it ended."""
        updated = OnlineMigration.objects.filter(pk=self.pk, status=MigrationStatus.RUNNING).update(
            status=MigrationStatus.SYNCING, progress_message=""
        )
        if updated:
            self.status = MigrationStatus.SYNCING
        return bool(updated)

    def finish(self, status: str, error: str = "") -> None:
        """Into a terminal state; the source's password is forgotten then."""
        if status not in TERMINAL:
            raise ValueError(f"{status!r} is not a terminal state")
        if not self.is_active:
            raise ServiceError(
                N_("This migration has already ended (%(status)s)."),
                code="migration.finished",
                params={"status": self.get_status_display()},
            )
        self.status = status
        self.error_message = error
        self.password_encrypted = ""
        self.finished_at = timezone.now()
        self.save(update_fields=["status", "error_message", "password_encrypted", "finished_at"])
