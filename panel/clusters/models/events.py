"""The events shown on a cluster page, each readable in the reader's language."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel.core.errors import message_from_json


class EventLevel(models.TextChoices):
    INFO = "info", _("Info")
    WARNING = "warning", _("Warning")
    ERROR = "error", _("Error")


class ClusterEvent(models.Model):
    """Something that happened to a cluster (created, restarted by the reconciler, failed…)."""

    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="events")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    level = models.CharField(max_length=16, choices=EventLevel.choices, default=EventLevel.INFO)
    kind = models.CharField(max_length=32)
    message = models.TextField()  # in English (the command line, search)
    # The message as a template and its parameters (panel.core.errors.message_to_json), rendered
    # in the reader's language; empty for events recorded before, or with text of their own.
    text = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind}: {self.message}"

    @property
    def shown(self) -> str:
        """The message in the active language."""
        return str(message_from_json(self.text)) if self.text else self.message
