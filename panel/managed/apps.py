"""App config for managed: what the managed service adds around a cluster (tags, maintenance
window and updates, Prometheus credentials, storage autoscale)."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ManagedConfig(AppConfig):
    name = "panel.managed"
    label = "managed"
    verbose_name = _("Managed service")
    default_auto_field = "django.db.models.BigAutoField"
