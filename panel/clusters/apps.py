"""App config for clusters."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClustersConfig(AppConfig):
    name = "panel.clusters"
    verbose_name = _("Clusters")

    def ready(self) -> None:
        import logging

        from django.conf import settings

        from panel.clusters import checks  # (registers system checks)
        from panel.clusters.lib import moved
        from panel.core import agent

        agent.MOVED.update(moved.MODULES)

        if settings.PANEL_PROCESS_ROLE == "web":
            # The web server and beat: every process and signal is the node agent's.
            agent.forbid_processes_in_web()

        # Said by every process (web, worker, beat), not only by `manage.py check`.
        where = checks.redis_url_without_password(settings.REDIS_URL)
        if where is not None:
            logging.getLogger("panel").warning(
                "%s %s", checks.REDIS_WITHOUT_PASSWORD.format(where=where), checks.REDIS_HINT
            )
