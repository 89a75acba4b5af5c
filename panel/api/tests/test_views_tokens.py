"""The account's API tokens page: a new token shown once, revoking, nobody else's tokens."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from panel.api import services
from panel.api.models import ApiToken, Scope


def test_it_needs_a_login() -> None:
    response = Client().get(reverse("api:tokens"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_the_empty_page_says_what_to_do(owner_client: Client) -> None:
    response = owner_client.get(reverse("api:tokens"))
    assert response.status_code == 200
    assert "No API tokens yet" in response.content.decode()
    assert "Create token" in response.content.decode()


def test_the_user_menu_links_the_page(owner_client: Client) -> None:
    assert reverse("api:tokens") in owner_client.get(reverse("clusters:list")).content.decode()


def test_it_shows_a_new_token_once(owner: User, owner_client: Client) -> None:
    response = owner_client.post(
        reverse("api:tokens"), {"name": "terraform", "scopes": [Scope.READ, Scope.CREATE]}
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(owner=owner)
    page = response.content.decode()
    start = page.index(f"pgp_{token.prefix}_")
    plaintext = page[start : page.index("<", start)]
    assert services.authenticate(plaintext) == (owner, token)
    assert f'data-copy-text="{plaintext}"' in page
    assert token.scope_list == ["database:read", "database:create"]

    again = owner_client.get(reverse("api:tokens")).content.decode()
    assert plaintext not in again
    assert "terraform" in again


def test_it_refuses_a_token_without_scopes(owner_client: Client) -> None:
    response = owner_client.post(reverse("api:tokens"), {"name": "x"})
    assert response.status_code == 200
    assert "Choose at least one scope." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_users_see_only_their_own_tokens(owner: User, other_user: User, owner_client: Client) -> None:
    services.create_token(other_user, "bobs-secret-job", [Scope.READ])
    assert "bobs-secret-job" not in owner_client.get(reverse("api:tokens")).content.decode()


def test_it_revokes_a_token(owner: User, owner_client: Client) -> None:
    token, plaintext = services.create_token(owner, "ci", [Scope.READ])
    response = owner_client.post(reverse("api:token-revoke", args=[token.pk]), follow=True)
    assert response.status_code == 200
    assert "revoked" in response.content.decode()
    assert services.authenticate(plaintext) is None


def test_another_accounts_token_cannot_be_revoked(other_user: User, owner_client: Client) -> None:
    token, plaintext = services.create_token(other_user, "ci", [Scope.READ])
    response = owner_client.post(reverse("api:token-revoke", args=[token.pk]))
    assert response.status_code == 404
    assert services.authenticate(plaintext) is not None


def test_the_page_keeps_csrf(owner: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post(reverse("api:tokens"), {"name": "x", "scopes": [Scope.READ]})
    assert response.status_code == 403
    assert not ApiToken.objects.exists()
