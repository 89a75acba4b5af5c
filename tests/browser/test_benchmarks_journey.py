"""Issue 4's journey in a real browser, with a real worker and pgbench: initialise a data set from
the form and watch its bar finish, launch a 6 s run and watch new chart points arrive while it runs,
then tick two runs in the history and compare them."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from benchmarks.models import BenchmarkRun
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from tests.browser.conftest import log_in, snapshot, wait_for_htmx
from tests.browser.run_pages import POINTS_JS, compare_in_history, points_seen_while_running

pytestmark = pytest.mark.integration

STILL_JS = """() => {
  const bar = document.querySelector('.bench-run-bar .progress-bar');
  const spinner = document.querySelector('.bench-run-status .spinner-grow');
  return {
    bar: bar ? getComputedStyle(bar).transitionDuration : null,
    spinner: spinner ? getComputedStyle(spinner).animationName : 'none',
  };
}"""
LATENCY_JS = "Chart.getChart(document.querySelector('#chart-latency')).data.datasets.length"


def test_init_run_live_charts_and_compare(
    live_server, celery_worker, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    tab = f"/clusters/{cluster.pk}/benchmarks/"
    log_in(page, live_server.url, tab)
    expect(page.get_by_role("link", name="Benchmarks")).to_have_attribute("aria-current", "page")
    expect(page.get_by_text("No data set yet.")).to_be_visible()

    # Initialise defaultdb at scale 1 and watch the bar until the data set is ready.
    init = page.locator("#init-form")
    init.get_by_label("Database").select_option("defaultdb")
    init.get_by_label("Scale factor").fill("1")
    init.get_by_role("button", name="Initialise").click()
    row = page.locator("tr[data-dataset='defaultdb']")
    expect(row).to_be_visible(timeout=10_000)
    expect(row).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(row.get_by_text("Ready")).to_be_visible()
    snapshot(page, "bench-0-dataset")

    # A 6 s run of 2 clients, launched from the form: the browser lands on its page.
    wait_for_htmx(page)
    form = page.locator("#run-form")
    form.get_by_label("Clients").fill("2")
    form.get_by_label("Duration (s)").fill("6")
    form.get_by_label("Duration (s)").press("Tab")
    # Shown before launch, not blocking: 2 clients on a data set of scale 1 contend for one branch row.
    expect(page.locator("#run-warnings")).to_contain_text("2 clients on a scale of 1", timeout=5_000)
    form.get_by_role("button", name="Launch run").click()
    expect(page).to_have_url(re.compile(rf".*{tab}runs/[0-9a-f-]+/$"), timeout=10_000)
    run = BenchmarkRun.objects.get(cluster=cluster)

    # While pgbench runs, the chart grows point by point without a reload.
    page.wait_for_function("() => window.Chart && Chart.getChart(document.querySelector('#chart-tps'))")
    assert page.evaluate(LATENCY_JS) == 4
    # Nothing on the watched page animates (each frame is CPU the run on this machine loses): the
    # bar jumps to each second's width instead of a 0.6 s transition, the spinner stands still.
    assert page.evaluate(STILL_JS) == {"bar": "0s", "spinner": "none"}
    seen_while_running = points_seen_while_running(page, seconds=30)
    growth = max(seen_while_running, default=0) - min(seen_while_running, default=0)
    assert growth >= 3, f"only saw {sorted(seen_while_running)} points while the run was running"
    expect(page.locator("#bench-run-live")).to_have_attribute("data-status", "succeeded", timeout=15_000)
    expect(page.locator("#bench-run-live")).to_contain_text("Transactions processed")
    assert page.evaluate(POINTS_JS) == run.samples.count() >= 5
    snapshot(page, "bench-1-run")

    # A second, finished run recorded earlier; tick both in the history and compare them.
    other = make_run(cluster, samples=4, label="earlier baseline", clients=4)
    compare_in_history(page, live_server.url, tab, run, other)
    table = page.locator(".bench-compare-table")
    expect(table.locator(f"tr[data-run='{run.pk}']")).to_be_visible()
    expect(table.locator(f"tr[data-run='{other.pk}']")).to_contain_text("earlier baseline")
    expect(page.locator("[data-bench-compare][data-drawn='true']")).to_be_visible()
    assert (
        page.evaluate(
            "Chart.getChart(document.querySelector('[data-bench-compare] canvas[data-chart=\"tps\"]')).data.datasets.length"
        )
        == 2
    )
    snapshot(page, "bench-2-compare")
