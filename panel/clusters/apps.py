"""App config for clusters."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClustersConfig(AppConfig):
    name = "panel.clusters"
    label = "clusters"
    verbose_name = _("Clusters")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from panel.clusters import checks  # noqa: F401  (registers system checks)
