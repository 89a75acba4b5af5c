"""The header's language menu: Django's set_language, remembered for the signed-in account too."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST
from django.views.i18n import set_language as django_set_language

from panel.accounts.services import SESSION_KEY, language_codes, set_account_language


@login_not_required  # the login page has the menu too
@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    response = django_set_language(request)  # the cookie, and the redirect to `next`
    language = request.POST.get("language", "")
    if language in language_codes() and request.user.is_authenticated:
        request.session[SESSION_KEY] = set_account_language(request.user, language)
    return response
