"""App config for quotas: storage limits per database and per role, measured and enforced."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QuotasConfig(AppConfig):
    name = "panel.quotas"
    verbose_name = _("Quotas")

    def ready(self) -> None:
        # clusters shows "Disk full" on its status badge; it may not import the apps built on it.
        from panel.clusters import hooks
        from panel.quotas import services

        hooks.register_disk_full(services.is_full, services.full_among)
