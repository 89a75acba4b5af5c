"""/v2/databases/{id}/firewall: the managed service's shapes (pydo's list_firewall_rules and
update_firewall_rules), 204 on a PUT that replaces every rule on a real cluster, and every refusal
(a type other than ip_addr, a bad value, a missing scope, another account's cluster) answered in
the error shape with nothing changed: neither the rows nor pg_hba.conf."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.api.tests.test_api_databases import assert_error
from panel.clusters.models import Cluster, TrustedSource
from panel.clusters.tests.conftest import make_cluster_row
from tests.fixtures.clusters import module_cluster

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def url(cluster: Cluster | str) -> str:
    return f"/v2/databases/{getattr(cluster, 'pk', cluster)}/firewall"


def put(client: Client, cluster: Cluster | str, token: str, body: object) -> object:
    data = body if isinstance(body, str) else json.dumps(body)
    return client.put(url(cluster), data=data, content_type="application/json", headers=bearer(token))


def rules(*values: str, kind: str = "ip_addr") -> dict[str, list[dict[str, str]]]:
    return {"rules": [{"type": kind, "value": value} for value in values]}


def values_of(cluster: Cluster) -> list[str]:
    return list(cluster.trusted_sources.order_by("created_at", "value").values_list("value", flat=True))


# --- on cluster rows (no server): shapes and refusals -------------------------------------------


@pytest.mark.django_db
def test_list_answers_the_rules_in_the_managed_services_shape(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    cluster = make_cluster_row(owner)
    token = make_token(owner)
    assert api_client.get(url(cluster), headers=bearer(token)).json() == {"rules": []}

    TrustedSource.objects.create(cluster=cluster, value="10.99.0.0/16")
    TrustedSource.objects.create(cluster=cluster, value="2001:db8::1")
    response = api_client.get(url(cluster), headers=bearer(token))
    assert response.status_code == 200
    body = response.json()
    assert [(rule["type"], rule["value"]) for rule in body["rules"]] == [
        ("ip_addr", "10.99.0.0/16"),
        ("ip_addr", "2001:db8::1"),
    ]
    for rule in body["rules"]:
        assert set(rule) == {"uuid", "cluster_uuid", "type", "value", "created_at"}
        assert UUID_RE.fullmatch(rule["uuid"]) and rule["cluster_uuid"] == str(cluster.pk)
        assert TIME_RE.fullmatch(rule["created_at"])
    assert len({rule["uuid"] for rule in body["rules"]}) == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "words", "error_id"),
    [
        (
            rules("10.99.0.0/16", "k8s-cluster-uuid", kind="k8s"),
            "only IP addresses and CIDR ranges",
            "unprocessable_entity",
        ),
        (
            {"rules": [{"type": "ip_addr", "value": "10.0.0.0/8"}, {"type": "tag", "value": "web"}]},
            "'tag'",
            "unprocessable_entity",
        ),
        (rules("10.99.0.0/16", "10.0.0.1/8"), "10.0.0.1/8", "firewall.source_invalid"),
        (rules("db.example.com"), "db.example.com", "firewall.source_invalid"),
        (rules("203.0.113.300"), "203.0.113.300", "firewall.source_invalid"),
        (
            rules(*[f"10.1.{i // 256}.{i % 256}" for i in range(101)]),
            "at most 100",
            "firewall.source_invalid",
        ),
        ({"rules": [{"value": "10.0.0.0/8"}]}, "type", "unprocessable_entity"),
        ({"firewall_rules": []}, "rules", "unprocessable_entity"),
    ],
)
def test_a_bad_rule_is_a_422_naming_it_and_nothing_changes(
    api_client: Client, owner: User, make_token: MakeToken, body: object, words: str, error_id: str
) -> None:
    cluster = make_cluster_row(owner)
    TrustedSource.objects.create(cluster=cluster, value="192.0.2.0/24")
    events = cluster.events.count()
    response = put(api_client, cluster, make_token(owner, Scope.UPDATE), body)
    # The lib's own refusals carry their code as the id (issue 18); the schema's checks the status's.
    error = assert_error(response, 422, error_id)
    assert words in error["message"]
    assert values_of(cluster) == ["192.0.2.0/24"]
    assert cluster.events.count() == events


@pytest.mark.django_db
def test_a_body_that_is_not_json_is_a_400(api_client: Client, owner: User, make_token: MakeToken) -> None:
    cluster = make_cluster_row(owner)
    assert_error(put(api_client, cluster, make_token(owner, Scope.UPDATE), '{"rules": ['), 400, "bad_request")


@pytest.mark.django_db
def test_each_call_needs_its_scope(api_client: Client, owner: User, make_token: MakeToken) -> None:
    cluster = make_cluster_row(owner)
    reader, writer = make_token(owner, Scope.READ), make_token(owner, Scope.UPDATE)
    assert_error(put(api_client, cluster, reader, rules("10.99.0.0/16")), 403, "forbidden")
    assert_error(api_client.get(url(cluster), headers=bearer(writer)), 403, "forbidden")
    assert values_of(cluster) == []


@pytest.mark.django_db
def test_another_accounts_cluster_is_a_404_as_one_that_does_not_exist(
    api_client: Client, owner: User, other_user: User, make_token: MakeToken
) -> None:
    theirs = make_cluster_row(other_user, "theirs")
    token = make_token(owner, Scope.READ, Scope.UPDATE)
    for target in (theirs, "00000000-0000-4000-8000-000000000000"):
        assert_error(api_client.get(url(target), headers=bearer(token)), 404, "not_found")
        assert_error(put(api_client, target, token, rules("10.99.0.0/16")), 404, "not_found")
    assert values_of(theirs) == []


@pytest.mark.django_db
def test_an_attached_server_keeps_its_own_rules(
    api_client: Client, owner: User, make_token: MakeToken
) -> None:
    cluster = make_cluster_row(owner, kind="attached", host="db.example.net", port=5432, pooler_port=None)
    error = assert_error(
        put(api_client, cluster, make_token(owner, Scope.UPDATE), rules("10.99.0.0/16")),
        422,
        "firewall.unsupported",  # the refusal's code (issue 18)
    )
    assert "attached" in error["message"]
    assert values_of(cluster) == []


# --- on a real cluster: a PUT replaces every rule, in the rows and in pg_hba.conf ----------------


@pytest.fixture(scope="module")
def served(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    """One real cluster for the module's writes, owned by its own account; rules cleared after each test."""
    with module_cluster(django_db_blocker, "fw-api-tenant", "db-fw-api") as cluster:
        yield cluster


def hba_addresses(cluster: Cluster) -> list[str]:
    """The addresses pg_hba.conf lets TLS clients in from."""
    lines = [line.split() for line in (cluster.pgdata / "pg_hba.conf").read_text().splitlines()]
    return [line[3] for line in lines if line[:3] == ["hostssl", "all", "all"]]


@pytest.mark.django_db
def test_a_put_replaces_every_rule_and_answers_204(
    api_client: Client, served: Cluster, make_token: MakeToken
) -> None:
    token = make_token(served.owner, Scope.READ, Scope.UPDATE)
    try:
        response = put(api_client, served, token, rules("10.99.0.0/16", "203.0.113.7", "10.99.0.0/16"))
        assert response.status_code == 204, response.content
        assert response.content == b""
        listed = api_client.get(url(served), headers=bearer(token)).json()["rules"]
        assert [rule["value"] for rule in listed] == ["10.99.0.0/16", "203.0.113.7"]
        assert hba_addresses(served) == ["10.99.0.0/16", "203.0.113.7/32"]

        # What GET answered can be sent back with a change (the extra keys are ignored).
        listed[1]["value"] = "2001:db8::/32"
        assert put(api_client, served, token, {"rules": listed}).status_code == 204
        assert values_of(served) == ["10.99.0.0/16", "2001:db8::/32"]
        assert hba_addresses(served) == ["10.99.0.0/16", "2001:db8::/32"]

        # A bad rule among good ones: refused, the rules in force and the file stay as they were.
        before = (served.pgdata / "pg_hba.conf").read_text()
        error = assert_error(
            put(api_client, served, token, rules("198.51.100.0/24", "10.0.0.1/8")),
            422,
            "firewall.source_invalid",
        )
        assert "10.0.0.1/8" in error["message"] and "10.0.0.0/8" in error["message"]
        assert values_of(served) == ["10.99.0.0/16", "2001:db8::/32"]
        assert (served.pgdata / "pg_hba.conf").read_text() == before

        # An empty list: open again, as on the managed service.
        assert put(api_client, served, token, {"rules": []}).status_code == 204
        assert api_client.get(url(served), headers=bearer(token)).json() == {"rules": []}
        assert hba_addresses(served) == ["all"]
    finally:
        services_firewall_clear(served)


def services_firewall_clear(cluster: Cluster) -> None:
    from panel.clusters.services import firewall

    firewall.set_trusted_sources(cluster, [])
