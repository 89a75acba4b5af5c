"""Who may see pools: every pools page, partial and action answers 404 to outsiders, changes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import ADMIN_PASSWORD, make_cluster_row
from panel.pools.models import ConnectionPool

CLUSTER_GETS = ["pools:list", "pools:stats"]
POOL_GETS = [
    "pools:detail",
    "pools:delete",
    "pools:connection",
    "pools:connection-reveal",
    "pools:connection-secret",
]
NEW_POOL = {"name": "intruder", "database": "appdb", "user": "", "mode": "session", "size": "5"}
CHANGE = {"database": "defaultdb", "user": "app", "mode": "statement", "size": "7"}


@pytest.fixture
def cluster_row(owner) -> Cluster:
    """A 4 GB-plan cluster row (97 connections for pools); no PostgreSQL or PgBouncer behind it."""
    return make_cluster_row(owner)


@pytest.fixture
def pool(cluster_row: Cluster) -> ConnectionPool:
    return ConnectionPool.objects.create(
        cluster=cluster_row, name="test-pool", database="appdb", user="", mode="transaction", size=10
    )


def _pool_url(name: str, pool: ConnectionPool) -> str:
    return reverse(name, kwargs={"cluster_id": pool.cluster_id, "pool_id": pool.pk})


def _unchanged(pool: ConnectionPool) -> None:
    assert list(ConnectionPool.objects.values_list("name", "database", "user", "mode", "size")) == [
        ("test-pool", "appdb", "", "transaction", 10)
    ]


@pytest.mark.parametrize("name", CLUSTER_GETS)
def test_it_404s_for_outsider_on_every_cluster_level_pools_url(other_client, pool, name):
    response = other_client.get(reverse(name, args=[pool.cluster_id]), headers={"HX-Request": "true"})
    assert response.status_code == 404


@pytest.mark.parametrize("name", POOL_GETS)
def test_it_404s_for_outsider_on_every_pool_page_and_partial(other_client, pool, name):
    response = other_client.get(_pool_url(name, pool), {"format": "uri", "user": "doadmin"})
    assert response.status_code == 404
    assert ADMIN_PASSWORD.encode() not in response.content


@pytest.mark.parametrize(
    ("name", "data"),
    [("pools:edit", CHANGE), ("pools:delete", {})],
)
def test_outsider_posts_404_and_change_nothing(other_client, pool, name, data):
    response = other_client.post(_pool_url(name, pool), data, headers={"HX-Request": "true"})
    assert response.status_code == 404
    _unchanged(pool)


def test_outsider_cannot_create_a_pool_in_someone_elses_cluster(other_client, pool):
    response = other_client.post(reverse("pools:create", args=[pool.cluster_id]), NEW_POOL)
    assert response.status_code == 404
    _unchanged(pool)


def test_a_pool_is_only_reachable_under_its_own_cluster(owner_client, owner, pool):
    second = make_cluster_row(owner, "db-second", port=26910, pooler_port=26911)
    url = reverse("pools:detail", kwargs={"cluster_id": second.pk, "pool_id": pool.pk})
    assert owner_client.get(url).status_code == 404
    assert owner_client.post(reverse("pools:delete", args=[second.pk, pool.pk])).status_code == 404
    _unchanged(pool)


def test_anonymous_visitors_are_sent_to_login(client, pool):
    response = client.get(reverse("pools:list", args=[pool.cluster_id]))
    assert response.status_code == 302
    assert response.url.startswith("/login/")


@pytest.mark.parametrize("client_name", ["owner_client", "other_client"])
def test_the_create_and_edit_actions_answer_only_post(request, pool, client_name):
    client = request.getfixturevalue(client_name)
    for url in (reverse("pools:create", args=[pool.cluster_id]), _pool_url("pools:edit", pool)):
        response = client.get(url)
        assert response.status_code == 405, url
        assert response["Allow"] == "POST"
    _unchanged(pool)
