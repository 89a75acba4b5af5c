"""Issue 18, item 1, for pools: each refusal has one code; the form's error next to its field and
the API's error come from it (the API's ``id`` is the code), in the language of whoever reads it
(the form in German for a German page, the API in German for ``Accept-Language: de``), and
nothing reads the words."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from panel.api.models import Scope
from panel.api.services.tokens import create_token
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.core.errors import ServiceError
from panel.pools import services
from panel.pools.lib.pgbouncer_spec import InvalidPoolName, validate_pool_name
from panel.pools.models import ConnectionPool

HTMX = {"HX-Request": "true"}
GOOD = {"name": "test-pool", "database": "appdb", "user": "", "mode": "transaction", "size": 10}

# (what the user sends, the code, the field it belongs to, the API status, words of its German text)
REFUSALS = [
    ({"name": "taken-pool"}, "pool.name_taken", "name", 409, "existiert bereits"),
    ({"size": 500}, "pool.over_budget", "size", 422, "500"),
    ({"name": "bad name"}, "pool.name_invalid", "name", 422, "Leerzeichen"),
    ({"name": "pgbouncer"}, "pool.name_invalid", "name", 422, "pgbouncer"),
]


@pytest.fixture
def cluster_row(owner) -> Cluster:
    cluster = make_cluster_row(owner)  # a 4 GB-plan row: 97 connections for pools
    ConnectionPool.objects.create(
        cluster=cluster, name="taken-pool", database="appdb", mode="transaction", size=5
    )
    return cluster


def refusal(cluster: Cluster, sent: dict) -> ServiceError:
    values = {**GOOD, **sent}
    with pytest.raises(ServiceError) as raised:
        services.create_pool(
            cluster, values["name"], values["database"], values["user"], values["mode"], values["size"]
        )
    return raised.value


def form_error(client: Client, cluster: Cluster, sent: dict, field: str) -> str:
    data = {**GOOD, **sent}
    page = client.post(reverse("pools:create", args=[cluster.pk]), data, headers=HTMX).content.decode()
    match = re.search(
        rf'id="id_{field}"[^>]*aria-invalid="true"|aria-invalid="true"[^>]*id="id_{field}"', page
    )
    assert match, f"no error on the {field} field"
    errors = re.findall(r'<div class="invalid-feedback d-block">([^<]*)</div>', page)
    assert errors, "no error text"
    return errors[0].replace("&#x27;", "'").replace("&quot;", '"')


@pytest.mark.parametrize(("sent", "code", "field", "status", "german"), REFUSALS, ids=lambda v: str(v)[:24])
def test_form_and_api_errors_come_from_one_code(
    owner, cluster_row, sent, code, field, status, german
) -> None:
    error = refusal(cluster_row, sent)
    assert (error.code, error.field) == (code, field)
    with translation.override("de"):
        expected_de = error.message
    with translation.override("en"):
        expected_en = error.message
    assert german in expected_de and expected_de != expected_en

    # The form, on a German page: the German text next to the field.
    browser = Client(HTTP_ACCEPT_LANGUAGE="de")
    browser.force_login(owner)
    assert form_error(browser, cluster_row, sent, field) == expected_de

    # The API: the code as the id, the same words in the language asked for.
    token = create_token(owner, "codes", [Scope.CREATE, Scope.READ])[1]
    body = {
        "name": GOOD["name"],
        "mode": GOOD["mode"],
        "size": GOOD["size"],
        "db": GOOD["database"],
        "user": "",
    }
    body.update({{"database": "db"}.get(k, k): v for k, v in sent.items()})
    for language, expected in (("de", expected_de), ("en", expected_en)):
        response = Client().post(
            f"/v2/databases/{cluster_row.pk}/pools",
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}", "Accept-Language": language},
        )
        assert response.status_code == status, response.content
        assert response.json()["id"] == code
        assert response.json()["message"] == expected
    assert list(ConnectionPool.objects.values_list("name", flat=True)) == ["taken-pool"]


def test_a_refusal_from_the_node_agent_is_rendered_where_it_is_read() -> None:
    """What crosses the agent is the template and its parameters (a character's name among them),
    not words: the agent's language is English, the reader's German."""
    from panel.core import agent

    with translation.override("en"):
        try:
            validate_pool_name("a;b")
        except InvalidPoolName as exc:
            wire = json.loads(
                json.dumps(agent.error_answer(ServiceError(exc.template, exc.field, exc.code, exc.params)))
            )
    assert wire["code"] == "pool.name_invalid" and "semicolon" in wire["error"]
    with translation.override("de"):
        assert "Semikolon" in agent.error_from(wire).message
    with translation.override("en"):
        assert agent.error_from(wire).message == wire["error"]
