"""The Settings tab's tags and storage autoscale cards (issue 38: both existed only in the API):
they show and set what the API does through the same service functions, put a refusal next to
its field, speak German, and answer 404 to another account."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from panel.clusters.tests.conftest import make_cluster_row
from panel.managed.services import autoscale, tags

HTMX = {"HX-Request": "true"}


def field_errors(html: str, field: str) -> list[str]:
    """The errors shown under ``field`` (its wrapper's invalid-feedback lines)."""
    start = html.index(f'id="id_{field}"')
    end = html.find("</div>\n</div>", start)
    wrapper = html[start : end + len("</div>") if end >= 0 else None]
    return re.findall(r'class="invalid-feedback d-block">([^<]*)<', wrapper)


@pytest.mark.django_db
def test_tags_are_set_from_the_settings_tab(owner: User, owner_client: Client, other_client: Client) -> None:
    cluster = make_cluster_row(owner)
    settings_page = owner_client.get(reverse("clusters:settings", args=[cluster.pk])).content.decode()
    url = reverse("managed:tags", args=[cluster.pk])
    assert url in settings_page
    page = owner_client.post(url, {"tags": "prod, team:web  prod"}, headers=HTMX).content.decode()
    assert "Tags saved." in page
    assert tags.tags_of(cluster) == ["prod", "team:web"]  # what the API's cluster object lists
    bad = owner_client.post(url, {"tags": "ok no/slash"}, headers=HTMX).content.decode()
    assert any("Not a tag:" in error and "no/slash" in error for error in field_errors(bad, "tags")), bad
    assert tags.tags_of(cluster) == ["prod", "team:web"]
    assert other_client.get(url).status_code == 404
    assert other_client.post(url, {"tags": "mine"}).status_code == 404


@pytest.mark.django_db
def test_storage_autoscale_is_set_from_the_settings_tab(
    owner: User, owner_client: Client, other_client: Client
) -> None:
    cluster = make_cluster_row(owner)
    settings_page = owner_client.get(reverse("clusters:settings", args=[cluster.pk])).content.decode()
    url = reverse("managed:autoscale", args=[cluster.pk])
    assert url in settings_page
    data = {"enabled": "on", "threshold_percent": "80", "increment_gib": "20"}
    page = owner_client.post(url, data, headers=HTMX).content.decode()
    assert "Storage autoscale saved." in page
    row = autoscale.autoscale_of(cluster)
    assert (row.enabled, row.threshold_percent, row.increment_gib) == (True, 80, 20)
    bad = owner_client.post(url, {**data, "threshold_percent": "100"}, headers=HTMX).content.decode()
    assert field_errors(bad, "threshold_percent"), bad
    assert not field_errors(bad, "increment_gib")
    row.refresh_from_db()
    assert row.threshold_percent == 80
    assert other_client.post(url, data).status_code == 404


@pytest.mark.django_db
def test_the_cards_speak_german(owner: User, owner_client: Client) -> None:
    cluster = make_cluster_row(owner)
    for name, words in (
        ("managed:tags", "Tags speichern"),
        ("managed:autoscale", "Speicher automatisch skalieren"),
    ):
        page = owner_client.get(reverse(name, args=[cluster.pk]), headers={**HTMX, "Accept-Language": "de"})
        assert words in page.content.decode(), name
