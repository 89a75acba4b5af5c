"""Issue 11, item 4: time axes that read right.

Insights draws on a time scale (the vendored date adapter) with ticks at regular, round UTC times,
labelled in UTC even in a browser set to another time zone, and a cluster younger than the window
fills the chart from its first point instead of a sliver at the end of an hour. A run's charts
have regular ticks of seconds from 0 over the run's duration.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Browser, Page

from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.insights.models import MetricPoint
from tests.browser.conftest import log_in

pytestmark = pytest.mark.integration

TPS = "Chart.getChart(document.querySelector(\"canvas[data-chart='tps']\"))"
AXIS_JS = """(chart) => {
  const x = chart.scales.x;
  return {type: x.type, min: x.min, max: x.max, ticks: x.ticks.map(t => ({value: t.value, label: t.label}))};
}"""
# India is UTC+5:30: local hour and minute labels differ from UTC ones, and local hours fall on :30 UTC.
ZONE = "Asia/Kolkata"


@pytest.fixture
def kolkata_page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(timezone_id=ZONE, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def axis_of(page: Page, canvas: str) -> dict:
    # The login's redirect lands before the page's deferred scripts have run: until Chart.js has
    # loaded, the bare name ``Chart`` would throw (a ReferenceError ends the wait at once).
    handle = page.wait_for_function(
        f"() => {{ const c = window.Chart && Chart.getChart(document.querySelector({canvas!r})); "
        "return c && c.data.datasets.length && c.scales.x.ticks.length ? c : null; }"
    )
    return page.evaluate(AXIS_JS, handle)


def assert_regular(values: list[float], steps: tuple[float, ...]) -> float:
    """Three or more ticks, equally spaced by one of ``steps``, each a multiple of it."""
    assert len(values) >= 3, values
    gaps = {round(b - a, 6) for a, b in zip(values, values[1:], strict=False)}
    assert len(gaps) == 1, f"irregular ticks: {values}"
    step = gaps.pop()
    assert step in steps, f"step {step} is not a round one"
    assert all(round(v % step, 6) == 0 for v in values), f"ticks off the step's multiples: {values}"
    return step


def test_insights_time_axis_regular_utc_ticks_from_first_point(
    live_server, journey_user: User, kolkata_page: Page
) -> None:
    cluster: Cluster = make_cluster_row(journey_user, name="db-axes")
    now = timezone.now().replace(microsecond=0)
    first = now - dt.timedelta(minutes=23, seconds=7)
    MetricPoint.objects.bulk_create(
        MetricPoint(
            cluster=cluster,
            metric="tps",
            labels="db=defaultdb",
            ts=first + dt.timedelta(seconds=15 * i),
            value=100 + i % 9,
        )
        for i in range(int((now - first).total_seconds() // 15) + 1)
    )
    page = kolkata_page
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/insights/")
    assert page.evaluate("new Date().getTimezoneOffset()") == -330  # the browser is 5:30 ahead of UTC

    axis = axis_of(page, "canvas[data-chart='tps']")
    assert axis["type"] == "time"
    # The 1-hour window starts where this 23-minute-old cluster's data starts, not an hour ago.
    assert axis["min"] == pytest.approx(first.timestamp() * 1000, abs=1000)
    assert axis["max"] >= now.timestamp() * 1000 - 60_000
    values = [t["value"] for t in axis["ticks"]]
    minute = 60_000
    assert_regular(values, tuple(k * minute for k in (1, 2, 5, 10, 15, 30)))
    labels = [t["label"] for t in axis["ticks"]]
    utc = [dt.datetime.fromtimestamp(v / 1000, dt.UTC).strftime("%H:%M") for v in values]
    assert labels == utc, f"labels not in UTC: {labels} for {utc}"


def test_run_charts_tick_seconds_regularly_over_the_duration(
    live_server, journey_user: User, page: Page
) -> None:
    cluster = make_cluster_row(journey_user, name="db-axes-run")
    run = make_run(cluster, samples=37, duration_s=60)
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/runs/{run.pk}/")
    for canvas in ("#chart-tps", "#chart-latency"):
        axis = axis_of(page, canvas)
        assert axis["min"] == 0
        assert axis["max"] == 60  # the run's duration: the line fills the chart as the run goes
        values = [t["value"] for t in axis["ticks"]]
        assert values[0] == 0 and values[-1] == 60
        assert assert_regular(values, (1, 2, 5, 10, 15, 30, 60)) == 10
