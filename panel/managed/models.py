"""Rows the managed service keeps around a cluster: its tags, its maintenance window and the
software versions its node reports, its storage autoscale rule; an account's metrics
credentials."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel import crypto
from panel.clusters.models import Cluster, DatabaseUser


class ClusterTag(models.Model):
    """One tag on a cluster (``tags`` of the cluster object, the list's ``tag_name`` filter)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(_("tag"), max_length=255)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="managed_tag_unique")]
        indexes = [models.Index(fields=["name"], name="managed_tag_name")]

    def __str__(self) -> str:
        return self.name


class Weekday(models.TextChoices):
    MONDAY = "monday", _("Monday")
    TUESDAY = "tuesday", _("Tuesday")
    WEDNESDAY = "wednesday", _("Wednesday")
    THURSDAY = "thursday", _("Thursday")
    FRIDAY = "friday", _("Friday")
    SATURDAY = "saturday", _("Saturday")
    SUNDAY = "sunday", _("Sunday")


class Maintenance(models.Model):
    """A cluster's maintenance window (a weekday and a UTC hour) and what its node last reported:
    the PostgreSQL and PgBouncer versions the cluster runs and the ones installed beside them."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="maintenance")
    day = models.CharField(_("day"), max_length=9, choices=Weekday.choices, default=Weekday.SUNDAY)
    hour = models.PositiveSmallIntegerField(_("hour (UTC)"), default=3)
    postgres_running = models.CharField(max_length=32, blank=True)
    postgres_installed = models.CharField(max_length=32, blank=True)
    pgbouncer_running = models.CharField(max_length=32, blank=True)
    pgbouncer_installed = models.CharField(max_length=32, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    last_installed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(hour__lte=23), name="managed_window_hour")]

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.day} {self.hour:02d}:00 UTC"


class Autoscale(models.Model):
    """Storage autoscale: past ``threshold_percent`` of the plan's disk, the cluster moves to the
    next plan with at least ``increment_gib`` more disk."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="autoscale")
    enabled = models.BooleanField(default=False)
    threshold_percent = models.PositiveSmallIntegerField(default=80)
    increment_gib = models.PositiveIntegerField(default=10)
    last_scaled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(threshold_percent__gte=1, threshold_percent__lte=99),
                name="managed_autoscale_threshold",
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.threshold_percent}% +{self.increment_gib} GiB"


class MetricsCredentials(models.Model):
    """An account's basic-auth credentials for its clusters' scrape endpoints (one pair for all
    of them, as on the managed service); the password encrypted at rest."""

    account = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="metrics_credentials"
    )
    username = models.CharField(max_length=64, unique=True)
    password_encrypted = models.TextField()
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.username

    password = crypto.Encrypted("password_encrypted")


class ReplicationUser(models.Model):
    """A database user granted ``pg_allow_replication``: REPLICATION, restricted by the privilege
    guard to logical replication (``pgpanel_guard.logical_replication_roles``)."""

    user = models.OneToOneField(DatabaseUser, on_delete=models.CASCADE, related_name="replication")
    granted_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.user.name
