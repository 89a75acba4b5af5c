"""What django-axes asks of the panel: the client's address (AXES_CLIENT_IP_CALLABLE) and the page
shown when a user name is locked out from an address after too many failed logins
(AXES_LOCKOUT_CALLABLE)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR; behind the panel's own reverse proxy, the last X-Forwarded-For entry, the one
    that proxy appended (the entries before it are whatever the client sent)."""
    if settings.PANEL_BEHIND_PROXY:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if forwarded[-1]:
            return forwarded[-1]
    return str(request.META.get("REMOTE_ADDR", ""))


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
