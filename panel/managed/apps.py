"""App config for managed: what the managed service adds around a cluster (tags, maintenance
window and updates, Prometheus credentials, storage autoscale)."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ManagedConfig(AppConfig):
    name = "panel.managed"
    verbose_name = _("Managed service")

    def ready(self) -> None:
        # The server's configuration includes replication.conf (wal_level, the guard's list of
        # logical-only replication roles); clusters cannot import the apps built on it.
        from panel.clusters import hooks
        from panel.core import agent
        from panel.managed.lib import moved
        from panel.managed.services import logical_replication

        hooks.register_server_config(logical_replication.server_config)
        agent.MOVED.update(moved.MODULES)
