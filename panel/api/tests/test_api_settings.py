"""PUT /v2/databases/{id}/resize and GET/PATCH /v2/databases/{id}/config: the managed service's
shapes, the scopes, the owner only, every refusal in the error shape with nothing changed."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.api.tests.test_api_databases import assert_error
from panel.clusters.engine import postgres
from panel.clusters.lib import tunables
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.tests.conftest import connect_as_client, make_cluster_row

Queued = Callable[[str], list[tuple[str, list]]]


def _send(method: Callable[..., object], token: str, cluster: Cluster, path: str, body: object) -> object:
    """``body`` as JSON to the database's ``path`` with the token."""
    return method(
        f"/v2/databases/{cluster.pk}/{path}",
        data=json.dumps(body),
        content_type="application/json",
        headers=bearer(token),
    )


def put_resize(client: Client, token: str, cluster: Cluster, body: object) -> object:
    return _send(client.put, token, cluster, "resize", body)


def patch_config(client: Client, token: str, cluster: Cluster, body: object) -> object:
    return _send(client.patch, token, cluster, "config", body)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "task"),
    [
        # Another size: a resize, queued on the cluster's node.
        ({"size": "db-s-4vcpu-8gb", "num_nodes": 1}, ("panel.clusters.tasks.resize", "db-s-4vcpu-8gb")),
        # The same size with another number of nodes: the change of members (the node changes it).
        ({"size": "db-s-2vcpu-4gb", "num_nodes": 3}, ("panel.clusters.tasks.member_count", 3)),
    ],
)
def test_a_resize_is_accepted_queued_and_the_database_then_says_resizing(
    api_client: Client, owner: User, make_token: MakeToken, queued_tasks: Queued, body: dict, task: tuple
) -> None:
    cluster = make_cluster_row(owner)
    token = make_token(owner, Scope.UPDATE, Scope.READ)
    response = put_resize(api_client, token, cluster, body)
    assert response.status_code == 202, response.content
    assert response.content == b""
    database = api_client.get(f"/v2/databases/{cluster.pk}", headers=bearer(token)).json()["database"]
    assert database["status"] == "resizing"
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RESIZING and cluster.num_nodes == 1
    name, argument = task
    assert queued_tasks(cluster.tasks_queue) == [(name, [str(cluster.pk), argument])]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "error_id", "words"),
    [
        (
            {"size": "db-s-4vcpu-8gb", "num_nodes": 2},
            422,
            "resize.one_change_at_a_time",
            "one at a time",
        ),
        ({"size": "db-s-2vcpu-4gb", "num_nodes": 4}, 422, "cluster.num_nodes_range", "1 to 3 nodes"),
        ({"size": "db-s-2vcpu-4gb", "num_nodes": 0}, 422, "cluster.num_nodes_range", "not 0"),
        ({"size": "db-s-64vcpu-1tb"}, 422, "cluster.plan_unknown", "db-s-64vcpu-1tb"),
        ({"size": "db-s-2vcpu-4gb"}, 422, "resize.same_plan", "already on plan"),
        ({"num_nodes": 1}, 422, "unprocessable_entity", "size"),
    ],
)
def test_a_refused_resize_changes_nothing(
    api_client: Client,
    owner: User,
    make_token: MakeToken,
    body: object,
    status: int,
    error_id: str,
    words: str,
) -> None:
    cluster = make_cluster_row(owner)
    error = assert_error(
        put_resize(api_client, make_token(owner, Scope.UPDATE), cluster, body), status, error_id
    )
    assert words in error["message"]
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ONLINE and cluster.plan_slug == "db-s-2vcpu-4gb"


@pytest.mark.django_db
def test_scopes_and_ownership(
    api_client: Client, owner: User, other_user: User, make_token: MakeToken
) -> None:
    cluster = make_cluster_row(owner)
    reader = make_token(owner, Scope.READ)
    assert_error(put_resize(api_client, reader, cluster, {"size": "db-s-4vcpu-8gb"}), 403, "forbidden")
    assert_error(patch_config(api_client, reader, cluster, {"config": {"work_mem": 8}}), 403, "forbidden")
    outsider = make_token(other_user, Scope.READ, Scope.UPDATE)
    assert_error(put_resize(api_client, outsider, cluster, {"size": "db-s-4vcpu-8gb"}), 404, "not_found")
    assert_error(
        api_client.get(f"/v2/databases/{cluster.pk}/config", headers=bearer(outsider)), 404, "not_found"
    )
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ONLINE and cluster.config == {}


@pytest.mark.django_db
def test_the_config_has_every_setting_in_its_type(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    cluster = make_cluster_row(owner, config={"work_mem": 12})
    response = api_client.get(f"/v2/databases/{cluster.pk}/config", headers=bearer(make_token(owner)))
    assert response.status_code == 200
    config = response.json()["config"]
    assert set(config) == set(tunables.TUNABLES_BY_NAME)
    assert config["work_mem"] == 12 and config["jit"] is True and config["log_min_duration_statement"] == -1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "words", "error_id"),
    [
        ({"config": {"work_mem": "16MB"}}, "work_mem: must be a whole number of MB", "config.not_a_number"),
        ({"config": {"work_mem": 0}}, "between 1 and 1024", "config.out_of_range"),
        (
            {"config": {"shared_preload_libraries": "x", "archive_command": "sh"}},
            "archive_command, shared_preload",
            "config.unknown_setting",
        ),
        ({"config": "work_mem=16"}, "config", "unprocessable_entity"),
        ({"work_mem": 16}, "config", "unprocessable_entity"),
    ],
)
def test_a_bad_config_is_refused_and_changes_nothing(
    api_client: Client, owner: User, make_token: MakeToken, body: object, words: str, error_id: str
) -> None:
    cluster = make_cluster_row(owner)
    # A refusal of the service carries its code as the id; the schema's own checks the status's.
    error = assert_error(
        patch_config(api_client, make_token(owner, Scope.UPDATE), cluster, body), 422, error_id
    )
    assert words in error["message"]
    cluster.refresh_from_db()
    assert cluster.config == {}


@pytest.mark.integration
def test_a_patched_work_mem_reaches_new_sessions_without_a_restart(
    api_client: Client, owner: User, make_token: MakeToken, local_cluster: Cluster
) -> None:
    cluster = local_cluster
    pid = postgres.postmaster_pid(cluster.pgdata)
    token = make_token(owner, Scope.UPDATE)
    response = patch_config(api_client, token, cluster, {"config": {"work_mem": 48, "track_io_timing": "on"}})
    assert response.status_code == 200, response.content
    assert response.json()["config"]["work_mem"] == 48
    with connect_as_client(cluster) as conn:
        assert conn.execute("SHOW work_mem").fetchone() == ("48MB",)
        assert conn.execute("SHOW track_io_timing").fetchone() == ("on",)
    assert postgres.postmaster_pid(cluster.pgdata) == pid
