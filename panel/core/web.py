"""Helpers the views of every app share."""

from __future__ import annotations

from django import forms

from panel.core.errors import ServiceError


def add_service_error(form: forms.Form, exc: ServiceError) -> None:
    """Show a service's refusal on the field it names, or above the form."""
    form.add_error(exc.field if exc.field in form.fields else None, exc.message)
