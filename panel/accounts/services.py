"""Choosing the language an account's pages are shown in (the header's menu and `manage.py`)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.utils.translation import gettext as _

from panel.accounts.models import AccountSettings
from panel.core.errors import ServiceError

# The session remembers the account's choice, so pages do not ask the database on every request.
SESSION_KEY = "panel_language"


def language_codes() -> list[str]:
    return [code for code, _name in settings.LANGUAGES]


def account_language(user: User) -> str:
    """The language the account chose, or "" (follow the browser)."""
    row = AccountSettings.objects.filter(user=user).only("language").first()
    return row.language if row else ""


def set_account_language(user: User, language: str) -> str:
    """Remember ``language`` for ``user`` ("" = follow the browser again); returns what was stored."""
    if language and language not in language_codes():
        raise ServiceError(
            _("Unknown language %(language)s: choose one of %(choices)s.")
            % {"language": language, "choices": ", ".join(language_codes())},
            field="language",
            code="account.language_unknown",
        )
    AccountSettings.objects.update_or_create(user=user, defaults={"language": language})
    return language
