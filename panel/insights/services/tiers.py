"""The shape of the metrics store: how long points and rollups are kept, the rollup tiers, the chart
ranges, the collection interval."""

from __future__ import annotations

import datetime as dt

from django.conf import settings

from panel.insights.engine import collector
from panel.insights.lib import metrics

RAW_RETENTION = dt.timedelta(hours=24)
ROLLUP_RETENTION = dt.timedelta(days=30)
MINUTE = 60
FIVE_MINUTES = metrics.ROLLUP_SECONDS
QUARTER = 900  # a tier of earlier versions: still pruned, no longer written or read
HOUR = 3600
FOUR_HOURS = 4 * HOUR
# Rollup tiers (MetricRollup.seconds): 1 and 5 minutes from the raw points, hours and 4 hours
# merged from the 5-minute ones. 1-minute rollups are kept as long as raw points, the others 30 days.
# Each chart range reads one tier, a few hundred points a line (reading.RESOLUTIONS).
RAW_TIERS = (MINUTE, FIVE_MINUTES)
MERGED_TIERS = (HOUR, FOUR_HOURS)
# Grace over the collector's own budget before the cycle stops waiting for a cluster.
ABANDON_AFTER = collector.BUDGET_SECONDS + 1.0
START_COUNTER = "_start"  # the postmaster's start time: a change means every counter restarted

RANGES: dict[str, dt.timedelta] = {
    "1h": dt.timedelta(hours=1),
    "6h": dt.timedelta(hours=6),
    "24h": dt.timedelta(hours=24),
    "7d": dt.timedelta(days=7),
    "30d": dt.timedelta(days=30),
}


def interval() -> int:
    return int(settings.PANEL_METRICS_INTERVAL)


def collect_workers() -> int:
    """How many clusters a collection cycle reads at once (PANEL_COLLECT_CONCURRENCY)."""
    return max(1, int(settings.PANEL_COLLECT_CONCURRENCY))
