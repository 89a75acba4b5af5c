"""App config for insights: metrics collection, storage, alerts and the Prometheus endpoint."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class InsightsConfig(AppConfig):
    name = "panel.insights"
    verbose_name = _("Insights")

    def ready(self) -> None:
        # clusters calls back through its hooks: it may not import the apps built on it.
        from panel.clusters import hooks
        from panel.insights import services
        from panel.insights.services import alerts

        hooks.register_metrics(services)
        hooks.register_role_changed(alerts.notify_role_change)
        hooks.register_replica_resynced(alerts.notify_replica_resynced)
