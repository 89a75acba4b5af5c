"""/v2/databases: bearer tokens, scopes, ownership, the managed service's shapes and errors."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.clusters.models import Cluster
from panel.clusters.services import available_versions
from panel.clusters.tests.conftest import ADMIN_PASSWORD, make_cluster_row


def assert_error(response: object, status: int, error_id: str) -> dict[str, str]:
    assert response.status_code == status, response.content  # type: ignore[attr-defined]
    body = json.loads(response.content)  # type: ignore[attr-defined]
    assert set(body) == {"id", "message", "request_id"}
    assert body["id"] == error_id
    assert body["message"]
    assert body["request_id"] == response["x-request-id"]  # type: ignore[index]
    return body


@pytest.mark.parametrize(
    "header", [{}, {"Authorization": "Bearer pgp_000000000000_nope"}, {"Authorization": "Basic eDp5"}]
)
def test_it_needs_a_valid_token(api_client: Client, owner: User, header: dict[str, str]) -> None:
    make_cluster_row(owner)
    response = api_client.get("/v2/databases", headers=header)
    assert_error(response, 401, "unauthorized")


def test_a_token_without_the_scope_is_forbidden(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    token = make_token(owner, Scope.CREATE)
    assert_error(api_client.get("/v2/databases", headers=bearer(token)), 403, "forbidden")
    assert_error(api_client.get("/v2/databases/options", headers=bearer(token)), 403, "forbidden")


def test_it_lists_the_owners_clusters_only(
    api_client: Client, owner: User, other_user: User, make_token: MakeToken
) -> None:
    mine = make_cluster_row(owner, "mine")
    make_cluster_row(other_user, "theirs")
    response = api_client.get("/v2/databases", headers=bearer(make_token(owner)))
    assert response.status_code == 200
    assert response["x-request-id"]
    body = response.json()
    assert [db["name"] for db in body["databases"]] == ["mine"]
    assert body["meta"] == {"total": 1}
    assert body["links"] == {"pages": {}}
    db = body["databases"][0]
    assert db["id"] == str(mine.pk)
    assert (db["engine"], db["version"], db["status"], db["size"], db["num_nodes"]) == (
        "pg",
        "15",
        "online",
        "db-s-2vcpu-4gb",
        1,
    )
    assert db["region"] == "local"
    assert db["connection"]["password"] == ""
    assert ADMIN_PASSWORD not in response.content.decode()


def test_staff_see_every_cluster(
    api_client: Client, owner: User, staff_user: User, make_token: MakeToken
) -> None:
    make_cluster_row(owner, "alices")
    body = api_client.get("/v2/databases", headers=bearer(make_token(staff_user))).json()
    assert [db["name"] for db in body["databases"]] == ["alices"]


def test_another_accounts_cluster_is_not_found(
    api_client: Client, owner: User, other_user: User, make_token: MakeToken
) -> None:
    cluster = make_cluster_row(owner)
    token = make_token(other_user, *Scope.values)
    body = assert_error(
        api_client.get(f"/v2/databases/{cluster.pk}", headers=bearer(token)), 404, "not_found"
    )
    assert "forbidden" not in body["message"].lower()


def test_it_gets_one_cluster_with_credentials_only_with_that_scope(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    cluster = make_cluster_row(owner)
    plain = api_client.get(f"/v2/databases/{cluster.pk}", headers=bearer(make_token(owner))).json()
    assert plain["database"]["connection"]["password"] == ""
    assert plain["database"]["connection"]["uri"] == (
        f"postgresql://doadmin@{plain['database']['connection']['host']}:26900/defaultdb?sslmode=require"
    )
    token = make_token(owner, Scope.READ, Scope.VIEW_CREDENTIALS)
    full = api_client.get(f"/v2/databases/{cluster.pk}", headers=bearer(token)).json()["database"][
        "connection"
    ]
    assert full["password"] == ADMIN_PASSWORD
    assert f"doadmin:{ADMIN_PASSWORD}@" in full["uri"]
    assert (full["protocol"], full["user"], full["database"], full["port"], full["ssl"]) == (
        "postgresql",
        "doadmin",
        "defaultdb",
        26900,
        True,
    )


def test_a_cluster_being_made_has_a_connection_object(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    cluster = Cluster.objects.create(owner=owner, name="new", version="16", plan_slug="db-s-1vcpu-1gb")
    db = api_client.get(f"/v2/databases/{cluster.pk}", headers=bearer(make_token(owner))).json()["database"]
    assert db["status"] == "creating"
    assert db["connection"]["user"] == "doadmin"
    assert db["connection"]["database"] == "defaultdb"


def test_it_paginates(api_client: Client, owner: User, make_token: MakeToken) -> None:
    for i in range(5):
        make_cluster_row(owner, f"db-{i}")
    token = make_token(owner)
    body = api_client.get("/v2/databases?page=2&per_page=2&unknown=1", headers=bearer(token)).json()
    assert [db["name"] for db in body["databases"]] == ["db-2", "db-3"]
    assert body["meta"]["total"] == 5
    pages = body["links"]["pages"]
    assert set(pages) == {"first", "prev", "next", "last"}
    assert pages["next"].endswith("/v2/databases?page=3&per_page=2")
    assert pages["last"].endswith("page=3&per_page=2")
    last = api_client.get("/v2/databases?page=3&per_page=2", headers=bearer(token)).json()
    assert [db["name"] for db in last["databases"]] == ["db-4"]
    assert set(last["links"]["pages"]) == {"first", "prev"}


def test_a_page_far_past_the_last_is_empty(api_client: Client, owner: User, make_token: MakeToken) -> None:
    # Found by schemathesis: an offset past the database's integer was a 500.
    make_cluster_row(owner)
    response = api_client.get(
        "/v2/databases?page=5782981586935445504&per_page=174", headers=bearer(make_token(owner))
    )
    assert response.status_code == 200
    body = response.json()
    assert body["databases"] == [] and body["meta"]["total"] == 1
    assert set(body["links"]["pages"]) == {"first", "prev"}


def test_a_bad_page_is_unprocessable(api_client: Client, owner: User, make_token: MakeToken) -> None:
    body = assert_error(
        api_client.get("/v2/databases?page=0", headers=bearer(make_token(owner))), 422, "unprocessable_entity"
    )
    assert "page" in body["message"]


def test_options_lists_versions_and_plans(api_client: Client, owner: User, make_token: MakeToken) -> None:
    body = api_client.get("/v2/databases/options", headers=bearer(make_token(owner))).json()
    pg = body["options"]["pg"]
    assert pg["versions"] == sorted(available_versions(), key=int)
    assert "db-s-1vcpu-1gb" in pg["layouts"][0]["sizes"]
    assert pg["layouts"][0]["num_nodes"] == 1
    assert [v["version"] for v in body["version_availability"]["pg"]] == pg["versions"]


def test_errors_outside_the_operations_keep_the_shape(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    token = make_token(owner)
    # A POST with a body that is not JSON, where no POST exists yet: refused in the API's shape,
    # never by CSRF (the client enforces it as a browser would).
    response = api_client.post(
        "/v2/databases/options", data="{not json", content_type="application/json", headers=bearer(token)
    )
    assert_error(response, 405, "bad_request")
    assert response["Allow"] == "GET"
    assert_error(api_client.get("/v2/nothing-here", headers=bearer(token)), 404, "not_found")
    assert_error(api_client.get("/v2/databases/not-a-uuid", headers=bearer(token)), 404, "not_found")


def test_the_openapi_schema_is_served(api_client: Client) -> None:
    response = api_client.get("/v2/openapi.json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    assert {"/v2/databases", "/v2/databases/options", "/v2/databases/{database_id}"} <= set(schema["paths"])
    assert response["x-request-id"]
    # A read documents its 422 too (page=abc): found undocumented by schemathesis.
    assert "422" in schema["paths"]["/v2/databases"]["get"]["responses"]
    # The docs page is the panel's, with its own Swagger UI, not ninja's from a CDN (test_views_docs.py).
    assert b"/static/vendor/swagger-ui/" in api_client.get("/v2/docs").content


@pytest.mark.integration
def test_the_connection_object_reaches_the_running_cluster(
    api_client: Client, local_cluster: Cluster, make_token: MakeToken
) -> None:
    import psycopg

    token = make_token(local_cluster.owner, Scope.READ, Scope.VIEW_CREDENTIALS)
    conn = api_client.get(f"/v2/databases/{local_cluster.pk}", headers=bearer(token)).json()["database"][
        "connection"
    ]
    assert conn["port"] == local_cluster.port
    with psycopg.connect(conn["uri"], connect_timeout=5) as pg:
        assert pg.execute("SELECT current_user").fetchone() == ("doadmin",)
