"""What the Insights perf scripts share: Django set-up on the test settings, and a month of history.

Imported by ``insights.py`` and ``insights_page.py`` (run as scripts, so this directory is on
``sys.path``). Model imports happen inside the functions: Django is set up first.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from panel.clusters.models import Cluster

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "panel.test_settings"

DAYS = 30
RAW_HOURS = 24
RAW_STEP = 15  # seconds between raw points, as the collector's interval


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def setup_django() -> Path:
    """Set Django up on the test settings (a private data directory) and migrate; returns that directory."""
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return Path(settings.PANEL_DATA_DIR)


def store_history(cluster: Cluster, series: list[tuple[str, str]], now: dt.datetime) -> str:
    """Store, for each ``(metric, labels)``, 30 days of 5-minute rollups, their merges into the
    coarser tiers (``services.MERGED_TIERS``), 24 hours of raw points every 15 s (a NULL now and
    then) and their 1-minute rollups, as a cluster collected for a month holds. Returns a line
    saying what was generated."""
    from panel.insights import services
    from panel.insights.lib import metrics
    from panel.insights.models import MetricPoint, MetricRollup

    t0 = time.perf_counter()
    rollups, points = [], []
    for metric, labels in series:
        for b in range(DAYS * 86400 // metrics.ROLLUP_SECONDS):
            rollups.append(
                MetricRollup(
                    cluster=cluster,
                    metric=metric,
                    labels=labels,
                    bucket=metrics.bucket_start(now - dt.timedelta(seconds=metrics.ROLLUP_SECONDS * b)),
                    min=b % 7,
                    max=b % 7 + 5,
                    avg=b % 7 + 2.5,
                    count=20,
                )
            )
        for s in range(RAW_HOURS * 3600 // RAW_STEP):
            points.append(
                MetricPoint(
                    cluster=cluster,
                    metric=metric,
                    labels=labels,
                    ts=now - dt.timedelta(seconds=RAW_STEP * s),
                    value=None if s % 500 == 7 else s % 11 + 0.25,
                )
            )
    MetricRollup.objects.bulk_create(rollups, batch_size=2000)
    MetricPoint.objects.bulk_create(points, batch_size=2000)
    since, until = now - dt.timedelta(days=DAYS + 1), now + dt.timedelta(hours=1)
    merged = {seconds: services.rollup_merged(seconds, since, until) for seconds in services.MERGED_TIERS}
    minutes, _start = services.rollup_raw(services.MINUTE, now)
    tiers = ", ".join(f"{count} {seconds // 60}-minute" for seconds, count in merged.items())
    return (
        f"{len(series)} series: {minutes} 1-minute rollups, {len(rollups)} 5-minute, {tiers} ones, {len(points)} raw "
        f"points, generated in {time.perf_counter() - t0:.1f} s"
    )
