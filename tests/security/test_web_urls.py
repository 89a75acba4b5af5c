"""Every URL of the project, walked from Django's resolver: anonymous visitors are sent to the login
page (or get 401 from /metrics), another account gets 404 on every cluster URL (pages, partials,
JSON, exports, actions; GET, HTMX GET and POST) and changes nothing, and the owner opens them all;
every response carries the Content-Security-Policy and no page holds an inline script.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from benchmarks.models import BenchmarkRun, Sweep
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.clusters.tests.conftest import make_cluster_row
from panel.insights.models import AlertRule, StatementText
from panel.logsink.models import LogSink
from panel.migrate.models import OnlineMigration
from panel.pools import services as pool_services
from panel.pools.models import ConnectionPool
from panel.quotas.models import Quota
from tests.security.urlwalk import Route, all_routes, dummy_values, url_for

HTMX = {"HX-Request": "true"}
# Reachable without an account: the login pages, the static files, the language switch (a
# cookie), and /metrics (its own bearer token, tested in test_web_metrics.py). Under /v2/ the
# schema and its docs page are public too (_api_refuses_anonymous).
PUBLIC = {"login", "admin:login", "set_language", None}
# A cluster's Prometheus scrape endpoint: HTTP basic auth with the account's metrics credentials,
# never the session: 401 to everyone without them (whatever the cluster, so it tells nothing);
# the credentials' own walk is in panel/api/tests/test_api_managed.py.
BASIC_AUTH = {"managed:scrape"}
# A POST body with a plausible value for every form field of the panel: a view that validated a
# form before checking ownership would act on it.
POST_DATA = {
    "confirm_name": "db-row",
    "name": "intruder-pool",
    "user-name": "intruder",
    "database-name": "intruderdb",
    "database": "appdb",
    "user": "app",
    "mode": "session",
    "size": "5",
    "target": "direct",
    "clients": "2",
    "duration": "5",
    "progress": "1",
    "script": "tpcb-like",
    "query_mode": "simple",
    "scale": "1",
    "clients_list": "1,2",
    "targets": ["direct"],
    "repeats": "1",
    "kind": "cpu_percent",
    "threshold": "1",
    "duration_seconds": "60",
    "email": "intruder@example.com",
}
CSP_PARTS = ("default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'",
             "object-src 'none'", "form-action 'self'", "base-uri 'self'")  # fmt: skip
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)
QUERYID = -4242  # a statement of the Queries tab (pg_stat_statements' ids are signed)


def _values(
    cluster: Cluster,
    pool: ConnectionPool,
    run: BenchmarkRun,
    sweep: Sweep,
    rule: AlertRule,
    quota: Quota,
    migration: OnlineMigration,
    sink: LogSink,
) -> dict:
    return {
        "cluster_id": cluster.pk,
        "pool_id": pool.pk,
        "run_id": run.pk,
        "sweep_id": sweep.pk,
        "rule_id": rule.pk,
        "quota_id": quota.pk,
        "migration_id": migration.pk,
        "sink_id": sink.pk,
        "action": "restart",
        "fmt": "csv",
        "clusters:user-delete.name": "app",
        "clusters:user-reset-password.name": "app",
        "clusters:database-delete.name": "appdb",
        "queryid": QUERYID,
    }


def _objects(cluster: Cluster, pool: ConnectionPool | None = None) -> tuple:
    pool = pool or ConnectionPool.objects.create(
        cluster=cluster, name="test-pool", database="appdb", user="", mode="transaction", size=10
    )
    run = make_run(cluster, samples=3)
    sweep = Sweep.objects.create(cluster=cluster, clients_list=[1], targets=[{"kind": "direct"}])
    make_run(cluster, sweep=sweep)
    rule = AlertRule.objects.create(cluster=cluster, kind="connections_percent", threshold=90)
    quota = Quota.objects.create(cluster=cluster, kind="database", name="appdb", space_hard=10**9)
    StatementText.objects.create(
        cluster=cluster, queryid=QUERYID, text="SELECT abalance FROM pgbench_accounts"
    )
    # A migration that ended: stopping it is a refusal, never a connection to its source.
    migration = OnlineMigration.objects.create(
        cluster=cluster, status="canceled", host="203.0.113.7", address="203.0.113.7", port=5432,
        dbname="app", username="app",
    )  # fmt: skip
    sink = LogSink(cluster=cluster, name="siem", sink_type="rsyslog")
    sink.config = {"server": "198.51.100.7", "port": 514, "tls": False, "format": "rfc5424"}
    sink.save()
    return pool, run, sweep, rule, quota, migration, sink


def _compared(cluster: Cluster) -> dict[str, list[str]]:
    """The query of the compare pages (harmless to the other pages): every run of the cluster."""
    return {
        "run": [str(pk) for pk in BenchmarkRun.objects.filter(cluster=cluster).values_list("pk", flat=True)]
    }


def _state(cluster: Cluster) -> tuple:
    cluster = Cluster.objects.get(pk=cluster.pk)
    return (
        cluster.status,
        sorted(cluster.users.values_list("name", "password_encrypted")),
        sorted(cluster.databases.values_list("name", flat=True)),
        sorted(cluster.pools.values_list("name", "database", "user", "mode", "size")),
        sorted(BenchmarkRun.objects.filter(cluster=cluster).values_list("pk", "status")),
        Sweep.objects.filter(cluster=cluster).count(),
        sorted(AlertRule.objects.filter(cluster=cluster).values_list("kind", "threshold", "enabled")),
        sorted(
            Quota.objects.filter(cluster=cluster).values_list(
                "kind", "name", "space_hard", "writes_allowed_until"
            )
        ),
        cluster.events.count(),
    )


def test_the_walk_finds_the_urls_of_every_app() -> None:
    names = {route.name for route in all_routes()}
    for expected in ("clusters:detail", "clusters:connection-secret", "pools:connection-secret",
                     "benchmarks:run-export", "benchmarks:sweep-data", "insights:data",
                     "insights:alert-delete", "insights:metrics", "admin:index"):  # fmt: skip
        assert expected in names
    assert sum(1 for route in all_routes() if route.is_cluster_object) >= 40


def _is_login_redirect(response: object, admin: bool) -> bool:
    location = response.get("Location", "")  # type: ignore[attr-defined]
    targets = ("/login/?next=", "/admin/login/") if admin else ("/login/?next=",)
    return response.status_code == 302 and location.startswith(targets)  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_the_login_page_from_every_url(client: Client) -> None:
    wrong = []
    for route in all_routes():
        if route.name in PUBLIC:
            continue
        url = url_for(route, dummy_values(route))
        for method in ("get", "post"):
            response = getattr(client, method)(url)
            if route.name == "insights:metrics" or route.name in BASIC_AUTH:
                ok = response.status_code in (401, 405)
            elif url.startswith("/v2/"):
                # The API: its own bearer tokens, never the login page. Only the schema is public
                # (read-only); everything else answers 401 in the API's error shape (or 404/405
                # for what it does not serve), never data.
                ok = _api_refuses_anonymous(url, method, response)
            else:
                ok = _is_login_redirect(response, route.is_admin)
            if not ok:
                wrong.append(f"{method.upper()} {url}: {response.status_code} {response.get('Location', '')}")
    assert not wrong, "\n".join(wrong)


def _api_refuses_anonymous(url: str, method: str, response: object) -> bool:
    if url == "/v2/openapi.json" and method == "get":
        return response.status_code == 200 and "paths" in response.json()  # type: ignore[attr-defined]
    if url == "/v2/docs" and method == "get":
        # The page that renders that schema: public like it, a page of the panel (not JSON).
        return response.status_code == 200 and b'id="swagger-ui"' in response.content  # type: ignore[attr-defined]
    if response.status_code not in (401, 404, 405):  # type: ignore[attr-defined]
        return False
    body = response.json()  # type: ignore[attr-defined]
    return set(body) == {"id", "message", "request_id"} and (
        response.status_code != 401 or body["id"] == "unauthorized"
    )  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_the_public_pages_are_the_login_pages_and_static_files(client: Client) -> None:
    assert client.get("/login/").status_code == 200
    assert client.get("/admin/login/").status_code == 200
    assert client.get("/metrics").status_code == 401


def test_another_account_gets_404_on_every_cluster_url_and_changes_nothing(
    other_client: Client, owner: User
) -> None:
    cluster = make_cluster_row(owner)
    values = _values(cluster, *_objects(cluster))
    before = _state(cluster)
    wrong = []
    routes = [route for route in all_routes() if route.is_cluster_object]
    query = _compared(cluster)
    for route in routes:
        url = url_for(route, values)
        nowhere = url_for(route, {**values, **dummy_values(route)})  # objects that do not exist
        for label, response in (
            ("GET", other_client.get(url, query)),
            ("GET (htmx)", other_client.get(url, query, headers=HTMX)),
            ("POST", other_client.post(url, POST_DATA)),
            ("POST (htmx)", other_client.post(url, POST_DATA, headers=HTMX)),
        ):
            # A view that does not take this method answers 405 before it looks anything up: the
            # same answer as for objects that do not exist, so it tells nothing either.
            if response.status_code == 405:
                method = other_client.post if label.startswith("POST") else other_client.get
                if method(nowhere).status_code == 405:
                    continue
            if (
                route.name in BASIC_AUTH
                and response.status_code == 401
                and b"pgpanel_" not in response.content
            ):
                continue
            if response.status_code != 404:
                wrong.append(f"{label} {url}: {response.status_code}")
            elif b"admin-secret" in response.content or b"app-secret" in response.content:
                wrong.append(f"{label} {url}: a password in the 404 page")
    assert not wrong, "\n".join(wrong)
    assert _state(cluster) == before


@pytest.mark.django_db
def test_another_account_sees_only_its_own_list_and_no_admin(other_client: Client, owner: User) -> None:
    cluster = make_cluster_row(owner)
    page = other_client.get("/clusters/")
    assert page.status_code == 200 and cluster.name.encode() not in page.content
    assert _is_login_redirect(other_client.get("/admin/"), admin=True)
    assert _is_login_redirect(other_client.get(f"/admin/clusters/cluster/{cluster.pk}/change/"), admin=True)


def _csp_ok(response: object) -> bool:
    header = response.get("Content-Security-Policy", "")  # type: ignore[attr-defined]
    return all(part in header for part in CSP_PARTS) and "unsafe" not in header


def _route_order(route: Route) -> int:
    # The owner's POSTs that change the cluster run last, so that the pages above see it whole.
    destructive = ("delete", "action", "cancel", "retry")
    if route.name and route.name.endswith(":remove"):
        return 2  # a quota's removal after the actions on it ("allow writes")
    return 1 if route.name and any(word in route.name for word in destructive) else 0


@pytest.mark.integration
def test_the_owner_opens_every_cluster_url_and_every_response_has_the_policy(
    local_cluster: Cluster, owner_client: Client
) -> None:
    roles.add_user(local_cluster, "app")
    roles.add_database(local_cluster, "appdb")
    pool = pool_services.create_pool(local_cluster, "test-pool", "appdb", "", "transaction", 5)
    values = _values(local_cluster, *_objects(local_cluster, pool))
    wrong = []
    routes = sorted(
        (r for r in all_routes() if r.is_cluster_object and r.name not in BASIC_AUTH), key=_route_order
    )
    query = _compared(local_cluster)
    for route in routes:
        url = url_for(route, values)
        responses = [
            ("GET", owner_client.get(url, query)),
            ("GET (htmx)", owner_client.get(url, query, headers=HTMX)),
        ]
        if responses[0][1].status_code == 405:  # POST only: the owner's POST must reach the view
            responses = [("POST", owner_client.post(url, {}, headers=HTMX))]
        for label, response in responses:
            if response.status_code not in (200, 302):
                wrong.append(f"{label} {url}: {response.status_code}")
            if not _csp_ok(response):
                wrong.append(
                    f"{label} {url}: Content-Security-Policy {response.get('Content-Security-Policy')!r}"
                )
            if response.get("Content-Type", "").startswith("text/html"):
                text = response.content.decode()
                if INLINE_SCRIPT.search(text) or EVENT_HANDLER.search(text) or "javascript:" in text:
                    wrong.append(f"{label} {url}: inline script")
                if re.search(r"\sstyle=\"", text):
                    wrong.append(f"{label} {url}: a style attribute")
    assert not wrong, "\n".join(wrong)


@pytest.mark.django_db
def test_the_pages_outside_clusters_carry_the_policy_too(
    owner_client: Client, client: Client, staff_user
) -> None:
    for response in (
        client.get("/login/"),
        owner_client.get("/clusters/"),
        owner_client.get("/clusters/new/"),
    ):
        assert response.status_code == 200 and _csp_ok(response)
        assert not INLINE_SCRIPT.search(response.content.decode())
    client.force_login(staff_user)
    for url in ("/clusters/attach/", "/admin/"):
        response = client.get(url)
        assert response.status_code == 200 and _csp_ok(response), url
