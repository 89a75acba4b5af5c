"""Storing what a collection read of pg_stat_statements (no server: snapshots made by hand): the
first reading is a baseline, later ones store deltas and keep counters, a collection that raced
another stores nothing, statements the server forgot are forgotten, old deltas are pruned."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights.engine.collector import Snapshot
from panel.insights.lib.statements import Collected, Reading, deltas, top
from panel.insights.models import StatementCounter, StatementDelta, StatementsState, StatementText
from panel.insights.services import queries, statement_store


def reading(queryid: int, calls: int, total: float) -> Reading:
    return Reading(queryid, 5, 10, "defaultdb", "doadmin", calls, total, total, calls, calls, 0)


def collect(cluster: Cluster, at: dt.datetime, readings: list[Reading], **texts: str) -> None:
    """What collector.collect would bring back for these readings, stored."""
    baseline = statement_store.baseline_for(cluster)
    found = top(deltas(baseline.counters, readings), 50)
    snap = Snapshot(at=at, up={"postgres": True})
    snap.statements = Collected(
        "collecting",
        readings=readings,
        deltas=found,
        texts={int(k[1:]): v for k, v in texts.items()},
        baseline=baseline,
    )
    statement_store.store_statements(cluster, snap)


def test_the_first_reading_is_a_baseline_then_deltas_are_stored(cluster_row: Cluster) -> None:
    now = timezone.now()
    collect(cluster_row, now - dt.timedelta(seconds=30), [reading(1, 100, 10.0)], q1="SELECT 1")
    assert not StatementDelta.objects.exists()
    assert StatementCounter.objects.get(cluster=cluster_row).calls == 100
    collect(
        cluster_row,
        now - dt.timedelta(seconds=15),
        [reading(1, 130, 13.0), reading(2, 5, 1.0)],
        q2="SELECT 2",
    )
    stored = {d.queryid: d.calls for d in StatementDelta.objects.filter(cluster=cluster_row)}
    assert stored == {1: 30, 2: 5}
    assert set(StatementText.objects.values_list("queryid", flat=True)) == {1, 2}
    rows = queries.top_statements(cluster_row, queries.window_of("5m", now))
    assert [(r.totals.queryid, r.totals.calls, r.text) for r in rows] == [
        (1, 30, "SELECT 1"),
        (2, 5, "SELECT 2"),
    ]


def test_a_collection_that_raced_another_stores_nothing(cluster_row: Cluster) -> None:
    now = timezone.now()
    collect(cluster_row, now - dt.timedelta(seconds=30), [reading(1, 100, 10.0)])
    stale = statement_store.baseline_for(cluster_row)
    collect(cluster_row, now - dt.timedelta(seconds=20), [reading(1, 150, 15.0)])
    snap = Snapshot(at=now, up={"postgres": True})
    snap.statements = Collected(
        "collecting",
        readings=[reading(1, 160, 16.0)],
        deltas=deltas(stale.counters, [reading(1, 160, 16.0)]),
        baseline=stale,
    )
    statement_store.store_statements(cluster_row, snap)
    # 60 calls from the stale baseline would count the 50 of the other collection twice.
    assert sorted(StatementDelta.objects.values_list("calls", flat=True)) == [50]
    assert StatementCounter.objects.get().calls == 150


def test_statements_the_server_no_longer_has_are_forgotten(cluster_row: Cluster) -> None:
    now = timezone.now()
    collect(cluster_row, now - dt.timedelta(seconds=30), [reading(1, 100, 10.0), reading(2, 3, 1.0)])
    collect(cluster_row, now - dt.timedelta(seconds=15), [reading(2, 3, 1.0)])
    assert list(StatementCounter.objects.values_list("queryid", flat=True)) == [2]
    # Back after an eviction with fewer calls than before: those are all new.
    collect(cluster_row, now, [reading(1, 7, 0.5), reading(2, 3, 1.0)])
    assert list(StatementDelta.objects.values_list("queryid", "calls")) == [(1, 7)]


def test_a_reading_that_failed_keeps_the_counters_and_says_why(cluster_row: Cluster) -> None:
    now = timezone.now()
    collect(cluster_row, now - dt.timedelta(seconds=30), [reading(1, 100, 10.0)])
    snap = Snapshot(at=now - dt.timedelta(seconds=15), up={"postgres": True})
    snap.statements = Collected("not_loaded", "restart", baseline=statement_store.baseline_for(cluster_row))
    statement_store.store_statements(cluster_row, snap)
    state = StatementsState.objects.get(cluster=cluster_row)
    assert (state.status, state.message) == ("not_loaded", "restart")
    collect(cluster_row, now, [reading(1, 120, 12.0)])
    assert list(StatementDelta.objects.values_list("calls", flat=True)) == [20]


def test_deltas_older_than_a_day_and_texts_nobody_names_are_pruned(cluster_row: Cluster) -> None:
    now = timezone.now()
    collect(cluster_row, now - dt.timedelta(hours=26), [reading(1, 1, 1.0)], q1="SELECT 1")
    collect(
        cluster_row,
        now - dt.timedelta(hours=25),
        [reading(1, 2, 2.0), reading(2, 1, 1.0)],
        q1="x",
        q2="SELECT 2",
    )
    collect(cluster_row, now - dt.timedelta(minutes=1), [reading(2, 4, 2.0)])
    assert StatementDelta.objects.count() == 3
    assert queries.prune_statements(now) == 2
    assert list(StatementDelta.objects.values_list("queryid", flat=True)) == [2]
    assert list(StatementText.objects.values_list("queryid", flat=True)) == [2]
