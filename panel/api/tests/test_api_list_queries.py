"""``GET /v2/databases`` and the cluster list page ask the database a fixed number of times for a
page, whatever its number of clusters (issue 41: 200 clusters on a node, the list ≤ 100 ms; at 20
clusters the API's list took 23 times as long as with one, each cluster object asking again for
its users, databases, tags, window and sources)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from panel.api.tests.conftest import MakeToken, bearer
from panel.clusters.tests.conftest import make_cluster_row


def _queries(client: Client, url: str, **kwargs: object) -> int:
    with CaptureQueriesContext(connection) as seen:
        response = client.get(url, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == 200, response.content
    return len(seen.captured_queries)


@pytest.mark.django_db
def test_the_api_list_asks_as_often_for_twelve_clusters_as_for_two(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    token = make_token(owner)
    for i in range(2):
        make_cluster_row(owner, f"few-{i}")
    _queries(api_client, "/v2/databases", headers=bearer(token))  # (a window row made once a cluster)
    few = _queries(api_client, "/v2/databases", headers=bearer(token))
    for i in range(10):
        make_cluster_row(owner, f"many-{i}")
    _queries(api_client, "/v2/databases", headers=bearer(token))
    many = _queries(api_client, "/v2/databases", headers=bearer(token))
    body = api_client.get("/v2/databases", headers=bearer(token)).json()
    assert len(body["databases"]) == 12
    assert many == few, (few, many)


@pytest.mark.django_db
def test_the_cluster_list_page_asks_as_often_for_twelve_clusters_as_for_two(
    owner_client: Client, owner: User
) -> None:
    for i in range(2):
        make_cluster_row(owner, f"few-{i}")
    _queries(owner_client, "/clusters/")
    few = _queries(owner_client, "/clusters/")
    for i in range(10):
        make_cluster_row(owner, f"many-{i}")
    _queries(owner_client, "/clusters/")
    many = _queries(owner_client, "/clusters/")
    assert many == few, (few, many)
