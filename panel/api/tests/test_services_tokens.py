"""Personal access tokens: made once, stored hashed, refused when revoked or unknown."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from panel.api import services
from panel.api.models import ApiToken, Scope
from panel.core.errors import ServiceError


def test_it_authenticates_the_token_it_made(owner: User) -> None:
    token, plaintext = services.create_token(owner, "ci", [Scope.READ, Scope.VIEW_CREDENTIALS])
    assert plaintext.startswith(f"pgp_{token.prefix}_")
    assert services.authenticate(plaintext) == (owner, token)
    assert token.scope_list == ["database:read", "database:view_credentials"]


def test_it_keeps_only_a_hash(owner: User) -> None:
    _token, plaintext = services.create_token(owner, "ci", [Scope.READ])
    secret = plaintext.rsplit("_", 1)[1]
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM api_apitoken")
        rows = cursor.fetchall()
    dumped = repr(rows)
    assert plaintext not in dumped
    assert secret not in dumped


@pytest.mark.parametrize(
    "bearer",
    ["", "nonsense", "pgp_", "pgp_abc", "pgp_000000000000_wrong"],
)
def test_it_refuses_unknown_tokens(owner: User, bearer: str) -> None:
    services.create_token(owner, "ci", [Scope.READ])
    assert services.authenticate(bearer) is None


def test_it_refuses_a_right_prefix_with_a_wrong_secret(owner: User) -> None:
    token, plaintext = services.create_token(owner, "ci", [Scope.READ])
    assert services.authenticate(f"pgp_{token.prefix}_{'x' * 43}") is None


def test_it_refuses_a_revoked_token(owner: User) -> None:
    token, plaintext = services.create_token(owner, "ci", [Scope.READ])
    services.revoke_token(token)
    assert services.authenticate(plaintext) is None
    with pytest.raises(ServiceError, match="already revoked"):
        services.revoke_token(token)


def test_it_refuses_the_token_of_an_inactive_account(owner: User) -> None:
    _token, plaintext = services.create_token(owner, "ci", [Scope.READ])
    owner.is_active = False
    owner.save()
    assert services.authenticate(plaintext) is None


def test_it_refuses_unknown_or_no_scopes(owner: User) -> None:
    with pytest.raises(ServiceError, match="database:drop"):
        services.create_token(owner, "ci", ["database:drop"])
    with pytest.raises(ServiceError, match="at least one"):
        services.create_token(owner, "ci", [])
    assert not ApiToken.objects.exists()


def test_it_records_the_last_use_at_most_once_a_minute(owner: User) -> None:
    token, plaintext = services.create_token(owner, "ci", [Scope.READ])
    services.authenticate(plaintext)
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None
    services.authenticate(plaintext)
    token.refresh_from_db()
    assert token.last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now() - dt.timedelta(minutes=2))
    services.authenticate(plaintext)
    token.refresh_from_db()
    assert token.last_used_at > first - dt.timedelta(seconds=1)
    assert timezone.now() - token.last_used_at < dt.timedelta(seconds=5)


# --- manage.py token ----------------------------------------------------------------------------


def test_the_command_prints_the_token_once(owner: User, capsys: pytest.CaptureFixture[str]) -> None:
    call_command(
        "token", "create", "--user", "alice", "--scopes", "database:read,database:create", "--name", "tf"
    )
    out = capsys.readouterr().out
    plaintext = out.strip()
    user, token = services.authenticate(plaintext)  # type: ignore[misc]
    assert user == owner
    assert token.name == "tf"
    assert token.scope_list == ["database:read", "database:create"]

    call_command("token", "list")
    listing = capsys.readouterr().out
    assert token.prefix in listing
    assert "alice" in listing
    assert plaintext not in listing


def test_the_command_revokes_by_prefix_or_id(owner: User, capsys: pytest.CaptureFixture[str]) -> None:
    first, first_plain = services.create_token(owner, "a", [Scope.READ])
    second, second_plain = services.create_token(owner, "b", [Scope.READ])
    call_command("token", "revoke", first.prefix)
    call_command("token", "revoke", str(second.pk))
    assert services.authenticate(first_plain) is None
    assert services.authenticate(second_plain) is None
    assert "revoked" in capsys.readouterr().out


def test_the_command_names_what_is_wrong(owner: User) -> None:
    with pytest.raises(CommandError, match="--scopes"):
        call_command("token", "create", "--user", "alice", "--scopes", "database:everything")
    with pytest.raises(CommandError, match="No user named"):
        call_command("token", "create", "--user", "nobody", "--scopes", "database:read")
    with pytest.raises(CommandError, match="No token"):
        call_command("token", "revoke", "ffffffffffff")
