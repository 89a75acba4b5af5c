"""Issue 38, item 8: a page that does not exist is the panel's own 404 (templates/404.html) with
DEBUG off, as in production: in the panel's frame for a signed-in user, a lone card otherwise,
translated, with the way back to the cluster list, and under the same Content-Security-Policy."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from panel.clusters.tests.conftest import make_cluster_row

pytestmark = pytest.mark.django_db


@override_settings(DEBUG=False)
@pytest.mark.parametrize(
    ("language", "heading", "link"),
    [
        ("en", "Page not found", "Back to the clusters"),
        ("de", "Seite nicht gefunden", "Zurück zu den Clustern"),
    ],
)
def test_a_missing_page_is_the_panels_own_404(
    owner_client: Client, language: str, heading: str, link: str
) -> None:
    response = owner_client.get("/clusters/no-such-page/", HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 404
    page = response.content.decode()
    assert f'<h1 class="h4">{heading}</h1>' in page
    assert f'href="{reverse("clusters:list")}">{link}</a>' in page
    assert 'class="panel-sidebar' in page  # the panel's frame: the user goes on from here
    assert "The requested resource was not found on this server" not in page  # not Django's bare page
    assert "script-src 'self'" in response["Content-Security-Policy"]


@override_settings(DEBUG=False)
def test_someone_elses_cluster_is_the_same_404(owner: User, other_client: Client) -> None:
    cluster = make_cluster_row(owner, name="db-private", port=None, pooler_port=None)
    theirs = other_client.get(reverse("clusters:detail", args=[cluster.pk]))
    nowhere = other_client.get(reverse("clusters:detail", args=[uuid.uuid4()]))
    assert theirs.status_code == nowhere.status_code == 404
    assert "Page not found" in theirs.content.decode()
    assert "db-private" not in theirs.content.decode()


@override_settings(DEBUG=False)
def test_signed_out_the_404_is_a_lone_card() -> None:
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "Page not found" in page
    assert "panel-sidebar" not in page and "Log out" not in page
    assert f'href="{reverse("clusters:list")}"' in page
