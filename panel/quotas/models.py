"""Quotas: a limit on a database's or a role's storage, its measured usage and its state; and a
cluster's storage record (grace periods, data directory size against the plan's disk)."""

from __future__ import annotations

import datetime as dt
import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from panel.clusters.models import Cluster
from panel.quotas.lib import blindness
from panel.quotas.lib.quota import DEFAULT_GRACE_SECONDS, Limit


class QuotaKind(models.TextChoices):
    DATABASE = "database", _("Database")
    ROLE = "role", _("Role")


class QuotaState(models.TextChoices):
    OK = "ok", _("OK")
    OVER_SOFT = "over_soft", _("Over soft limit")
    ENFORCED = "enforced", _("Writes stopped")


class Quota(models.Model):
    """Soft and hard limits on space (bytes) and relations (the "files") of one database or of
    the relations one role owns (0 = no limit); what the last measurement found, and the state
    it led to."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="quotas")
    kind = models.CharField(max_length=16, choices=QuotaKind.choices)
    name = models.CharField(max_length=63)
    space_soft = models.PositiveBigIntegerField(default=0)
    space_hard = models.PositiveBigIntegerField(default=0)
    files_soft = models.PositiveBigIntegerField(default=0)
    files_hard = models.PositiveBigIntegerField(default=0)
    space_used = models.PositiveBigIntegerField(null=True, blank=True)
    files_used = models.PositiveBigIntegerField(null=True, blank=True)
    measured_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=QuotaState.choices, default=QuotaState.OK)
    reason = models.CharField(max_length=100, blank=True)
    over_since = models.DateTimeField(null=True, blank=True)  # when the soft limit was first passed
    enforced_since = models.DateTimeField(null=True, blank=True)
    # "Allow writes for 15 minutes": until when, and the grace period (its over_since) it was used in.
    writes_allowed_until = models.DateTimeField(null=True, blank=True)
    allowance_used_for = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("kind", "name")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "kind", "name"), name="quota_unique_per_target"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def space(self) -> Limit:
        return Limit(self.space_used or 0, self.space_soft, self.space_hard)

    @property
    def files(self) -> Limit:
        return Limit(self.files_used or 0, self.files_soft, self.files_hard)

    @property
    def is_enforced(self) -> bool:
        return self.state == QuotaState.ENFORCED

    @property
    def allowance_left(self) -> bool:
        """ "Allow writes" was not used yet in this grace period (the one since ``over_since``)."""
        return self.allowance_used_for is None or self.allowance_used_for != self.over_since

    def writes_allowed_at(self, now: dt.datetime) -> bool:
        """An allowance lifts the stop at ``now``."""
        return self.writes_allowed_until is not None and self.writes_allowed_until > now

    def space_percent(self) -> float | None:
        """Usage against the hard limit (else the soft one), for the bar."""
        limit = self.space_hard or self.space_soft
        return None if not limit or self.space_used is None else min(100.0, 100.0 * self.space_used / limit)

    def files_percent(self) -> float | None:
        limit = self.files_hard or self.files_soft
        return None if not limit or self.files_used is None else min(100.0, 100.0 * self.files_used / limit)


class Storage(models.Model):
    """A cluster's quota settings and its disk: the grace periods (``setquota -t``), the data
    directory's size against the plan's disk (the outer hard limit) and whether that stopped
    writes."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="storage")
    space_grace_seconds = models.PositiveIntegerField(default=DEFAULT_GRACE_SECONDS)
    files_grace_seconds = models.PositiveIntegerField(default=DEFAULT_GRACE_SECONDS)
    data_dir_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    measured_at = models.DateTimeField(null=True, blank=True)
    measure_ms = models.FloatField(null=True, blank=True)  # database time of the last measurement
    disk_full_since = models.DateTimeField(null=True, blank=True)
    # The volume the cluster's data lives on (shared with the node's other clusters).
    volume_percent = models.FloatField(null=True, blank=True)
    volume_full_since = models.DateTimeField(null=True, blank=True)
    volume_warned_since = models.DateTimeField(null=True, blank=True)
    # What the server was last told (the guard's lists), to write and reload only on a change.
    applied = models.TextField(blank=True)
    # What the last measurement could not see, and why (empty: everything was measured).
    blind = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"storage of {self.cluster_id}"

    @property
    def blind_shown(self) -> str:
        """What the last measurement could not see and why, in the reader's language (the banner)."""
        shown = blindness.shown(self.blind, self.cluster.name)
        return str(shown) if shown else ""

    @property
    def is_full(self) -> bool:
        """Read-only because of the disk: the plan's, or the node's volume."""
        return self.disk_full_since is not None or self.volume_full_since is not None
