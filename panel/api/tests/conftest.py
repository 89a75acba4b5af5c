"""Fixtures of the API tests: tokens with chosen scopes, and a client that sends one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api import services
from panel.api.models import Scope

MakeToken = Callable[..., str]


@pytest.fixture
def make_token() -> MakeToken:
    """A plaintext token of ``user`` with ``scopes`` (database:read by default)."""

    def make(user: User, *scopes: str) -> str:
        return services.create_token(user, "test", scopes or [Scope.READ])[1]

    return make


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def api_client() -> Client:
    """A client that enforces CSRF like a browser's would be: the API must not need it."""
    return Client(enforce_csrf_checks=True)
