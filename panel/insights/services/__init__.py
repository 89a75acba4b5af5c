"""Collecting, storing, rolling up and reading metrics; the entry points of tasks, command and views.

- ``tiers``: retention, rollup tiers, chart ranges, the collection interval.
- ``collection``: read every cluster concurrently, store gauges, rates and gaps, then alerts.
- ``rollups``: 1- and 5-minute rollups of the raw points, hourly and 4-hour merges, pruning;
  the buckets are aggregated by the database.
- ``reading``: a chart page's series at a resolution that keeps a few hundred points a line,
  and the last collection's values.
"""

from panel.insights.lib import metrics
from panel.insights.services.alerts import evaluate_alerts, firing_alerts, save_rule
from panel.insights.services.collection import (
    collect_all,
    collect_cluster,
    current_values,
    note_postmaster_gone,
    store,
    target_for,
)
from panel.insights.services.reading import (
    RESOLUTIONS,
    Latest,
    Resolution,
    Series,
    SeriesPoint,
    Wanted,
    labels_of,
    latest,
    latest_of,
    read_series,
    resolution_for,
    series,
    series_for_range,
    server_started_at,
)
from panel.insights.services.rollups import (
    last_bucket,
    prune,
    prune_and_rollup,
    rollup,
    rollup_merged,
    rollup_raw,
)
from panel.insights.services.tiers import (
    ABANDON_AFTER,
    FIVE_MINUTES,
    FOUR_HOURS,
    HOUR,
    MERGED_TIERS,
    MINUTE,
    QUARTER,
    RANGES,
    RAW_RETENTION,
    RAW_TIERS,
    ROLLUP_RETENTION,
    START_COUNTER,
    collect_workers,
    interval,
)

__all__ = [
    "ABANDON_AFTER",
    "FIVE_MINUTES",
    "FOUR_HOURS",
    "HOUR",
    "MERGED_TIERS",
    "MINUTE",
    "QUARTER",
    "RANGES",
    "RAW_RETENTION",
    "RAW_TIERS",
    "RESOLUTIONS",
    "ROLLUP_RETENTION",
    "START_COUNTER",
    "Latest",
    "Resolution",
    "Series",
    "SeriesPoint",
    "Wanted",
    "collect_all",
    "collect_workers",
    "collect_cluster",
    "current_values",
    "evaluate_alerts",
    "firing_alerts",
    "interval",
    "labels_of",
    "last_bucket",
    "metrics",
    "latest",
    "latest_of",
    "note_postmaster_gone",
    "prune",
    "prune_and_rollup",
    "read_series",
    "resolution_for",
    "rollup",
    "rollup_merged",
    "rollup_raw",
    "save_rule",
    "series",
    "series_for_range",
    "server_started_at",
    "store",
    "target_for",
]
