"""A log sink of a cluster: where its log entries are forwarded, and how forwarding goes."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel import crypto
from panel.clusters.models import Cluster
from panel.core.errors import Message, message_from_json, message_to_json
from panel.logsink.lib import config as sink_config


class SinkType(models.TextChoices):
    RSYSLOG = sink_config.RSYSLOG, "rsyslog"
    ELASTICSEARCH = sink_config.ELASTICSEARCH, "Elasticsearch"
    OPENSEARCH = sink_config.OPENSEARCH, "OpenSearch"


class LogSink(models.Model):
    """One destination of a cluster's PostgreSQL and PgBouncer log entries. Its configuration
    (which may hold credentials and keys) is kept encrypted; ``cursors`` is where forwarding
    stopped in each log, so a sink that fails gets the entries again once it answers."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="log_sinks")
    name = models.CharField(_("name"), max_length=63)
    sink_type = models.CharField(max_length=16, choices=SinkType.choices)
    config_encrypted = models.TextField()
    cursors = models.JSONField(default=dict, blank=True)
    sent_count = models.PositiveBigIntegerField(default=0)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    failing_since = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    # Elasticsearch/OpenSearch: the day old indices (over index_days_max) were last removed.
    indices_expired_on = models.DateField(null=True, blank=True)
    # Rounds that left older entries out because more were written than one read takes.
    skipped_count = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "name")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "name"), name="logsink_name_unique_per_cluster")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(crypto.decrypt(self.config_encrypted))

    @config.setter
    def config(self, value: dict[str, Any]) -> None:
        self.config_encrypted = crypto.encrypt(json.dumps(value))

    @property
    def is_failing(self) -> bool:
        return self.failing_since is not None

    def sent(self, count: int, cursors: dict[str, str], skipped: int = 0) -> None:
        """A round delivered ``count`` entries: the cursors move on, a failure is over."""
        now = timezone.now()
        LogSink.objects.filter(pk=self.pk).update(
            cursors=cursors,
            sent_count=models.F("sent_count") + count,
            skipped_count=models.F("skipped_count") + skipped,
            last_sent_at=now if count else models.F("last_sent_at"),
            last_error="",
            failing_since=None,
            last_attempt_at=now,
        )

    def failed(self, reason: Message) -> None:
        """A round could not deliver: the cursors stay, the reason shows on the card (kept as a
        template and its parameters, put into words in the reader's language)."""
        now = timezone.now()
        LogSink.objects.filter(pk=self.pk).update(
            last_error=json.dumps(message_to_json(reason))[:4000],
            failing_since=self.failing_since or now,
            last_attempt_at=now,
        )

    @property
    def error_text(self) -> str:
        """Why the last round failed, in the active language; empty while it works."""
        if not self.last_error:
            return ""
        try:
            return str(message_from_json(json.loads(self.last_error)))
        except (ValueError, KeyError, TypeError):
            return self.last_error

    def due(self, now: dt.datetime, backoff: float) -> bool:
        """Whether a round tries this sink now: always while it works; a failing one once every
        ``backoff`` seconds, so a sink that hangs does not hold up every round."""
        if self.failing_since is None or self.last_attempt_at is None:
            return True
        return (now - self.last_attempt_at).total_seconds() >= backoff
