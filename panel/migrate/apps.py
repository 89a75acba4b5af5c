"""App config for online migration: a source server's databases copied into a cluster and kept in
step by logical replication until the owner cuts over."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MigrateConfig(AppConfig):
    name = "panel.migrate"
    label = "onlinemigration"
    verbose_name = _("Online migration")

    def ready(self) -> None:
        from panel.clusters import hooks
        from panel.migrate.services import actions

        hooks.register_before_teardown(actions.before_teardown)
