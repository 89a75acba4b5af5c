"""Failed-login throttling (django-axes), replayed with real login POSTs: after PANEL's limit of
failures a user name is locked out *from that address*, the right password included, with a page
that says so; the same user from elsewhere and other users still log in; the cool-off ends it and
an administrator's command ends it at once."""

from __future__ import annotations

import datetime as dt

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db

ATTACKER = "198.51.100.7"
ELSEWHERE = "198.51.100.8"


def _login(username: str, password: str, address: str = ATTACKER) -> tuple[Client, object]:
    client = Client(REMOTE_ADDR=address)
    response = client.post("/login/", {"username": username, "password": password, "next": "/clusters/"})
    return client, response


def _logged_in(client: Client) -> bool:
    return client.get("/clusters/").status_code == 200


def _fail_until_locked(username: str) -> object:
    for attempt in range(1, settings.AXES_FAILURE_LIMIT):
        client, response = _login(username, f"wrong-{attempt}")
        assert response.status_code == 200, attempt
        assert "Please enter a correct username and password" in response.content.decode()
        assert not _logged_in(client)
    _client, response = _login(username, "wrong-last")
    return response


def test_the_limit_is_five_failures_and_fifteen_minutes_by_default() -> None:
    assert settings.AXES_FAILURE_LIMIT == 5
    assert dt.timedelta(minutes=15) == settings.AXES_COOLOFF_TIME
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_repeated_failures_lock_the_user_out_from_that_address_even_with_the_right_password(
    owner: User, other_user: User
) -> None:
    locked = _fail_until_locked("alice")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed logins" in page
    assert "After 5 failed logins, logging in as “alice” from your address is locked for 15 minutes." in page

    client, response = _login("alice", "alice-password-1")
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert not _logged_in(client)

    # The legitimate logins beside it: alice from another address, bob from the same one.
    client, response = _login("alice", "alice-password-1", address=ELSEWHERE)
    assert response.status_code == 302 and _logged_in(client)
    client, response = _login("bob", "bob-password-1")
    assert response.status_code == 302 and _logged_in(client)


def test_the_lock_ends_after_the_cool_off(owner: User) -> None:
    assert _fail_until_locked("alice").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - dt.timedelta(minutes=16))
    client, response = _login("alice", "alice-password-1")
    assert response.status_code == 302 and _logged_in(client)


def test_an_administrator_unlocks_a_user_at_once(owner: User) -> None:
    assert _fail_until_locked("alice").status_code == 429
    call_command("axes_reset_username", "alice")
    client, response = _login("alice", "alice-password-1")
    assert response.status_code == 302 and _logged_in(client)


def test_a_success_before_the_limit_starts_the_count_again(owner: User) -> None:
    for _round in range(2):
        for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
            assert _login("alice", f"wrong-{attempt}")[1].status_code == 200
        client, response = _login("alice", "alice-password-1")
        assert response.status_code == 302 and _logged_in(client)


def test_an_unknown_user_name_is_locked_out_the_same_way(db: None) -> None:
    """No difference between a name that exists and one that does not."""
    assert _fail_until_locked("nobody").status_code == 429


def test_behind_a_proxy_the_address_is_the_one_the_proxy_appended(owner: User, settings: object) -> None:
    """A client cannot escape the lock-out by sending X-Forwarded-For entries of its own."""
    settings.PANEL_BEHIND_PROXY = True  # type: ignore[attr-defined]

    def through_proxy(password: str, spoofed: str, real: str) -> object:
        client = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=f"{spoofed}, {real}")
        return client.post("/login/", {"username": "alice", "password": password})

    for attempt in range(settings.AXES_FAILURE_LIMIT):  # type: ignore[attr-defined]
        response = through_proxy("wrong", spoofed=f"192.0.2.{attempt}", real=ATTACKER)
    assert response.status_code == 429
    assert through_proxy("alice-password-1", spoofed="192.0.2.99", real=ATTACKER).status_code == 429
    assert through_proxy("alice-password-1", spoofed="192.0.2.99", real=ELSEWHERE).status_code == 302
