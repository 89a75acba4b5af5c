"""The Insights tab and its JSON: the owner's charts over a range or a window, gaps as null, 404s."""

from __future__ import annotations

import datetime as dt
import gzip
import json

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights.models import MetricPoint, MetricRollup
from panel.pools.models import ConnectionPool


def tab_url(cluster: Cluster) -> str:
    return reverse("insights:tab", kwargs={"cluster_id": cluster.pk})


def data_url(cluster: Cluster) -> str:
    return reverse("insights:data", kwargs={"cluster_id": cluster.pk})


def point(
    cluster: Cluster, metric: str, labels: str, ago: dt.timedelta, value: float | None, now: dt.datetime
) -> MetricPoint:
    return MetricPoint.objects.create(
        cluster=cluster, metric=metric, labels=labels, ts=now - ago, value=value
    )


@pytest.fixture
def with_points(cluster_row: Cluster) -> Cluster:
    """tps of defaultdb every 15 s for 3 minutes, with a NULL (a gap) and a missing minute."""
    # One "now" for every point: points of one collection share their time, as stored ones do.
    now = timezone.now()
    for i, value in enumerate([10.0, 12.0, None, 14.0, 15.0, 16.0]):
        point(cluster_row, "tps", "db=defaultdb", dt.timedelta(seconds=300 - 15 * i), value, now)
    # Nothing from 225 s to 60 s ago (the collector was down): the chart breaks there.
    minute = dt.timedelta(seconds=60)
    point(cluster_row, "tps", "db=defaultdb", minute, 20.0, now)
    point(cluster_row, "pool_size", "pool=test-pool", minute, 2.0, now)
    point(cluster_row, "pool_cl_waiting", "pool=test-pool", minute, 7.0, now)
    point(cluster_row, "pool_sv_active", "pool=test-pool", minute, 2.0, now)
    point(cluster_row, "max_connections", "", minute, 25.0, now)
    point(cluster_row, "conn_state", "state=active", minute, 3.0, now)
    point(cluster_row, "conn_user", "user=doadmin", minute, 2.0, now)
    point(cluster_row, "conn_user", "user=app", minute, 1.0, now)
    point(cluster_row, "conn_db", "db=defaultdb", minute, 3.0, now)
    point(cluster_row, "pool_xact_ps", "pool=test-pool", minute, 150.0, now)
    point(cluster_row, "pool_maxwait_seconds", "pool=test-pool", minute, 0.25, now)
    return cluster_row


def test_outsiders_get_404_on_the_tab_and_its_data(other_client: Client, with_points: Cluster) -> None:
    assert other_client.get(tab_url(with_points)).status_code == 404
    assert other_client.get(data_url(with_points), {"range": "1h"}).status_code == 404


def test_the_tab_shows_the_ranges_charts_and_a_pool_saturation_chart(
    owner_client: Client, with_points: Cluster
) -> None:
    response = owner_client.get(tab_url(with_points), {"range": "6h"})
    assert response.status_code == 200
    html = response.content.decode()
    for key in ("1h", "6h", "24h", "7d", "30d"):
        assert f'data-range-key="{key}"' in html
    assert 'data-range-key="6h" aria-pressed="true"' in html
    assert 'data-query="range=6h"' in html
    charts = ("tps", "connections", "connections_user", "connections_db", "cache", "tuples", "scans")
    for chart in (*charts, "deadlocks", "db_size", "cpu", "disk", "pool-traffic:test-pool"):
        assert f'data-chart="{chart}"' in html
    assert 'data-chart="pool:test-pool"' in html
    assert "js/insights-charts.js" in html
    assert 'aria-current="page" href="/clusters/' in html and ">Insights</a>" in html
    assert "Metrics appear within 15 s" not in html


def test_an_unknown_range_falls_back_to_the_last_hour(owner_client: Client, with_points: Cluster) -> None:
    response = owner_client.get(tab_url(with_points), {"range": "2y"})
    assert response.status_code == 200
    assert 'data-query="range=1h"' in response.content.decode()
    assert owner_client.get(data_url(with_points), {"range": "2y"}).status_code == 400


def test_a_cluster_without_metrics_shows_the_empty_state(owner_client: Client, cluster_row: Cluster) -> None:
    html = owner_client.get(tab_url(cluster_row)).content.decode()
    assert "Metrics appear within 15 s of the cluster being online" in html
    body = owner_client.get(data_url(cluster_row)).json()
    assert (body["charts"]["tps"]["t"], body["charts"]["tps"]["series"]) == ([], [])


def test_the_data_has_every_series_of_the_range_with_gaps_as_null(
    owner_client: Client, with_points: Cluster
) -> None:
    body = owner_client.get(data_url(with_points), {"range": "1h"}).json()
    assert body["range"] == "1h" and body["live"] is True
    assert body["end"] - body["start"] == 3600 * 1000
    tps = body["charts"]["tps"]
    (series,) = tps["series"]
    assert series["label"] == "defaultdb"
    assert len(series["values"]) == len(tps["t"]) == 8  # 7 points and one gap inserted at the outage
    assert tps["t"] == sorted(tps["t"])
    assert series["values"][:3] == [10.0, 12.0, None]  # the stored NULL
    assert series["values"][-2:] == [None, 20.0]  # the missing minutes
    assert [v for v in series["values"] if v is not None] == [10.0, 12.0, 14.0, 15.0, 16.0, 20.0]


def test_the_pool_chart_has_waiting_clients_active_servers_and_the_size_line(
    owner_client: Client, with_points: Cluster
) -> None:
    chart = owner_client.get(data_url(with_points), {"range": "1h"}).json()["charts"]["pool:test-pool"]
    by_label = {s["label"]: s for s in chart["series"]}
    assert by_label["clients waiting"]["values"] == [7.0]
    assert by_label["servers active"]["values"] == [2.0]
    assert by_label["pool size"]["values"] == [2.0] and by_label["pool size"]["limit"] is True
    data = owner_client.get(data_url(with_points)).json()["charts"]
    assert {s["label"] for s in data["connections"]["series"]} == {"active", "max_connections"}
    by_user = {s["label"]: s["values"] for s in data["connections_user"]["series"]}
    assert by_user == {"app": [1.0], "doadmin": [2.0], "max_connections": [25.0]}
    assert {s["label"] for s in data["connections_db"]["series"]} == {"defaultdb", "max_connections"}
    traffic = {s["label"]: s for s in data["pool-traffic:test-pool"]["series"]}
    assert traffic["transactions per second"]["values"] == [150.0]
    assert traffic["longest wait"]["values"] == [0.25] and traffic["longest wait"]["axis"] == "y1"
    assert data["pool-traffic:test-pool"]["unit2"] == "s"


def test_a_pool_has_its_chart_before_its_first_collection(owner_client: Client, cluster_row: Cluster) -> None:
    """Opening Insights right after creating a pool: its card is there, filled by the next refresh."""
    ConnectionPool.objects.create(cluster=cluster_row, name="fresh-pool", database="defaultdb", size=5)
    html = owner_client.get(tab_url(cluster_row)).content.decode()
    assert 'data-chart="pool:fresh-pool"' in html
    chart = owner_client.get(data_url(cluster_row)).json()["charts"]["pool:fresh-pool"]
    # What the page needs to add the card itself when the pool is newer than the page.
    assert chart["series"] == [] and chart["group"] == "pool" and "fresh-pool" in chart["title"]


def test_a_range_changes_the_window_and_reads_rollups_beyond_a_day(
    owner_client: Client, with_points: Cluster
) -> None:
    MetricRollup.objects.create(
        cluster=with_points,
        metric="tps",
        labels="db=defaultdb",
        seconds=3600,
        bucket=timezone.now() - dt.timedelta(days=3),
        min=1,
        max=9,
        avg=5,
        count=20,
    )
    week = owner_client.get(data_url(with_points), {"range": "7d"}).json()
    assert week["end"] - week["start"] == 7 * 86400 * 1000
    assert (week["resolution"], week["step"]) == ("1h", 3600)
    tps = week["charts"]["tps"]["series"][0]
    assert 5.0 in tps["values"]
    # Each bucket's peak rides along for the tooltip: the average 5 hid a 9.
    assert tps["max"][tps["values"].index(5.0)] == 9.0
    assert "max" not in week["charts"]["connections"]["series"][-1]  # the max_connections limit line
    hour = owner_client.get(data_url(with_points), {"range": "1h"}, headers={"accept-encoding": "gzip"})
    assert hour["Content-Encoding"] == "gzip"
    hour_tps = json.loads(gzip.decompress(hour.content))["charts"]["tps"]["series"][0]
    assert 5.0 not in hour_tps["values"] and "max" not in hour_tps  # raw points: no peaks


def test_a_fixed_window_from_a_benchmark_run(owner_client: Client, with_points: Cluster) -> None:
    start = timezone.now() - dt.timedelta(minutes=4)
    end = start + dt.timedelta(seconds=30)
    params = {"start": start.isoformat(), "end": end.isoformat()}
    body = owner_client.get(data_url(with_points), params).json()
    assert body["range"] == "" and body["live"] is False
    # A 30 s run is shown in ten minutes around it.
    assert body["end"] - body["start"] == 600 * 1000
    assert body["start"] <= start.timestamp() * 1000 and body["end"] >= end.timestamp() * 1000
    html = owner_client.get(tab_url(with_points), params).content.decode()
    assert 'data-live="false"' in html and 'aria-pressed="true"' not in html
    backwards = owner_client.get(data_url(with_points), {"start": end.isoformat(), "end": start.isoformat()})
    assert backwards.status_code == 400


def test_the_data_has_a_line_per_database_once_they_report(
    owner_client: Client, with_points: Cluster
) -> None:
    now = timezone.now()
    for db in ("db=app", "db=shop", "db=audit"):
        for metric in ("tps", "tup_fetched_ps", "idx_scan_ps", "db_size_bytes"):
            point(with_points, metric, db, dt.timedelta(seconds=30), 1.0, now)
    tps = owner_client.get(data_url(with_points), {"range": "1h"}).json()["charts"]["tps"]
    assert [s["label"] for s in tps["series"]] == ["app", "audit", "defaultdb", "shop"]
