"""Row 8: ``/metrics?token=…`` put the token in every access log. The token is now taken only from
the Authorization header; a token in the URL is refused, even the right one."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from panel.clusters.tests.conftest import make_cluster_row
from panel.insights import services
from panel.insights.engine.collector import Snapshot

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-for-the-security-tests"


@pytest.fixture(autouse=True)
def _token(settings: object) -> None:
    settings.PANEL_METRICS_TOKEN = TOKEN  # type: ignore[attr-defined]


def test_the_token_in_the_url_is_refused_with_a_message_saying_to_use_the_header(client: Client) -> None:
    response = client.get(f"/metrics?token={TOKEN}")
    assert response.status_code == 401
    text = response.content.decode()
    assert "only in the Authorization header" in text and "Bearer" in text
    assert "pgpanel_" not in text
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.fixture
def collected(owner: User) -> None:
    snap = Snapshot(at=timezone.now(), up={"postgres": True})
    snap.gauge("conn_total", "", 5)
    services.store(make_cluster_row(owner, name="db-scraped"), snap)


def test_the_header_still_works(client: Client, collected: None) -> None:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert 'cluster="db-scraped"' in response.content.decode()
    refused = client.get(f"/metrics?token={TOKEN}")
    assert refused.status_code == 401 and b"db-scraped" not in refused.content


def test_a_wrong_or_missing_header_is_refused(client: Client) -> None:
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
