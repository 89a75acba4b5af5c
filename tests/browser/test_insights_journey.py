"""Issue 5's Insights tab in a real browser: a cluster collected a few times around pgbench load
draws its throughput chart with data, and the range selector fetches another window in place."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters.models import Cluster
from panel.insights import services
from panel.pools import services as pool_services
from panel.pools.tests.test_integration_pgbench import pgbench
from tests.browser.conftest import log_in, snapshot

pytestmark = pytest.mark.integration

TPS = "Chart.getChart(document.querySelector(\"canvas[data-chart='tps']\"))"
TPS_HAS_DATA_JS = f"{TPS}.data.datasets.length > 0 && {TPS}.data.datasets[0].data.some(v => v !== null)"
TPS_MAX_JS = f"Math.max(...{TPS}.data.datasets.flatMap(d => d.data.filter(v => v !== null)))"
X_MIN_JS = f"{TPS}.options.scales.x.min"


def collect_under_load(cluster: Cluster) -> None:
    """Three collections with pgbench runs between them: TPS rates from the counters' deltas."""
    port = int(cluster.port or 0)
    init = pgbench(cluster, ["-i", "-s", "1", "-q"], port=port, dbname="defaultdb")
    assert init.returncode == 0, init.stderr[-2000:]
    services.collect_cluster(cluster)
    for _ in range(2):
        run = pgbench(cluster, ["-c", "2", "-T", "2"], port=port, dbname="defaultdb")
        assert run.returncode == 0, run.stderr[-2000:]
        services.collect_cluster(cluster)


def test_insights_tab_draws_tps_and_switches_range(live_server, journey_cluster: Cluster, page: Page) -> None:
    cluster = journey_cluster
    collect_under_load(cluster)
    tab = f"/clusters/{cluster.pk}/insights/"
    log_in(page, live_server.url, tab)
    expect(page.get_by_role("link", name="Insights")).to_have_attribute("aria-current", "page")

    charts = page.locator("[data-insights]")
    expect(charts).to_have_attribute("data-loaded-range", "1h", timeout=10_000)
    page.wait_for_function(f"() => {TPS_HAS_DATA_JS}", timeout=10_000)
    assert page.evaluate(TPS_MAX_JS) > 1  # pgbench's transactions per second, not an idle trickle
    expect(page.locator("canvas[data-chart='tps']").locator("..")).not_to_have_class("is-empty")
    hour_min = page.evaluate(X_MIN_JS)
    resolution = page.locator("[data-resolution-note]")
    expect(resolution).to_have_text("Each point is one collection.")
    snapshot(page, "insights-0-1h")

    # 6 h: a new request for the data, drawn in place (no reload), the same points.
    with page.expect_request(lambda r: "/insights/data/" in r.url and "range=6h" in r.url):
        page.get_by_role("button", name="6 h").or_(page.get_by_role("link", name="6 h")).click()
    expect(charts).to_have_attribute("data-loaded-range", "6h", timeout=10_000)
    expect(page).to_have_url(f"{live_server.url}{tab}?range=6h")
    expect(page.locator("a[data-range-key='6h']")).to_have_attribute("aria-pressed", "true")
    # The cluster is minutes old: both windows start where its data starts (issue 11, item 4), at
    # 6 h that is the 1-minute rollup holding its first collection.
    assert 0 <= hour_min - page.evaluate(X_MIN_JS) < 60_000
    page.wait_for_function(f"() => {TPS_HAS_DATA_JS}", timeout=5_000)
    # Six hours read 1-minute figures: the raw points not rolled up yet, averaged per minute.
    expect(resolution).to_have_text("Each point is a 1-minute average.")
    # The tooltip of an average shows the bucket's peak beside it.
    label = page.evaluate(
        f"""(() => {{
          const chart = {TPS};
          const dataset = chart.data.datasets.find(d => d.peaks && d.data.some(v => v !== null));
          const i = dataset.data.findIndex(v => v !== null);
          const item = {{dataset: {{...dataset, peaks: dataset.peaks.map(() => 123456)}}, dataIndex: i, parsed: {{y: dataset.data[i]}}}};
          return chart.options.plugins.tooltip.callbacks.label(item);
        }})()"""
    )
    assert label.endswith("(peak 123.5k/s)"), label
    snapshot(page, "insights-1-6h")

    # A pool created while the tab is open: the next refresh adds its saturation chart in place.
    assert not page.locator("canvas[data-chart='pool:late-pool']").count()
    pool_services.create_pool(cluster, "late-pool", "defaultdb", None, "transaction", 3)
    services.collect_cluster(cluster)
    page.get_by_role("link", name="1 h").click()
    expect(charts).to_have_attribute("data-loaded-range", "1h", timeout=10_000)
    card = page.locator(
        "section.insights-chart-card", has=page.locator("canvas[data-chart='pool:late-pool']")
    )
    expect(card).to_contain_text("Pool late-pool")
    expect(page.get_by_role("heading", name="Pool saturation")).to_be_visible()
    size_line = (
        "Chart.getChart(document.querySelector(\"canvas[data-chart='pool:late-pool']\")).data.datasets"
    )
    page.wait_for_function(
        f"() => {size_line}.some(d => d.label === 'pool size' && d.data.includes(3))", timeout=5_000
    )
    snapshot(page, "insights-2-late-pool")
