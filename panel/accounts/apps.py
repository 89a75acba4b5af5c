"""App config for account settings."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "panel.accounts"
    verbose_name = _("Accounts")

    def ready(self) -> None:
        import datetime as dt

        from django.utils.formats import date_format, number_format
        from django.utils.translation import gettext, pgettext

        from panel.accounts import signals  # noqa: F401  (connects the login receiver)
        from panel.core.errors import set_translator

        # Refusals (panel.core.errors) are rendered in the active language when they are read.
        # Numbers and moments in messages are written as the page writes them (2,5 s; 24.11.2026).
        set_translator(
            gettext,
            pgettext,
            lambda n: number_format(n, force_grouping=True),
            lambda value, digits: number_format(value, digits),
            lambda moment: date_format(moment.astimezone(dt.UTC), "DATETIME_FORMAT"),
        )
