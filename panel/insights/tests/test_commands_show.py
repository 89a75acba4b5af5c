"""`manage.py insights show`: the last collection's figures as a screen and as JSON, on stored points."""

from __future__ import annotations

import datetime as dt
import json
import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.clusters.services import transitions
from panel.clusters.tests.conftest import make_cluster_row
from panel.insights import services
from panel.insights.engine.collector import Snapshot
from panel.insights.tests.conftest import snapshot

MB = 1024**2


def run(*args: str) -> str:
    out = StringIO()
    call_command("insights", *args, stdout=out)
    return out.getvalue()


def shown(*args: str) -> dict[str, Any]:
    return json.loads(run("show", *args, "--format", "json"))


def busy(at: dt.datetime) -> Snapshot:
    """A collection where every source answered: two databases, four states, one pool."""
    snap = snapshot(
        at,
        conn_total=14,
        max_connections=25,
        conn_percent=56.0,
        cpu_percent=23.4,
        memory_bytes=512 * MB,
        load1=0.52,
        load5=0.61,
        load15=0.7,
        disk_percent=41.0,
        disk_used_bytes=1536 * MB,
        pool_cl_active__test_pool=20,
        pool_cl_waiting__test_pool=3,
        pool_sv_active__test_pool=10,
        pool_size__test_pool=10,
        pool_xact_ps__test_pool=450.25,
        pool_maxwait_seconds__test_pool=0.12,
    )
    snap.up["pgbouncer"] = True
    for state, count in (("active", 3), ("idle", 10), ("idle_in_transaction", 1), ("waiting_lock", 0)):
        snap.gauge("conn_state", f"state={state}", count)
    snap.gauge("tps", "db=appdb", 125.3)
    snap.gauge("cache_hit_percent", "db=appdb", 99.8)
    snap.gauge("tps", "db=defaultdb", 0.2)
    return snap


def ago(seconds: float) -> dt.datetime:
    return timezone.now() - dt.timedelta(seconds=seconds)


def test_it_prints_the_last_collection_like_top(cluster_row: Cluster) -> None:
    at = ago(5)
    services.store(cluster_row, busy(at))
    out = run("show", "db-metrics")
    assert re.search(rf"collected {at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC \(\d s ago\)\n", out)
    assert "stale" not in out and "down" not in out
    assert "14 of 25 max_connections (56.0%): active 3, idle 10, idle in transaction 1, waiting lock 0" in out
    assert "CPU:         23.4%" in out
    assert "Memory:      512.0 MB" in out  # the templates' filesizeformat
    assert "Load:        0.52 0.61 0.70" in out
    assert "Disk:        41.0% of the filesystem; data directory 1.5 GB" in out
    assert "DATABASE   TPS    CACHE HIT\nappdb      125.3  99.8%\ndefaultdb  0.2    -\n" in out
    assert "POOL       CLIENTS  WAITING  SERVERS  SIZE  XACT/S  LONGEST WAIT\n" in out
    assert "test-pool  20       3        10       10    450.2   0.12 s" in out
    assert "No alerts firing." in out


def test_json_gives_the_same_figures_as_numbers(cluster_row: Cluster) -> None:
    at = ago(5)
    services.store(cluster_row, busy(at))
    data = shown("db-metrics")
    assert data["cluster"] == "db-metrics"
    assert dt.datetime.fromisoformat(data["collected_at"]) == at
    assert 5 <= data["age_seconds"] < 60 and data["stale"] is False
    assert data["sources"] == {"postgres": True, "host": True, "pgbouncer": True}
    assert data["connections"] == {
        "total": 14,
        "max_connections": 25,
        "percent": 56.0,
        "by_state": {"active": 3, "idle": 10, "idle_in_transaction": 1, "waiting_lock": 0},
    }
    assert data["host"] == {
        "cpu_percent": 23.4,
        "memory_bytes": 512 * MB,
        "load": [0.52, 0.61, 0.7],
        "disk_percent": 41.0,
        "disk_used_bytes": 1536 * MB,
    }
    assert data["databases"] == [
        {"name": "appdb", "tps": 125.3, "cache_hit_percent": 99.8},
        {"name": "defaultdb", "tps": 0.2, "cache_hit_percent": None},
    ]
    assert data["pools"] == [
        {
            "name": "test-pool",
            "clients_active": 20,
            "clients_waiting": 3,
            "servers_active": 10,
            "size": 10,
            "xact_per_second": 450.25,
            "maxwait_seconds": 0.12,
        }
    ]
    assert data["alerts_firing"] == []


def test_it_shows_the_newest_collection_only(cluster_row: Cluster) -> None:
    services.store(cluster_row, busy(ago(35)))
    services.store(cluster_row, snapshot(ago(20), conn_total=2, max_connections=25))
    data = shown("db-metrics")
    assert data["connections"]["total"] == 2
    assert data["databases"] == [] and data["pools"] == []


def test_a_collection_older_than_three_intervals_is_stale(cluster_row: Cluster, settings: Any) -> None:
    settings.PANEL_METRICS_INTERVAL = 15
    services.store(cluster_row, busy(ago(10 * 60)))
    out = run("show", "db-metrics")
    assert "(10 min ago), stale: older than 3 intervals of 15 s" in out
    assert "CPU:         23.4%" in out  # the figures are still shown
    data = shown("db-metrics")
    assert data["stale"] is True and data["host"]["cpu_percent"] == 23.4


def test_a_cluster_without_metrics_says_so(cluster_row: Cluster) -> None:
    out = run("show", "db-metrics")
    assert "db-metrics: no metrics yet" in out
    assert "manage.py insights collect db-metrics" in out
    assert "Connections" not in out
    data = shown("db-metrics")
    assert data["collected_at"] is None and data["age_seconds"] is None and data["stale"] is True
    assert data["sources"] == {} and data["databases"] == [] and data["pools"] == []


def test_a_source_down_at_the_last_collection_is_named_and_its_figures_missing(
    cluster_row: Cluster,
) -> None:
    services.store(cluster_row, busy(ago(20)))
    down = busy(ago(5))
    down.gauges = [g for g in down.gauges if not g[0].startswith("pool_")]
    down.up["pgbouncer"] = False
    down.errors["pgbouncer"] = "connection refused"
    services.store(cluster_row, down)
    out = run("show", "db-metrics")
    assert "pgbouncer was down at this collection: its figures are missing" in out
    assert "postgres was down" not in out
    assert "POOL" not in out  # the pool's series are gaps now, not the older figures
    data = shown("db-metrics")
    assert data["sources"] == {"postgres": True, "host": True, "pgbouncer": False}
    assert data["pools"] == [] and data["connections"]["total"] == 14


def test_a_stopped_cluster_shows_every_source_down(cluster_row: Cluster) -> None:
    services.store(cluster_row, busy(ago(20)))
    transitions.mark(cluster_row, "stopped")
    services.collect_cluster(cluster_row)
    out = run("show", "db-metrics")
    assert "postgres was down at this collection" in out
    assert "host was down at this collection" in out
    assert "Connections: -" in out and "CPU:         -" in out
    data = shown("db-metrics")
    assert data["sources"] == {"postgres": False, "host": False}  # no pool: PgBouncer is not asked
    assert data["connections"]["total"] is None and data["host"]["load"] == [None, None, None]


def test_firing_alerts_close_the_screen(cluster_row: Cluster) -> None:
    services.save_rule(cluster_row, "pool_waiting_clients", 2, 0)
    services.save_rule(cluster_row, "cpu_percent", 90, 0)  # not reached: not listed
    at = ago(5)
    services.store(cluster_row, busy(at))
    out = run("show", "db-metrics")
    assert "1 alert firing:" in out
    assert (
        f"Clients waiting in a pool at 3, at or above 2 for 0 s, since {at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
        in out
    )
    [alert] = shown("db-metrics")["alerts_firing"]
    assert alert["kind"] == "pool_waiting_clients" and alert["value"] == 3.0 and alert["threshold"] == 2.0
    assert dt.datetime.fromisoformat(alert["firing_since"]) == at


def test_an_attached_cluster_has_no_host_figures(owner: User) -> None:
    make_cluster_row(owner, name="legacy", kind="external", pooler_port=None)
    cluster = Cluster.objects.get(name="legacy")
    snap = Snapshot(at=ago(5), up={"postgres": True})
    snap.gauge("conn_total", "", 4)
    services.store(cluster, snap)
    out = run("show", "legacy")
    assert "CPU" not in out and "Memory" not in out
    assert shown("legacy")["host"] is None


def test_show_of_an_unknown_cluster_fails(db: None) -> None:
    with pytest.raises(CommandError, match="No cluster named 'nope'"):
        run("show", "nope")
