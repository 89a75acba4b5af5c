"""/metrics: token required, Prometheus text that its own parser reads, with our labels."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.insights import services
from panel.insights.engine.collector import Snapshot
from panel.insights.prometheus import exposition

TOKEN = "metrics-token-for-tests"


@pytest.fixture(autouse=True)
def _token(settings: object) -> None:
    settings.PANEL_METRICS_TOKEN = TOKEN  # type: ignore[attr-defined]


@pytest.fixture
def collected(cluster_row: Cluster) -> Cluster:
    now = timezone.now()
    for i, xacts in enumerate([100, 400]):
        snap = Snapshot(at=now - dt.timedelta(seconds=15 * (1 - i)), up={"postgres": True, "pgbouncer": True})
        snap.counter("postgres", "xact_total", "db=benchmark", xacts)
        snap.gauge("conn_state", "state=idle in", 2)
        snap.gauge("conn_state", "state=active", 3)
        snap.gauge("conn_user", "user=doadmin", 5)
        snap.gauge("conn_total", "", 5)
        snap.gauge("pool_cl_waiting", "pool=test-pool", 18)
        services.store(cluster_row, snap)
    return cluster_row


def test_it_refuses_without_or_with_a_bad_token(client: Client, collected: Cluster) -> None:
    assert client.get("/metrics").status_code == 401
    response = client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_refuses_everyone_while_no_token_is_configured(
    client: Client, collected: Cluster, settings: object
) -> None:
    settings.PANEL_METRICS_TOKEN = ""  # type: ignore[attr-defined]
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 401


def test_it_serves_the_latest_figures_with_cluster_database_and_pool_labels(
    client: Client, collected: Cluster
) -> None:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    tps = families["pgpanel_tps"].samples
    assert [(s.labels, s.value) for s in tps] == [
        ({"cluster": "db-metrics", "cluster_id": str(collected.pk), "database": "benchmark"}, 20.0)
    ]
    waiting = families["pgpanel_pool_cl_waiting"].samples[0]
    assert waiting.labels["pool"] == "test-pool" and waiting.value == 18
    states = {s.labels["state"]: s.value for s in families["pgpanel_conn_state"].samples}
    assert states == {"active": 3, "idle in": 2}
    assert families["pgpanel_conn_user"].samples[0].labels["user"] == "doadmin"
    assert {s.labels["source"] for s in families["pgpanel_up"].samples} == {"postgres", "pgbouncer"}


def test_stale_clusters_have_no_samples(client: Client, collected: Cluster) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    services.store(collected, Snapshot(at=timezone.now() - dt.timedelta(hours=1), up={"postgres": True}))
    # The latest collection (the one above is older) is still fresh:
    assert b"db-metrics" in client.get("/metrics", headers=bearer).content
    collected.metric_points.all().update(ts=timezone.now() - dt.timedelta(hours=1))
    assert b"db-metrics" not in client.get("/metrics", headers=bearer).content


def test_a_token_in_the_url_is_refused_even_when_right(client: Client, collected: Cluster) -> None:
    """The URL lands in access logs: the token is taken only from the Authorization header."""
    response = client.get(f"/metrics?token={TOKEN}")
    assert response.status_code == 401
    assert b"only in the Authorization header" in response.content
    assert b"db-metrics" not in response.content
    # Even with the right header as well: a scraper that also puts it in the URL is told.
    both = client.get(f"/metrics?token={TOKEN}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert both.status_code == 401


def test_a_scrape_costs_the_same_queries_for_one_cluster_or_many(collected: Cluster, owner: User) -> None:
    with CaptureQueriesContext(connection) as one:
        exposition()
    for i in range(3):
        other = make_cluster_row(owner, name=f"db-other-{i}", port=26910 + 2 * i, pooler_port=26911 + 2 * i)
        snap = Snapshot(at=timezone.now(), up={"postgres": True})
        snap.gauge("conn_total", "", i)
        services.store(other, snap)
    make_cluster_row(owner, name="db-never-collected", port=26920, pooler_port=26921)
    with CaptureQueriesContext(connection) as many:
        text = exposition().decode()
    assert len(many) == len(one) == 2, [q["sql"] for q in many.captured_queries]
    totals = {
        s.labels["cluster"]: s.value
        for s in next(
            f for f in text_string_to_metric_families(text) if f.name == "pgpanel_conn_total"
        ).samples
    }
    assert totals == {"db-metrics": 5, "db-other-0": 0, "db-other-1": 1, "db-other-2": 2}
