"""App config for logs: a cluster's PostgreSQL and PgBouncer logs, read on its node."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LogsConfig(AppConfig):
    name = "panel.logs"
    verbose_name = _("Logs")
