"""Issue 18, item 1, app by app: a refusal's code is what both the page and the API answer from.
The form shows the refusal's words next to its field in the page's language; the API's error has
the code as its ``id`` and the same words in the language the client asks for. (Pools: their own
module, panel/pools/tests/test_error_codes.py.)"""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import translation

from panel.api.models import Scope
from panel.api.services.tokens import create_token
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.clusters.tests.conftest import make_cluster_row
from panel.core.errors import ServiceError
from panel.insights.services import alerts
from panel.quotas import services as quota_services

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def cluster(owner: User) -> Cluster:
    return make_cluster_row(owner)


def german_page(owner: User) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE="de")
    client.force_login(owner)
    return client


def field_errors(page: str) -> list[str]:
    return [
        html.unescape(text)
        for text in re.findall(r'<div class="invalid-feedback d-block">([^<]*)</div>', page)
    ]


def api(owner: User, method: str, path: str, body: dict, language: str) -> dict:
    token = create_token(owner, "codes", [Scope.CREATE, Scope.UPDATE, Scope.READ])[1]
    response = getattr(Client(), method)(
        path,
        json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Accept-Language": language},
    )
    return {"status": response.status_code, **response.json()}


def both_languages(error: ServiceError) -> tuple[str, str]:
    with translation.override("de"):
        german = error.message
    with translation.override("en"):
        english = error.message
    assert german != english, f"{error.code} has no German words"
    return german, english


def test_clusters_a_database_name_taken(owner: User, cluster: Cluster) -> None:
    with pytest.raises(ServiceError) as raised:
        roles.add_database(cluster, "appdb")
    error = raised.value
    assert (error.code, error.field) == ("database.name_taken", "name")
    german, english = both_languages(error)

    page = german_page(owner).post(
        reverse("clusters:database-add", args=[cluster.pk]), {"database-name": "appdb"}, headers=HTMX
    )
    assert german in field_errors(page.content.decode())

    for language, words in (("de", german), ("en", english)):
        answer = api(owner, "post", f"/v2/databases/{cluster.pk}/dbs", {"name": "appdb"}, language)
        assert (answer["status"], answer["id"], answer["message"]) == (409, "database.name_taken", words)


def test_quotas_a_soft_limit_above_the_hard_one(owner: User, cluster: Cluster) -> None:
    with pytest.raises(ServiceError) as raised:
        quota_services.set_quota(cluster, "database", "appdb", space_soft="3G", space_hard="2G")
    error = raised.value
    assert error.code == "quota.soft_above_hard"
    german, english = both_languages(error)

    form = {
        "kind": "database",
        "name": "appdb",
        "space_soft": "3G",
        "space_hard": "2G",
        "files_soft": "0",
        "files_hard": "0",
    }
    page = german_page(owner).post(reverse("quotas:set", args=[cluster.pk]), form, headers=HTMX)
    assert german in field_errors(page.content.decode())

    path = f"/v2/databases/{cluster.pk}/quotas/database/appdb"
    for language, words in (("de", german), ("en", english)):
        answer = api(owner, "put", path, {"space_soft": "3G", "space_hard": "2G"}, language)
        assert (answer["status"], answer["id"], answer["message"]) == (422, "quota.soft_above_hard", words)


def test_insights_an_alert_threshold_out_of_range(owner: User, cluster: Cluster) -> None:
    """Insights has no API: its form error comes from the code, in the page's language."""
    with pytest.raises(ServiceError) as raised:
        alerts.save_rule(cluster, "cpu_percent", "150", "60")
    error = raised.value
    assert error.code == "alert.percent_out_of_range"
    german, _english = both_languages(error)
    data = {"kind": "cpu_percent", "threshold": "150", "duration_seconds": "60", "enabled": "on", "email": ""}
    page = german_page(owner).post(reverse("insights:alerts", args=[cluster.pk]), data, headers=HTMX)
    assert german in field_errors(page.content.decode())


def test_benchmarks_a_run_with_more_threads_than_clients(owner: User, cluster: Cluster) -> None:
    """Benchmarks have no API: the lib's problem (code and parameters) is the form's error, in the
    page's language, on its field."""
    from benchmarks.lib import engines
    from benchmarks.lib import pgbench_command as cmd
    from benchmarks.tests.test_views_forms import RUN, field_errors

    [(field, problem)] = engines.problems(cmd.RunOptions(clients=4, threads=8, duration_s=5))
    assert (field, problem.code) == ("threads", "run.threads_over_clients")
    with translation.override("de"):
        german = str(problem)
    assert german != str(problem) and "8" in german and "4" in german
    page = german_page(owner).post(
        reverse("benchmarks:run-launch", args=[cluster.pk]), {**RUN, "threads": "8"}, headers=HTMX
    )
    assert [html.unescape(e) for e in field_errors(page.content.decode(), "threads")] == [german]
