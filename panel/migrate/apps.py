"""App config for online migration: a source server's databases copied into a cluster and kept in
step by logical replication until the owner cuts over."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MigrateConfig(AppConfig):
    name = "panel.migrate"
    label = "onlinemigration"
    verbose_name = _("Online migration")
    default_auto_field = "django.db.models.BigAutoField"
