"""App config for the API and its tokens."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ApiConfig(AppConfig):
    name = "panel.api"
    verbose_name = _("API")
