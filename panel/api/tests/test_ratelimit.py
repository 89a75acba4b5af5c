"""The API's rate limit, counted in a real Redis: PANEL_API_RATE_LIMIT requests per hour per
token, the ratelimit-* headers on every answer to a token, 429 with retry-after past it."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.services import ratelimit
from panel.api.tests.conftest import MakeToken, bearer


@pytest.fixture
def limit_of_three(redis_server: str, settings: object) -> None:
    settings.REDIS_URL = redis_server  # type: ignore[attr-defined]
    settings.PANEL_API_RATE_LIMIT = 3  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_each_token_has_its_own_hourly_count_with_the_headers(
    api_client: Client, owner: User, make_token: MakeToken, limit_of_three: None
) -> None:
    token, other = make_token(owner), make_token(owner)
    window_end = (int(time.time()) // 3600 + 1) * 3600
    for remaining in (2, 1, 0):
        response = api_client.get("/v2/databases", headers=bearer(token))
        assert response.status_code == 200
        assert response["ratelimit-limit"] == "3"
        assert response["ratelimit-remaining"] == str(remaining)
        assert int(response["ratelimit-reset"]) in (window_end, window_end + 3600)  # an hour boundary
        assert "retry-after" not in response

    refused = api_client.get("/v2/databases", headers=bearer(token))
    assert refused.status_code == 429
    body = refused.json()
    assert body["id"] == "too_many_requests" and "3 per hour" in body["message"] and body["request_id"]
    assert refused["ratelimit-remaining"] == "0"
    assert 1 <= int(refused["retry-after"]) <= 3600
    assert refused["x-request-id"] == body["request_id"]

    # Another token of the same account counts on its own.
    fresh = api_client.get("/v2/databases", headers=bearer(other))
    assert fresh.status_code == 200 and fresh["ratelimit-remaining"] == "2"


@pytest.mark.django_db
def test_a_refused_token_is_not_counted_and_gets_no_quota(
    api_client: Client, owner: User, limit_of_three: None
) -> None:
    response = api_client.get("/v2/databases", headers=bearer("pgp_000000000000_nope"))
    assert response.status_code == 401 and "ratelimit-limit" not in response


def test_the_window_is_an_hour_and_redis_down_lets_calls_through(settings: object) -> None:
    quota = ratelimit.Quota(limit=5000, used=5001, reset=7200)
    assert quota.exceeded and quota.remaining == 0
    assert quota.headers(now=7000.0) == {
        "ratelimit-limit": "5000",
        "ratelimit-remaining": "0",
        "ratelimit-reset": "7200",
        "retry-after": "200",
    }
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # type: ignore[attr-defined]
    assert ratelimit.take("abc") is None
