"""App config for benchmarks."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    label = "benchmarks"
    verbose_name = _("Benchmarks")
    default_auto_field = "django.db.models.BigAutoField"
