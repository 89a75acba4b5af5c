"""The account's language, over the browser's: after LocaleMiddleware and authentication.

LocaleMiddleware has already chosen from the language cookie or ``Accept-Language``; a signed-in
account that picked a language in the header's menu gets that one on every device it logs in from.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import translation

from panel.accounts.services import SESSION_KEY, account_language, language_codes


class AccountLanguageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and hasattr(request, "session"):
            language = request.session.get(SESSION_KEY)
            if language is None:  # a session from before this middleware: look once, then remember
                language = account_language(user)
                request.session[SESSION_KEY] = language
            if language in language_codes():
                translation.activate(language)
                request.LANGUAGE_CODE = language
        return self.get_response(request)
