"""sysbench from the Benchmarks tab in a real browser, with a real worker: the engine select shows
its own fields and scripts, sysbench prepare from the data set form, a run through a transaction
pool whose chart grows while it runs, and a comparison with a pgbench-shaped run."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from benchmarks.models import BenchmarkRun
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from panel.pools import services as pool_services
from tests.browser.conftest import log_in, snapshot, wait_for_htmx
from tests.browser.run_pages import POINTS_JS, compare_in_history, points_seen_while_running

pytestmark = pytest.mark.integration

P95_JS = "Chart.getChart(document.querySelector('#chart-latency')).data.datasets[2].data.map(p => p.y)"


def test_sysbench_prepare_run_through_a_pool_live_chart_and_compare(
    live_server, celery_worker, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    pool = pool_services.create_pool(cluster, "txpool", "defaultdb", None, "transaction", 5)
    tab = f"/clusters/{cluster.pk}/benchmarks/"
    log_in(page, live_server.url, tab)

    # The data set form: sysbench's fields instead of pgbench's.
    init = page.locator("#init-form")
    expect(init.get_by_label("Tables")).to_be_hidden()
    init.get_by_label("Engine").select_option("sysbench")
    expect(init.get_by_label("Scale factor")).to_be_hidden()
    init.get_by_label("Database").select_option("defaultdb")
    init.get_by_label("Tables").fill("2")
    init.get_by_label("Rows per table").fill("5000")
    init.get_by_role("button", name="Initialise").click()
    row = page.locator("tr[data-dataset='defaultdb'][data-engine='sysbench']")
    expect(row).to_have_attribute("data-status", "succeeded", timeout=60_000)
    expect(row).to_contain_text("2 × 5000 rows")

    # The run form: sysbench's scripts only, pgbench's own options out of sight.
    wait_for_htmx(page)
    form = page.locator("#run-form")
    expect(form.get_by_label("Query mode")).to_be_attached()
    form.get_by_label("Engine").select_option("sysbench")
    assert form.get_by_label("Script", exact=True).input_value() == "oltp_read_write"
    expect(form.locator("[data-bench-engine='pgbench']").first).to_be_hidden()
    expect(form.get_by_label("Web app without a pool: a new connection per transaction (-C)")).to_be_hidden()
    form.get_by_label("Script", exact=True).select_option("oltp_read_only")
    form.get_by_label("Target").select_option(str(pool.pk))
    form.get_by_label("Clients").fill("2")
    form.get_by_label("Duration (s)").fill("6")
    form.get_by_label("Duration (s)").press("Tab")
    expect(page.locator("#run-warnings")).to_contain_text("--db-ps-mode=disable", timeout=5_000)
    snapshot(page, "sysbench-0-form")
    form.get_by_role("button", name="Launch run").click()
    expect(page).to_have_url(re.compile(rf".*{tab}runs/[0-9a-f-]+/$"), timeout=10_000)
    run = BenchmarkRun.objects.get(cluster=cluster)
    assert run.engine == "sysbench" and run.pool_name == "txpool"

    page.wait_for_function("() => window.Chart && Chart.getChart(document.querySelector('#chart-tps'))")
    seen_while_running = points_seen_while_running(page, seconds=40)
    growth = max(seen_while_running, default=0) - min(seen_while_running, default=0)
    assert growth >= 2, f"only saw {sorted(seen_while_running)} points while the run was running"
    expect(page.locator("#bench-run-live")).to_have_attribute("data-status", "succeeded", timeout=15_000)
    run.refresh_from_db()
    assert page.evaluate(POINTS_JS) == run.samples.count() >= 5
    # The p95 line is sysbench's own per-second percentile.
    assert page.evaluate(P95_JS) == [s.p95_ms for s in run.samples.order_by("seq")]
    expect(page.locator("#bench-run-live")).to_contain_text("Latency p99 (ms)")
    expect(page.locator("#bench-command")).to_contain_text("--db-ps-mode=disable")
    expect(page.locator("#bench-run-live")).to_contain_text("sysbench ran to the end")
    snapshot(page, "sysbench-1-run")

    other = make_run(cluster, samples=4, label="pgbench baseline", clients=2)
    compare_in_history(page, live_server.url, tab, run, other)
    expect(page.locator(f".bench-compare-table tr[data-run='{run.pk}']")).to_be_visible()
    expect(page.locator("[data-bench-compare][data-drawn='true']")).to_be_visible()
