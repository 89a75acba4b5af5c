"""Creating and destroying clusters through the API: 201 with the cluster "creating" and its
provisioning queued on its node (a real Redis no worker reads), 204 on destroy with the teardown
queued; bad input answered with the right status and error body, and nothing created."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.api.tests.test_api_databases import assert_error
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.tests.conftest import make_cluster_row

Queued = Callable[[str], list[tuple[str, list]]]
NEW = {"name": "api-made", "engine": "pg", "version": "15", "size": "db-s-1vcpu-1gb", "num_nodes": 1}


def post(client: Client, token: str, body: object) -> object:
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post("/v2/databases", data=data, content_type="application/json", headers=bearer(token))


@pytest.mark.django_db
def test_a_cluster_is_created_and_its_provisioning_queued_on_its_node(
    api_client: Client, owner: User, make_token: MakeToken, queued_tasks: Queued, settings: object
) -> None:
    token = make_token(owner, Scope.CREATE, Scope.READ)
    response = post(api_client, token, {**NEW, "tags": ["ignored"], "region": None})
    assert response.status_code == 201, response.content
    database = response.json()["database"]
    assert database["name"] == "api-made" and database["status"] == "creating"
    assert database["engine"] == "pg" and database["size"] == "db-s-1vcpu-1gb" and database["num_nodes"] == 1
    assert database["region"] == settings.PANEL_NODE_NAME  # type: ignore[attr-defined]
    assert database["connection"]["password"] == ""  # no database:view_credentials
    cluster = Cluster.objects.get(pk=database["id"])
    assert cluster.owner == owner and cluster.status == ClusterStatus.CREATING
    assert queued_tasks(cluster.tasks_queue) == [("panel.clusters.tasks.provision", [str(cluster.pk)])]
    # It is then listed like any other.
    listed = api_client.get("/v2/databases", headers=bearer(token)).json()["databases"]
    assert [row["name"] for row in listed] == ["api-made"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "error_id", "words"),
    [
        ('{"name": "x", "engine": ', 400, "bad_request", "parse"),
        ({**NEW, "num_nodes": "two"}, 422, "unprocessable_entity", "num_nodes"),
        ({k: v for k, v in NEW.items() if k != "size"}, 422, "unprocessable_entity", "size"),
        ({**NEW, "engine": "mysql"}, 422, "database.engine_unsupported", "Only the engine 'pg'"),
        ({**NEW, "num_nodes": 4}, 422, "cluster.num_nodes_range", "1 to 3 nodes"),
        ({**NEW, "num_nodes": 3}, 422, "cluster.standbys_need_larger_plan", "2 GB of RAM or more"),
        ({**NEW, "size": "db-s-64vcpu-1tb"}, 422, "cluster.plan_unknown", "db-s-64vcpu-1tb"),
        ({**NEW, "region": "nyc1"}, 422, "database.region_unknown", "No region 'nyc1'"),
        ({**NEW, "name": "Not A Name"}, 422, "cluster.name_invalid", "lowercase"),
    ],
)
def test_bad_input_gets_its_status_and_creates_nothing(
    api_client: Client,
    owner: User,
    make_token: MakeToken,
    queued_tasks: Queued,
    body: object,
    status: int,
    error_id: str,
    words: str,
) -> None:
    token = make_token(owner, Scope.CREATE)
    error = assert_error(post(api_client, token, body), status, error_id)
    assert words.lower() in error["message"].lower()
    assert not Cluster.objects.exists()


@pytest.mark.django_db
def test_a_duplicate_name_or_a_missing_scope_creates_nothing(
    api_client: Client, owner: User, make_token: MakeToken, queued_tasks: Queued
) -> None:
    make_cluster_row(owner, name="api-made")
    error = assert_error(post(api_client, make_token(owner, Scope.CREATE), NEW), 409, "cluster.name_taken")
    assert "already have a cluster named" in error["message"]
    assert_error(post(api_client, make_token(owner, Scope.READ), {**NEW, "name": "other"}), 403, "forbidden")
    assert list(Cluster.objects.values_list("name", flat=True)) == ["api-made"]


@pytest.mark.django_db
def test_destroy_queues_the_teardown_and_another_accounts_cluster_is_a_404(
    api_client: Client, owner: User, other_user: User, make_token: MakeToken, queued_tasks: Queued
) -> None:
    mine = make_cluster_row(owner)
    theirs = make_cluster_row(other_user, name="theirs", port=26910, pooler_port=26911)
    token = make_token(owner, Scope.DELETE)
    assert_error(api_client.delete(f"/v2/databases/{theirs.pk}", headers=bearer(token)), 404, "not_found")
    theirs.refresh_from_db()
    assert theirs.status == ClusterStatus.ONLINE
    assert_error(
        api_client.delete(f"/v2/databases/{mine.pk}", headers=bearer(make_token(owner, Scope.READ))),
        403,
        "forbidden",
    )
    response = api_client.delete(f"/v2/databases/{mine.pk}", headers=bearer(token))
    assert response.status_code == 204 and response.content == b""
    mine.refresh_from_db()
    assert mine.status == ClusterStatus.DELETING
    assert queued_tasks(mine.tasks_queue) == [("panel.clusters.tasks.delete", [str(mine.pk)])]
