"""Helpers the views of every app share."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django_htmx.http import HttpResponseClientRedirect

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_htmx.middleware import HtmxDetails

from panel.core.errors import ServiceError

T = TypeVar("T")


class _Refused(enum.Enum):
    REFUSED = "refused"


# What submit() answers when nothing was done: the form shows why.
REFUSED: Final = _Refused.REFUSED


class PanelRequest(HttpRequest):
    """The request a view gets, for the type checker: django-htmx's middleware adds ``htmx``, and
    LoginRequiredMiddleware lets only a signed-in ``user`` through to a view not marked public."""

    htmx: HtmxDetails
    user: User


def add_service_error(form: forms.Form, exc: ServiceError) -> None:
    """Show a service's refusal on the field it names, or above the form."""
    form.add_error(exc.field if exc.field in form.fields else None, exc.message)


def submit(form: forms.Form, action: Callable[[dict[str, Any]], T]) -> T | Literal[_Refused.REFUSED]:
    """A POSTed form's one service call: ``action`` on the form's cleaned data, and what it
    returned; :data:`REFUSED` when the form is invalid or the service refused (its reason then on
    the form, as :func:`add_service_error` puts it), for the view to show the form again."""
    if not form.is_valid():
        return REFUSED
    try:
        return action(form.cleaned_data)
    except ServiceError as exc:
        add_service_error(form, exc)
        return REFUSED


def go_to(request: HttpRequest, url: str) -> HttpResponse:
    """Send the browser to ``url`` after an action: HTMX follows ``HX-Redirect``, a plain form a 302."""
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(url)
    return redirect(url)
