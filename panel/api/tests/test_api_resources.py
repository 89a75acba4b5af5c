"""A cluster's pools, users, databases, CA and events through the API, on a real cluster with a
real PgBouncer: the managed service's statuses and shapes, a pool's URI that really connects,
and bad input answered with the right status and body while nothing changes."""

from __future__ import annotations

import base64
import json
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.api.tests.test_api_databases import assert_error
from panel.clusters.models import Cluster
from panel.pools.models import ConnectionPool

ALL = (Scope.READ, Scope.CREATE, Scope.UPDATE, Scope.DELETE, Scope.VIEW_CREDENTIALS)


class Api:
    """The test client with a token and the cluster's base path."""

    def __init__(self, client: Client, token: str, cluster: Cluster) -> None:
        self.client, self.token, self.base = client, token, f"/v2/databases/{cluster.pk}"

    def call(self, method: str, path: str, body: object = None, token: str | None = None) -> Any:
        kwargs: dict[str, Any] = {"headers": bearer(token or self.token)}
        if body is not None:
            kwargs["data"] = body if isinstance(body, str) else json.dumps(body)
            kwargs["content_type"] = "application/json"
        return getattr(self.client, method)(self.base + path, **kwargs)


def test_pools_users_dbs_ca_and_events_on_a_real_cluster(
    api_client: Client, local_cluster: Cluster, owner: User, other_user: User, make_token: MakeToken
) -> None:
    api = Api(api_client, make_token(owner, *ALL), local_cluster)

    # dbs: add (201), get, list; a duplicate is a 409 and changes nothing.
    response = api.call("post", "/dbs", {"name": "appdb"})
    assert response.status_code == 201, response.content
    assert response.json() == {"db": {"name": "appdb"}}
    assert api.call("get", "/dbs/appdb").json() == {"db": {"name": "appdb"}}
    listed = api.call("get", "/dbs").json()
    assert [db["name"] for db in listed["dbs"]] == ["defaultdb", "appdb"] and listed["meta"]["total"] == 2
    assert_error(api.call("post", "/dbs", {"name": "appdb"}), 409, "database.name_taken")
    assert_error(api.call("get", "/dbs/nodb"), 404, "not_found")

    # users: add (201, password shown with view_credentials), reset_auth (200, a new password),
    # update (201: the client takes only 201), replication granted and taken back.
    response = api.call("post", "/users", {"name": "app"})
    assert response.status_code == 201, response.content
    created = response.json()["user"]
    assert created["name"] == "app" and created["role"] == "normal" and len(created["password"]) >= 16
    admin = api.call("get", "/users/doadmin").json()["user"]
    assert admin["role"] == "primary"
    response = api.call("post", "/users/app/reset_auth", {})
    assert response.status_code == 200, response.content
    new_password = response.json()["user"]["password"]
    assert new_password and new_password != created["password"]
    response = api.call("put", "/users/app", {"settings": {"pg_allow_replication": False}})
    assert response.status_code == 201 and response.json()["user"]["name"] == "app"
    # Replication, granted (logical only: tests/security/test_guard_replication.py) and taken back.
    for allow in (True, False):
        response = api.call("put", "/users/app", {"settings": {"pg_allow_replication": allow}})
        assert response.status_code == 201, response.content
        assert response.json()["user"]["settings"] == {"pg_allow_replication": allow}
    assert_error(api.call("post", "/users", {"name": "app"}), 409, "user.name_taken")

    # pools: add (201) with an inbound user (""), its connection on the pooler port with the
    # pool's name as database, and that URI really connects through PgBouncer.
    response = api.call(
        "post", "/pools", {"name": "web", "mode": "transaction", "size": 10, "db": "appdb", "user": ""}
    )
    assert response.status_code == 201, response.content
    pool = response.json()["pool"]
    assert pool["user"] == "" and pool["db"] == "appdb" and pool["size"] == 10
    conn = pool["connection"]
    assert conn["port"] == local_cluster.pooler_port and conn["database"] == "web" and conn["ssl"] is True
    assert conn["uri"].endswith("/web?sslmode=require") and conn["password"]
    with psycopg.connect(conn["uri"], connect_timeout=10) as client:
        assert client.execute("SELECT current_database(), current_user").fetchone() == ("appdb", "doadmin")

    # update: a full replacement, 204 with no body; user left out = inbound user again.
    response = api.call("put", "/pools/web", {"mode": "session", "size": 12, "db": "appdb", "user": "app"})
    assert response.status_code == 204 and response.content == b""
    assert api.call("get", "/pools/web").json()["pool"]["user"] == "app"
    response = api.call("put", "/pools/web", {"mode": "session", "size": 12, "db": "appdb"})
    assert response.status_code == 204
    shown = api.call("get", "/pools/web").json()["pool"]
    assert (shown["user"], shown["mode"], shown["size"]) == ("", "session", 12)

    # Bad input: over the budget (a 1 GB plan has 22 for pools), a duplicate, a missing field,
    # malformed JSON, a wrong type: each the right status and body, and the pool as it was.
    over = api.call("post", "/pools", {"name": "big", "mode": "transaction", "size": 50, "db": "appdb"})
    # A refusal's id is its code, the one its form error comes from (issue 18).
    assert "does not fit" in assert_error(over, 422, "pool.over_budget")["message"]
    too_big = api.call("put", "/pools/web", {"mode": "session", "size": 500, "db": "appdb"})
    assert_error(too_big, 422, "pool.over_budget")
    dup = {"name": "web", "mode": "transaction", "size": 1, "db": "appdb"}
    assert_error(api.call("post", "/pools", dup), 409, "pool.name_taken")
    assert (
        "db"
        in assert_error(
            api.call("post", "/pools", {"name": "x", "mode": "transaction", "size": 1}),
            422,
            "unprocessable_entity",
        )["message"]
    )
    assert_error(api.call("post", "/pools", "{not json"), 400, "bad_request")
    wrong_type = {"name": "x", "mode": "transaction", "size": "ten", "db": "appdb"}
    assert (
        "size" in assert_error(api.call("post", "/pools", wrong_type), 422, "unprocessable_entity")["message"]
    )
    assert list(ConnectionPool.objects.values_list("name", "size")) == [("web", 12)]

    # A token without the scope, and another account: 403 / 404, nothing changed.
    reader = make_token(owner, Scope.READ)
    assert_error(api.call("delete", "/pools/web", token=reader), 403, "forbidden")
    assert api.call("get", "/pools/web", token=reader).json()["pool"]["connection"]["password"] == ""
    outsider = make_token(other_user, *ALL)
    for method, path in (("get", "/pools"), ("delete", "/pools/web"), ("get", "/users/app"), ("get", "/ca")):
        assert_error(api.call(method, path, token=outsider), 404, "not_found")
    assert ConnectionPool.objects.filter(name="web").exists()

    # CA: base64 of the PEM that signed the server's certificate.
    ca = api.call("get", "/ca").json()["ca"]["certificate"]
    assert base64.b64decode(ca).decode() == local_cluster.ca_certificate
    assert "BEGIN CERTIFICATE" in local_cluster.ca_certificate

    # A pool's database or user cannot be deleted under it; after the pool goes, they can.
    assert_error(api.call("delete", "/dbs/appdb"), 422, "pool.database_in_use")
    assert api.call("delete", "/pools/web").status_code == 204
    assert api.call("get", "/pools").json()["pools"] == []
    assert api.call("delete", "/users/app").status_code == 204
    assert api.call("delete", "/dbs/appdb").status_code == 204
    assert_error(api.call("delete", "/users/doadmin"), 422, "user.admin_protected")
    assert_error(api.call("get", "/users/app"), 404, "not_found")

    # events: newest first, with the managed service's names.
    events = api.call("get", "/events?per_page=50").json()
    kinds = [event["event_type"] for event in events["events"]]
    assert kinds[:3] == ["database-deleted", "user-deleted", "pool-deleted"]
    assert events["meta"]["total"] >= len(kinds) and events["events"][0]["cluster_name"] == local_cluster.name


@pytest.mark.django_db
def test_a_cluster_that_does_not_exist_is_a_404_on_every_sub_resource(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    api = Api(api_client, make_token(owner, *ALL), Cluster(pk="00000000-0000-0000-0000-000000000000"))
    for method, path, body in (
        ("get", "/pools", None),
        ("post", "/pools", {"name": "p", "mode": "transaction", "size": 1, "db": "defaultdb"}),
        ("put", "/pools/p", {"mode": "transaction", "size": 1, "db": "defaultdb"}),
        ("get", "/users", None),
        ("post", "/users/app/reset_auth", {}),
        ("post", "/dbs", {"name": "x"}),
        ("get", "/ca", None),
        ("get", "/events", None),
    ):
        assert_error(api.call(method, path, body), 404, "not_found")
