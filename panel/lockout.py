"""The page django-axes shows when a user name is locked out from an address after too many failed
logins (AXES_LOCKOUT_CALLABLE)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict | None = None
) -> HttpResponse:
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {
        "username": username,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
    }
    # 429 Too Many Requests, as django-axes answers by default.
    return render(request, "registration/locked_out.html", context, status=429)
