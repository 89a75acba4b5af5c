"""App config for benchmarks."""

from __future__ import annotations

import importlib

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    verbose_name = _("Benchmarks")

    def ready(self) -> None:
        from django.conf import settings

        from benchmarks.services.teardown import stop_cluster_work
        from panel.clusters import hooks

        # Deleting a cluster cancels its runs first: no pgbench outlives the server it measures.
        hooks.register_before_teardown(stop_cluster_work)
        # Engines of one's own: each module registers its engine when imported (here, so that the
        # web, the workers and manage.py all know the same engines).
        for module in settings.PANEL_BENCH_ENGINES:
            importlib.import_module(module)
