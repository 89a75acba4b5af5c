"""Statement statistics (the Queries tab): a window's top statements and one statement's series,
resetting the statistics (after collecting what ran since the last collection), pruning.

A window's figures are the sums of the deltas each collection stored (``statement_store``), so
"the last hour" does not depend on when the statistics were last reset."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext_lazy

from panel.clusters.face import dbconn, transitions
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.insights.lib import statements
from panel.insights.models import (
    StatementCounter,
    StatementDelta,
    StatementsState,
    StatementsStatus,
    StatementText,
)
from panel.insights.services.collection import collect_cluster
from panel.insights.services.statement_store import COUNTER_FIELDS
from panel.insights.services.tiers import RAW_RETENTION, interval

log = logging.getLogger(__name__)

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
    sums: Iterable[Mapping[str, Any]] = deltas.values("queryid", "database", "role").annotate(
        **{f"s_{n}": Sum(n) for n in COUNTER_FIELDS}
    )
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
    transitions.require_serving(cluster)
    collect_cluster(cluster)
    try:
        with dbconn.admin_connection(cluster) as conn:
            conn.execute("SELECT public.pg_stat_statements_reset()")
    except dbconn.DatabaseError as exc:
        raise ServiceError.because(
            N_("The statistics could not be reset: %(reason)s"), "queries.reset_failed", exc
        ) from None
    now = timezone.now()
    state, _created = StatementsState.objects.get_or_create(
        cluster=cluster, defaults={"status": StatementsStatus.COLLECTING}
    )
    state.reset_at = now
    state.save(update_fields=["reset_at"])
    transitions.log_event(
        cluster, "statements-reset", Message(N_("Query statistics (pg_stat_statements) were reset."))
    )
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
