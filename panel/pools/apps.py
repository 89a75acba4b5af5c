"""App config for connection pools."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PoolsConfig(AppConfig):
    name = "panel.pools"
    verbose_name = _("Connection pools")

    def ready(self) -> None:
        # clusters calls back through its hooks: it may not import the apps built on it.
        from panel.clusters import hooks
        from panel.pools import services

        hooks.register_pooler(services)
