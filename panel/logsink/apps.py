"""App config for log forwarding: a cluster's PostgreSQL and PgBouncer log entries sent to the
owner's rsyslog or Elasticsearch/OpenSearch sinks."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LogsinkConfig(AppConfig):
    name = "panel.logsink"
    verbose_name = _("Log forwarding")
