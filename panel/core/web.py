"""Helpers the views of every app share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django_htmx.http import HttpResponseClientRedirect

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_htmx.middleware import HtmxDetails

from panel.core.errors import ServiceError


class PanelRequest(HttpRequest):
    """The request a view gets, for the type checker: django-htmx's middleware adds ``htmx``, and
    LoginRequiredMiddleware lets only a signed-in ``user`` through to a view not marked public."""

    htmx: HtmxDetails
    user: User


def add_service_error(form: forms.Form, exc: ServiceError) -> None:
    """Show a service's refusal on the field it names, or above the form."""
    form.add_error(exc.field if exc.field in form.fields else None, exc.message)


def go_to(request: HttpRequest, url: str) -> HttpResponse:
    """Send the browser to ``url`` after an action: HTMX follows ``HX-Redirect``, a plain form a 302."""
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(url)
    return redirect(url)
