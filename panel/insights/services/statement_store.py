"""Storing what a collection read from ``pg_stat_statements``, and what the next one computes its
deltas from: the deltas since the previous collection (``StatementDelta``, the top ones by time)
and the last reading of every statement (``StatementCounter``). The collection calls it; the
Queries tab reads what it stored (``queries``)."""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction

from panel.clusters.face import transitions
from panel.clusters.models import Cluster
from panel.core.errors import N_, Message
from panel.insights.engine.snapshot import Snapshot
from panel.insights.lib import statements
from panel.insights.models import StatementCounter, StatementDelta, StatementsState, StatementText

log = logging.getLogger(__name__)

COUNTER_FIELDS = ("calls", "total_ms", "sq_ms", "rows", "blks_hit", "blks_read")


def _epoch(value: dt.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _at(epoch: float | None) -> dt.datetime | None:
    return None if epoch is None else dt.datetime.fromtimestamp(epoch, dt.UTC)


def baseline_for(cluster: Cluster) -> statements.Baseline:
    """What the next collection computes its deltas from."""
    state = StatementsState.objects.filter(cluster=cluster).first()
    counters: dict[statements.Key, statements.Reading] | None = None
    if state is not None and state.baseline_at is not None:
        counters = {}
        for row in StatementCounter.objects.filter(cluster=cluster).iterator(chunk_size=2000):
            reading = statements.Reading(
                row.queryid,
                row.dbid,
                row.userid,
                row.database,
                row.role,
                row.calls,
                row.total_ms,
                row.sq_ms,
                row.rows,
                row.blks_hit,
                row.blks_read,
            )
            counters[reading.key] = reading
    known = frozenset(StatementText.objects.filter(cluster=cluster).values_list("queryid", flat=True))
    return statements.Baseline(
        checked_at=_epoch(state.checked_at) if state else None,
        stats_reset=_epoch(state.stats_reset) if state else None,
        counters=counters,
        known_texts=known,
    )


def store_statements(cluster: Cluster, snap: Snapshot) -> None:
    """Write what one collection read: the deltas, new texts, the counters for the next time, the
    state. A collection that raced another (the state moved since ``baseline`` was read) stores
    nothing: its deltas would count the same calls twice."""
    collected = snap.statements
    if collected is None or collected.baseline is None:
        return
    baseline = collected.baseline
    at = snap.at
    with transaction.atomic():
        state, _created = StatementsState.objects.select_for_update().get_or_create(
            cluster=cluster, defaults={"status": collected.status}
        )
        if _epoch(state.checked_at) != baseline.checked_at:
            log.info("insights: statements of %s were stored meanwhile; skipped", cluster.pk)
            return
        state.status = collected.status
        state.message = collected.message
        if collected.created_extension:
            transitions.log_event(
                cluster,
                "statements",
                Message(
                    N_("Set up pg_stat_statements for the Queries tab and the databases the panel creates.")
                ),
            )
        if collected.readings is None:
            # Not read: the counters stay, so the next reading's deltas cover the gap.
            state.save(update_fields=["status", "message"])
            return
        _store_counters(cluster, collected.readings, baseline)
        StatementDelta.objects.bulk_create(
            StatementDelta(cluster=cluster, ts=at, **_delta_fields(d)) for d in collected.deltas or []
        )
        if collected.texts:
            StatementText.objects.bulk_create(
                (StatementText(cluster=cluster, queryid=q, text=t) for q, t in collected.texts.items()),
                ignore_conflicts=True,
            )
        state.checked_at = at
        state.stats_reset = _at(collected.stats_reset)
        if state.baseline_at is None:
            state.baseline_at = at
        state.save()


def _delta_fields(d: statements.Delta) -> dict[str, object]:
    return {
        "queryid": d.queryid,
        "database": d.database[:64],
        "role": d.role[:64],
        **{name: getattr(d, name) for name in COUNTER_FIELDS},
    }


def _store_counters(
    cluster: Cluster, readings: list[statements.Reading], baseline: statements.Baseline
) -> None:
    """Keep the reading of every statement that changed; forget those the server no longer has."""
    previous = baseline.counters or {}
    changed = [r for r in readings if previous.get(r.key) != r]
    seen = {r.key for r in readings}
    gone = [key for key in previous if key not in seen]
    if gone:
        ids = StatementCounter.objects.filter(cluster=cluster).values_list("pk", "queryid", "dbid", "userid")
        stale = [pk for pk, q, d, u in ids if (q, d, u) not in seen]
        for start in range(0, len(stale), 500):
            StatementCounter.objects.filter(pk__in=stale[start : start + 500]).delete()
    StatementCounter.objects.bulk_create(
        (
            StatementCounter(
                cluster=cluster,
                queryid=r.queryid,
                dbid=r.dbid,
                userid=r.userid,
                database=r.database[:64],
                role=r.role[:64],
                **{name: getattr(r, name) for name in COUNTER_FIELDS},
            )
            for r in changed
        ),
        batch_size=500,
        update_conflicts=True,
        unique_fields=["cluster", "queryid", "dbid", "userid"],
        update_fields=["database", "role", *COUNTER_FIELDS],
    )
