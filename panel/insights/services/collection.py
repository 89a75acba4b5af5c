"""Collecting and storing: every cluster read concurrently (a bounded thread pool of
PANEL_COLLECT_CONCURRENCY threads; each cluster has a hard 5-second budget, see ``collector``, so a
hung cluster holds one thread, never the others), and the calling thread stores what came back:
gauges as they are, counters as per-second rates from the previous reading (``CounterState``). A
source that did not answer writes ``up=0`` and a NULL point for each of its series (a gap, never a
zero), and its counters start new series once it answers again."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from django.db import connections, transaction
from django.db.models import Q

from panel.clusters.face import cycles, nodes, postgres, streaming, transitions
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, CycleKind
from panel.insights.engine import collector
from panel.insights.lib import metrics
from panel.insights.lib.metrics import CATALOGUE, COUNTER_RATES, HOST, PGBOUNCER, POSTGRES
from panel.insights.models import CounterState, MetricPoint
from panel.insights.services.alerts import evaluate_alerts
from panel.insights.services.statement_store import baseline_for, store_statements
from panel.insights.services.tiers import ABANDON_AFTER, START_COUNTER, collect_workers, interval
from panel.pools.models import Pooler

log = logging.getLogger(__name__)


def target_for(cluster: Cluster) -> collector.Target:
    pools = dict(cluster.pools.values_list("name", "size")) if cluster.is_local else {}
    pooler = Pooler.objects.filter(cluster=cluster).first() if pools else None
    members = frozenset(cluster.members.values_list("name", flat=True)) if cluster.is_ha else frozenset()
    replicas = {streaming.slot_name(r): r.name for r in cluster.replicas.all()}
    return collector.Target(
        cluster=cluster,
        pools=pools,
        pooler=pooler,
        statements=baseline_for(cluster),
        members=members,
        replicas=replicas,
    )


def _collect_in_thread(target: collector.Target) -> collector.Snapshot:
    try:
        return collector.collect(target)
    finally:
        # An attached cluster's credentials are read from the panel's database in this thread.
        connections.close_all()


def _absent(cluster: Cluster, reason: str) -> collector.Snapshot:
    """The snapshot of a cluster that was not (or could not be) read: every source down."""
    snap = collector.Snapshot(at=dt.datetime.now(dt.UTC))
    sources = [POSTGRES, HOST] if cluster.is_local else [POSTGRES]
    if cluster.is_local and cluster.pools.exists():
        sources.append(PGBOUNCER)
    for source in sources:
        snap.up[source] = False
        snap.errors[source] = reason
    return snap


def note_postmaster_gone(cluster: Cluster, snap: collector.Snapshot) -> None:
    """A local one-member cluster shown online whose PostgreSQL did not answer and has no
    postmaster is degraded from this collection on, not online until the next reconciler pass.
    A cluster with standbys is not judged here: member 1's postmaster stops in every switchover
    and rolling restart, and Patroni, not one data directory, says whether it serves (the
    reconciler's ``ha_health.assess``)."""
    if cluster.is_ha:
        return
    if not (cluster.is_local and cluster.status == ClusterStatus.ONLINE and snap.up.get(POSTGRES) is False):
        return
    if postgres.postmaster_pid(cluster.pgdata) is None and transitions.mark_postmaster_gone(cluster):
        log.warning("insights: %s has no postmaster; marked degraded", cluster.pk)


def collect_cluster(cluster: Cluster) -> collector.Snapshot:
    """Collect and store one cluster in the foreground (command line, tests)."""
    if not cluster.is_serving:
        snap = _absent(cluster, f"the cluster is {cluster.status}")
    else:
        snap = collector.collect(target_for(cluster))
    note_postmaster_gone(cluster, snap)
    store(cluster, snap)
    return snap


def collect_all() -> dict[str, collector.Snapshot]:
    """Collect every cluster once, concurrently; returns snapshots by cluster id.

    A cluster that does not answer within its budget is recorded as a gap and the cycle moves on;
    its thread ends by itself when its socket watchdog fires. The cycle's duration is recorded on
    this node (the Nodes page).
    """
    with cycles.timed(CycleKind.COLLECT):
        return _collect_all()


def _collect_all() -> dict[str, collector.Snapshot]:
    mine = Q(pk__in=Cluster.objects.here().values("pk"))
    if nodes.collects_attached():
        mine |= Q(kind=ClusterKind.EXTERNAL)
    clusters = list(Cluster.objects.filter(mine).exclude(status=ClusterStatus.CREATING))
    results: dict[str, collector.Snapshot] = {}
    serving = [c for c in clusters if c.is_serving]
    for cluster in clusters:
        if not cluster.is_serving:
            results[str(cluster.pk)] = _absent(cluster, f"the cluster is {cluster.status}")
    started: dict[str, float] = {}  # cluster id → when its thread began

    def run(target: collector.Target) -> collector.Snapshot:
        started[str(target.cluster.pk)] = time.monotonic()
        return _collect_in_thread(target)

    pool = ThreadPoolExecutor(max_workers=collect_workers(), thread_name_prefix="insights")
    futures: dict[Future[collector.Snapshot], Cluster] = {
        pool.submit(run, target_for(cluster)): cluster for cluster in serving
    }
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in done:
                cluster = futures[future]
                try:
                    results[str(cluster.pk)] = future.result()
                except Exception as exc:  # a bug must not stop the other clusters' collection
                    log.exception("insights: collecting %s failed", cluster.pk)
                    results[str(cluster.pk)] = _absent(cluster, f"collector error: {exc}")
            now = time.monotonic()
            late = {f for f in pending if now - started.get(str(futures[f].pk), now) > ABANDON_AFTER}
            for future in late:
                cluster = futures[future]
                log.warning("insights: %s did not answer within %.0f s", cluster.pk, ABANDON_AFTER)
                results[str(cluster.pk)] = _absent(cluster, "no answer within the collection budget")
            pending -= late
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    for cluster in clusters:
        snap = results.get(str(cluster.pk))
        if snap is not None:
            try:
                note_postmaster_gone(cluster, snap)
                store(cluster, snap)
            except Exception:
                log.exception("insights: storing metrics of %s failed", cluster.pk)
    return results


# --- storing -------------------------------------------------------------------------------------


def _reading(state: CounterState | None) -> metrics.CounterReading | None:
    return None if state is None else metrics.CounterReading(state.value, state.ts.timestamp())


def store(cluster: Cluster, snap: collector.Snapshot) -> list[MetricPoint]:
    """Write one snapshot: gauges, rates from counters, gaps for silent sources; then alerts."""
    at = snap.at
    points: list[MetricPoint] = []

    def point(metric: str, labels: str, value: float | None) -> None:
        points.append(MetricPoint(cluster=cluster, metric=metric, labels=labels, ts=at, value=value))

    for source, answered in sorted(snap.up.items()):
        point("up", metrics.label("source", source), 1.0 if answered else 0.0)
    for metric, labels, value in snap.gauges:
        point(metric, labels, value)

    with transaction.atomic():
        states = {(s.counter, s.labels): s for s in CounterState.objects.filter(cluster=cluster)}
        failed = {source for source, answered in snap.up.items() if not answered}
        restarted = False
        if snap.started_at is not None:
            previous_start = states.get((START_COUNTER, ""))
            restarted = previous_start is not None and previous_start.value != snap.started_at
        fresh: list[CounterState] = []
        readings = {(name, labels): value for _s, name, labels, value in snap.counters}
        max_gap = interval() * 4.0
        for source, name, labels, value in snap.counters:
            state = states.get((name, labels))
            previous = None if (restarted and source == POSTGRES) else _reading(state)
            current = metrics.CounterReading(value, at.timestamp())
            if name in metrics.RATIO_COUNTERS:
                pass  # combined below
            elif name == "cpu_seconds":
                result = metrics.rate(previous, current, max_gap=max_gap)
                if result.rate is not None or result.reset:
                    point("cpu_percent", labels, None if result.rate is None else 100.0 * result.rate)
            else:
                rate_metric, factor = COUNTER_RATES[name]
                result = metrics.rate(previous, current, max_gap=max_gap)
                if result.reset or (state is not None and previous is None):
                    point(rate_metric, labels, None)  # a new series starts here
                elif result.rate is not None:
                    point(rate_metric, labels, result.rate * factor)
            fresh.append(
                CounterState(cluster=cluster, source=source, counter=name, labels=labels, ts=at, value=value)
            )
        _cache_hit_points(states, readings, restarted, max_gap, at, point)
        if snap.started_at is not None:
            fresh.append(
                CounterState(
                    cluster=cluster,
                    source=POSTGRES,
                    counter=START_COUNTER,
                    labels="",
                    ts=at,
                    value=snap.started_at,
                )
            )
        if failed:
            _gap_points(cluster, failed, at, point)
            CounterState.objects.filter(cluster=cluster, source__in=failed).delete()
        MetricPoint.objects.bulk_create(points)
        if fresh:
            CounterState.objects.bulk_create(
                fresh,
                update_conflicts=True,
                unique_fields=["cluster", "counter", "labels"],
                update_fields=["source", "ts", "value"],
            )
    store_statements(cluster, snap)
    evaluate_alerts(cluster, current_values(points), at)
    return points


def _cache_hit_points(
    states: dict[tuple[str, str], CounterState],
    readings: dict[tuple[str, str], float],
    restarted: bool,
    max_gap: float,
    at: dt.datetime,
    point: Callable[[str, str, float | None], None],
) -> None:
    for (name, labels), hit in readings.items():
        if name != "blks_hit" or ("blks_read", labels) not in readings:
            continue
        read = readings[("blks_read", labels)]
        old_hit, old_read = states.get(("blks_hit", labels)), states.get(("blks_read", labels))
        if restarted or old_hit is None or old_read is None:
            continue
        if at.timestamp() - old_hit.ts.timestamp() > max_gap:
            continue
        if hit < old_hit.value or read < old_read.value:
            point("cache_hit_percent", labels, None)
            continue
        value = metrics.hit_percent(hit - old_hit.value, read - old_read.value)
        if value is not None:
            point("cache_hit_percent", labels, value)


def _gap_points(
    cluster: Cluster, failed: set[str], at: dt.datetime, point: Callable[[str, str, float | None], None]
) -> None:
    """A NULL point for every series the silent sources wrote recently: the chart breaks there."""
    names = [m.name for m in CATALOGUE.values() if m.source in failed]
    recent = (
        MetricPoint.objects.filter(
            cluster=cluster, metric__in=names, ts__gte=at - dt.timedelta(seconds=interval() * 4)
        )
        .values_list("metric", "labels")
        .distinct()
    )
    for metric, labels in recent:
        point(metric, labels, None)


def current_values(points: list[MetricPoint]) -> dict[tuple[str, str], float]:
    return {(p.metric, p.labels): p.value for p in points if p.value is not None}
