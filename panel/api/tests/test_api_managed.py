"""The managed service's extras through the API without a server behind the cluster: bad input
per operation is the API's error body with a code and changes nothing; tags, storage and rules
are checked before a cluster is made; the metrics credentials and the scrape endpoint keep each
tenant's figures its own (the attack replayed next to the legitimate scrape)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.api.tests.test_api_databases import assert_error
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.managed.models import Autoscale, ClusterTag, Maintenance, MetricsCredentials, ReplicationUser
from panel.managed.services import metrics

pytestmark = pytest.mark.django_db


def _put(client: Client, url: str, token: str, body: Any) -> Any:
    return client.put(url, json.dumps(body), content_type="application/json", headers=bearer(token))


@pytest.mark.parametrize(
    ("body", "error_id"),
    [
        ({"day": "someday", "hour": "14:00"}, "maintenance.day_invalid"),
        ({"day": "monday", "hour": "25:00"}, "maintenance.hour_invalid"),
        ({"day": "monday", "hour": "14:30"}, "maintenance.hour_invalid"),
        ({"day": "monday", "hour": "14:00", "color": "red"}, "unprocessable_entity"),
        ({"day": 3, "hour": "14:00"}, "unprocessable_entity"),
    ],
)
def test_a_bad_maintenance_window_is_refused_and_changes_nothing(
    owner: User, make_token: MakeToken, body: dict[str, Any], error_id: str
) -> None:
    cluster = make_cluster_row(owner)
    token = make_token(owner, Scope.READ, Scope.UPDATE)
    response = _put(Client(), f"/v2/databases/{cluster.pk}/maintenance", token, body)
    assert_error(response, 422, error_id)
    assert not Maintenance.objects.filter(cluster=cluster).exists()
    ok = _put(Client(), f"/v2/databases/{cluster.pk}/maintenance", token, {"day": "Friday", "hour": "02:00"})
    assert ok.status_code == 204
    row = Maintenance.objects.get(cluster=cluster)
    assert (row.day, row.hour) == ("friday", 2)


@pytest.mark.parametrize(
    "storage",
    [
        {"enabled": True, "threshold_percent": 0},
        {"enabled": True, "threshold_percent": 100},
        {"enabled": "maybe"},
        {"enabled": True, "increment_gib": -1},
        {"enabled": True, "speed": 3},
    ],
)
def test_a_bad_autoscale_rule_is_refused_and_changes_nothing(
    owner: User, make_token: MakeToken, storage: dict[str, Any]
) -> None:
    cluster = make_cluster_row(owner)
    token = make_token(owner, Scope.READ, Scope.UPDATE)
    response = _put(Client(), f"/v2/databases/{cluster.pk}/autoscale", token, {"storage": storage})
    assert_error(response, 422, "unprocessable_entity")
    assert not Autoscale.objects.filter(cluster=cluster, enabled=True).exists()


def test_install_update_with_nothing_pending_restarts_nothing(owner: User, make_token: MakeToken) -> None:
    cluster = make_cluster_row(owner)
    token = make_token(owner, Scope.UPDATE)
    response = Client().put(f"/v2/databases/{cluster.pk}/install_update", headers=bearer(token))
    assert response.status_code == 204
    cluster.refresh_from_db()
    assert cluster.status == "online"
    assert not cluster.events.filter(kind="update-requested").exists()


@pytest.mark.parametrize(
    ("extra", "error_id"),
    [
        ({"tags": ["ok", "not a tag!"]}, "tag.invalid"),
        ({"tags": "prod"}, "unprocessable_entity"),
        ({"storage_size_mib": 25600}, "database.storage_not_offered"),
        ({"storage_size_mib": 12345}, "database.storage_not_offered"),
        ({"rules": [{"type": "droplet", "value": "1234"}]}, "firewall.rule_type_unsupported"),
        ({"rules": [{"type": "ip_addr", "value": "not-an-address"}]}, "firewall.source_invalid"),
    ],
)
def test_create_checks_tags_storage_and_rules_before_making_anything(
    owner: User, make_token: MakeToken, extra: dict[str, Any], error_id: str
) -> None:
    token = make_token(owner, Scope.CREATE)
    body = {"name": "new-db", "engine": "pg", "size": "db-s-1vcpu-1gb", "num_nodes": 1, **extra}
    response = Client().post(
        "/v2/databases", json.dumps(body), content_type="application/json", headers=bearer(token)
    )
    got = json.loads(response.content)
    assert response.status_code == 422, got
    assert got["id"] == error_id, got
    assert not Cluster.objects.filter(name="new-db").exists()
    assert not ClusterTag.objects.exists()


def test_tags_filter_the_list(owner: User, make_token: MakeToken) -> None:
    tagged = make_cluster_row(owner, name="db-tagged")
    make_cluster_row(owner, name="db-plain", port=26910, pooler_port=26911)
    ClusterTag.objects.create(cluster=tagged, name="prod")
    token = make_token(owner)
    got = json.loads(Client().get("/v2/databases?tag_name=prod", headers=bearer(token)).content)
    assert [db["name"] for db in got["databases"]] == ["db-tagged"]
    assert got["databases"][0]["tags"] == ["prod"]
    everything = json.loads(Client().get("/v2/databases", headers=bearer(token)).content)
    assert {db["name"] for db in everything["databases"]} == {"db-tagged", "db-plain"}


def test_bad_metrics_credentials_are_refused_and_change_nothing(owner: User, make_token: MakeToken) -> None:
    token = make_token(owner, Scope.UPDATE, Scope.VIEW_CREDENTIALS)
    before = json.loads(Client().get("/v2/databases/metrics/credentials", headers=bearer(token)).content)
    for body, error_id in [
        ({"credentials": {"basic_auth_password": "short"}}, "metrics.password_invalid"),
        ({"credentials": {"basic_auth_username": "a b"}}, "metrics.username_invalid"),
        ({"credentials": {"basic_auth_username": "okname", "extra": 1}}, "unprocessable_entity"),
        ({"credentials": {"basic_auth_username": 5}}, "unprocessable_entity"),
    ]:
        assert_error(_put(Client(), "/v2/databases/metrics/credentials", token, body), 422, error_id)
    after = json.loads(Client().get("/v2/databases/metrics/credentials", headers=bearer(token)).content)
    assert after == before
    assert (
        MetricsCredentials.objects.get(account=owner).password_encrypted
        != before["credentials"]["credentials"]["basic_auth_password"]
    )  # encrypted at rest


def _basic(username: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()}


def test_a_tenants_metrics_credentials_do_not_open_another_tenants_cluster(
    owner: User, other_user: User
) -> None:
    mine = make_cluster_row(owner, name="db-mine")
    theirs = make_cluster_row(other_user, name="db-theirs", port=26920, pooler_port=26921)
    metrics.set_credentials(owner, "owner-scraper", "owner-password-1")
    metrics.set_credentials(other_user, "other-scraper", "other-password-1")
    # The attack: my credentials, the other tenant's cluster id.
    attack = Client().get(
        f"/metrics/clusters/{theirs.pk}", headers=_basic("owner-scraper", "owner-password-1")
    )
    assert attack.status_code == 404 and b"pgpanel_" not in attack.content
    # Wrong or no credentials: 401 asking for basic auth.
    for headers in ({}, _basic("owner-scraper", "wrong-password-1"), {"Authorization": "Basic !!"}):
        refused = Client().get(f"/metrics/clusters/{mine.pk}", headers=headers)
        assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Basic")
    # The legitimate scrapes: each tenant its own cluster.
    assert (
        Client()
        .get(f"/metrics/clusters/{mine.pk}", headers=_basic("owner-scraper", "owner-password-1"))
        .status_code
        == 200
    )
    assert (
        Client()
        .get(f"/metrics/clusters/{theirs.pk}", headers=_basic("other-scraper", "other-password-1"))
        .status_code
        == 200
    )


def test_the_cluster_object_is_complete(owner: User, make_token: MakeToken) -> None:
    cluster = make_cluster_row(owner)
    ClusterTag.objects.create(cluster=cluster, name="prod")
    cluster.trusted_sources.create(value="10.0.0.0/8")
    token = make_token(owner, Scope.READ)
    got = json.loads(Client().get(f"/v2/databases/{cluster.pk}", headers=bearer(token)).content)["database"]
    assert [(u["name"], u["role"], u["password"]) for u in got["users"]] == [
        ("doadmin", "primary", ""),
        ("app", "normal", ""),
    ]
    assert got["db_names"] == ["defaultdb", "appdb"]
    assert got["tags"] == ["prod"]
    assert [(r["type"], r["value"]) for r in got["rules"]] == [("ip_addr", "10.0.0.0/8")]
    assert got["storage_size_mib"] == 38 * 1024  # db-s-2vcpu-4gb's disk
    assert got["num_nodes"] == 1 and got["standby_connection"] is None
    assert got["private_connection"] == got["connection"]
    assert got["maintenance_window"] == {
        "day": "sunday",
        "hour": "03:00:00",
        "pending": False,
        "description": [],
    }
    assert got["semantic_version"] == "15" and got["version_end_of_life"] == "2027-11-11"
    assert got["metrics_endpoints"] == [{"host": "testserver", "port": 80}]
    assert got["project_id"] is None and got["private_network_uuid"] is None


def test_replication_on_an_attached_server_is_refused_and_changes_nothing(
    owner: User, make_token: MakeToken
) -> None:
    cluster = make_cluster_row(owner, kind="external")
    token = make_token(owner, Scope.UPDATE)
    response = _put(
        Client(), f"/v2/databases/{cluster.pk}/users/app", token, {"settings": {"pg_allow_replication": True}}
    )
    assert_error(response, 422, "cluster.attached_not_managed")
    assert not ReplicationUser.objects.exists()
