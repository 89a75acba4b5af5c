"""Statement statistics (the Queries tab): what a collection needs beforehand, storing what it read,
a window's top statements and one statement's series, resetting the statistics, pruning.

A collection stores the deltas since the previous one (``StatementDelta``, the top ones by time)
and keeps the last reading of every statement (``StatementCounter``); a window's figures are the
sums of its deltas (``panel.insights.lib.statements``), so "the last hour" does not depend on when the
statistics were last reset."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, ServiceError
from panel.insights.engine.snapshot import Snapshot
from panel.insights.lib import statements
from panel.insights.models import (
    StatementCounter,
    StatementDelta,
    StatementsState,
    StatementsStatus,
    StatementText,
)
from panel.insights.services.tiers import RAW_RETENTION, interval

log = logging.getLogger(__name__)

COUNTER_FIELDS = ("calls", "total_ms", "sq_ms", "rows", "blks_hit", "blks_read")
# The Queries tab's windows (the deltas are kept 24 hours).
WINDOWS: dict[str, dt.timedelta] = {
    "5m": dt.timedelta(minutes=5),
    "1h": dt.timedelta(hours=1),
    "6h": dt.timedelta(hours=6),
    "24h": dt.timedelta(hours=24),
}
DEFAULT_WINDOW = "1h"
WINDOW_CHOICES = (
    ("5m", gettext_lazy("5 minutes")),
    ("1h", gettext_lazy("1 hour")),
    ("6h", gettext_lazy("6 hours")),
    ("24h", gettext_lazy("24 hours")),
)
SORT_CHOICES = (
    ("total", gettext_lazy("Total time")),
    ("calls", gettext_lazy("Calls")),
    ("mean", gettext_lazy("Mean")),
    ("stddev", gettext_lazy("Std dev")),
    ("rows", gettext_lazy("Rows")),
    ("hit", gettext_lazy("Cache hit")),
)
TAB_ROWS = 50


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
            cluster.log_event(
                "statements",
                _("Set up pg_stat_statements for the Queries tab and the databases the panel creates."),
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


# --- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """``(start, end]``: the collections whose deltas count. ``key`` is a WINDOWS key, or empty
    for a window given by its ends (a benchmark run's)."""

    start: dt.datetime
    end: dt.datetime
    key: str = ""


def window_of(key: str | None, now: dt.datetime | None = None) -> Window:
    now = now or timezone.now()
    key = key if key in WINDOWS else DEFAULT_WINDOW
    return Window(now - WINDOWS[key], now, key)


def window_between(start: str, end: str) -> Window | None:
    """A window given by its ends in ISO 8601 (UTC when no offset is given); None when either end
    is not a time or the end is not after the start."""
    ends = []
    for text in (start, end):
        try:
            value = dt.datetime.fromisoformat(
                text.strip().replace(" ", "+", 1) if "T" in text else text.strip()
            )
        except ValueError:
            return None
        ends.append(value if value.tzinfo else value.replace(tzinfo=dt.UTC))
    if ends[1] <= ends[0]:
        return None
    return Window(ends[0], ends[1])


def run_window(started_at: dt.datetime, finished_at: dt.datetime | None) -> Window:
    """The collections that saw a run's statements: from its start to the first one after its end."""
    end = (finished_at or timezone.now()) + dt.timedelta(seconds=interval() + 5)
    return Window(started_at, end)


@dataclass(frozen=True)
class Row:
    """One line of the Queries tab."""

    totals: statements.Totals
    text: str


def top_statements(
    cluster: Cluster, window: Window, *, by: str = "total", limit: int = 50, queryid: int | None = None
) -> list[Row]:
    """The statements of a window, summed per statement, database and role, in the order asked."""
    deltas = StatementDelta.objects.filter(cluster=cluster, ts__gt=window.start, ts__lte=window.end)
    if queryid is not None:
        deltas = deltas.filter(queryid=queryid)
    sums = deltas.values("queryid", "database", "role").annotate(**{f"s_{n}": Sum(n) for n in COUNTER_FIELDS})
    totals = [
        statements.Totals(
            row["queryid"],
            row["database"],
            row["role"],
            int(row["s_calls"]),
            float(row["s_total_ms"]),
            float(row["s_sq_ms"]),
            int(row["s_rows"]),
            int(row["s_blks_hit"]),
            int(row["s_blks_read"]),
        )
        for row in sums
    ]
    chosen = statements.ordered(totals, by)[:limit]
    texts = dict(
        StatementText.objects.filter(cluster=cluster, queryid__in={t.queryid for t in chosen}).values_list(
            "queryid", "text"
        )
    )
    return [Row(t, texts.get(t.queryid, "")) for t in chosen]


def statement_rows(cluster: Cluster, queryid: int, window: Window) -> list[Row]:
    """One statement's lines of the window, one per database and role."""
    rows = top_statements(cluster, window, limit=10_000, queryid=queryid)
    return rows


def statement_text(cluster: Cluster, queryid: int) -> str | None:
    return (
        StatementText.objects.filter(cluster=cluster, queryid=queryid).values_list("text", flat=True).first()
    )


def statement_series(cluster: Cluster, queryid: int, window: Window) -> list[dict[str, float | int]]:
    """One statement's calls and mean time per collection over the window (every database and
    role together), for its chart: ``t`` in ms since the epoch."""
    rows = (
        StatementDelta.objects.filter(
            cluster=cluster, queryid=queryid, ts__gt=window.start, ts__lte=window.end
        )
        .values("ts")
        .annotate(calls=Sum("calls"), total=Sum("total_ms"))
        .order_by("ts")
    )
    return [
        {"t": int(r["ts"].timestamp() * 1000), "calls": int(r["calls"]), "mean_ms": r["total"] / r["calls"]}
        for r in rows
    ]


def state_of(cluster: Cluster) -> StatementsState | None:
    return StatementsState.objects.filter(cluster=cluster).first()


# --- reset ---------------------------------------------------------------------------------------


@on_node(timeout=60)
def reset_statements(cluster: Cluster) -> StatementsState:
    """``pg_stat_statements_reset()`` on the cluster, by the panel's superuser. What ran since the
    last collection is collected first; the next collection then sees the server's new reset time
    and counts every statement from zero, so windows across the reset stay right."""
    from panel.insights.services.collection import collect_cluster

    cluster.require_serving()
    collect_cluster(cluster)
    try:
        with dbconn.admin_connection(cluster) as conn:
            conn.execute("SELECT public.pg_stat_statements_reset()")
    except dbconn.DatabaseError as exc:
        raise ServiceError(
            N_("The statistics could not be reset: %(reason)s"),
            code="queries.reset_failed",
            params={"reason": exc},
        ) from None
    now = timezone.now()
    state, _created = StatementsState.objects.get_or_create(
        cluster=cluster, defaults={"status": StatementsStatus.COLLECTING}
    )
    state.reset_at = now
    state.save(update_fields=["reset_at"])
    cluster.log_event("statements-reset", _("Query statistics (pg_stat_statements) were reset."))
    return state


def prune_statements(now: dt.datetime | None = None) -> int:
    """Delete deltas older than 24 hours, and the texts no delta or counter names any more."""
    now = now or timezone.now()
    deleted, _ = StatementDelta.objects.filter(ts__lt=now - RAW_RETENTION).delete()
    for cluster_id in StatementText.objects.values_list("cluster_id", flat=True).distinct():
        used = set(StatementDelta.objects.filter(cluster_id=cluster_id).values_list("queryid", flat=True))
        used |= set(StatementCounter.objects.filter(cluster_id=cluster_id).values_list("queryid", flat=True))
        texts = StatementText.objects.filter(cluster_id=cluster_id).values_list("pk", "queryid")
        stale = [pk for pk, queryid in texts if queryid not in used]
        for start in range(0, len(stale), 500):
            StatementText.objects.filter(pk__in=stale[start : start + 500]).delete()
    return deleted
