"""At login the account's language goes into the session (the middleware reads it from there)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from panel.accounts.services import SESSION_KEY, account_language


@receiver(user_logged_in)
def _remember_language(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = account_language(user)
