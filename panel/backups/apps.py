"""App config for backups: continuous archiving, backups and restores with pgBackRest."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BackupsConfig(AppConfig):
    name = "panel.backups"
    verbose_name = _("Backups")

    def ready(self) -> None:
        # clusters writes the server's configuration, provisions and deletes; it may not import
        # the apps built on it: they register what it calls.
        from panel.backups import checks  # noqa: F401  (registers the system check)
        from panel.backups.services import cluster_hooks

        cluster_hooks.register()
