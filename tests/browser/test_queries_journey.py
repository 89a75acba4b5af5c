"""Issue 17's Queries tab in a real browser: after a pgbench run the tab lists its statements, the
window and the order change in place (HTMX, no reload), a statement's page draws its chart, and
the reset asks for confirmation in a modal before it clears the server's counters."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.insights import services
from panel.pools.tests.test_integration_pgbench import pgbench
from tests.browser.conftest import log_in, snapshot, wait_for_htmx

pytestmark = pytest.mark.integration

CHART = "Chart.getChart(document.querySelector('canvas[data-query-chart]'))"


def run_pgbench(cluster: Cluster) -> None:
    port = int(cluster.port or 0)
    init = pgbench(cluster, ["-i", "-s", "1", "-q"], port=port, dbname="defaultdb")
    assert init.returncode == 0, init.stderr[-2000:]
    services.collect_cluster(cluster)
    for _ in range(2):
        run = pgbench(cluster, ["-n", "-c", "2", "-t", "100"], port=port, dbname="defaultdb")
        assert run.returncode == 0, run.stderr[-2000:]
        services.collect_cluster(cluster)


def abalance_calls(cluster: Cluster) -> int:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0)::bigint FROM public.pg_stat_statements "
            "WHERE query LIKE 'SELECT abalance%%'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_queries_tab_lists_sorts_shows_and_resets(live_server, journey_cluster: Cluster, page: Page) -> None:
    cluster = journey_cluster
    run_pgbench(cluster)
    tab = f"/clusters/{cluster.pk}/queries/"
    log_in(page, live_server.url, tab)
    expect(page.get_by_role("link", name="Queries", exact=True)).to_have_attribute("aria-current", "page")
    table = page.locator("table.queries-table")
    expect(table).to_contain_text("UPDATE pgbench_accounts")
    snapshot(page, "queries-0-tab")

    # The window and the order swap the table in place: the page is never reloaded.
    page.evaluate("() => { window.queriesNoReload = true; }")
    page.locator("a[data-window='24h']").click()
    wait_for_htmx(page)
    expect(page).to_have_url(f"{live_server.url}{tab}?window=24h&by=total")
    expect(page.locator("a[data-window='24h']")).to_have_attribute("aria-pressed", "true")
    page.locator("a[data-sort='calls']").click()
    wait_for_htmx(page)
    expect(page).to_have_url(f"{live_server.url}{tab}?window=24h&by=calls")
    expect(page.locator("th[aria-sort] a[data-sort='calls']")).to_be_visible()
    assert page.evaluate("() => window.queriesNoReload === true")
    calls = [int(c) for c in page.locator("td[data-figure='calls']").all_inner_texts()]
    assert calls == sorted(calls, reverse=True) and calls[0] == 400  # 200 transactions, 2 runs

    # A statement's page: its whole text, a copy button, its chart with a point per collection.
    page.locator("td.queries-text a", has_text="UPDATE pgbench_accounts").click()
    expect(page.locator("#query-text")).to_contain_text(
        "UPDATE pgbench_accounts SET abalance = abalance + $1"
    )
    expect(page.get_by_role("button", name="Copy")).to_be_visible()
    # A page load: the statement's text shows before its deferred scripts (Chart.js) have run.
    page.wait_for_function(
        f"() => window.Chart && {CHART} && {CHART}.data.datasets[0].data.length === 2", timeout=10_000
    )
    assert page.evaluate(f"() => {CHART}.data.datasets[0].data.map(p => p.y)") == [200, 200]
    snapshot(page, "queries-1-detail")

    # The reset asks first; cancelling keeps the counters, confirming clears them.
    page.get_by_role("link", name="← All queries").click()
    assert abalance_calls(cluster) == 400
    page.get_by_role("button", name="Reset statistics").click()
    modal = page.locator("#reset-queries-modal")
    expect(modal).to_be_visible()
    modal.get_by_role("button", name="Cancel").click()
    expect(modal).to_be_hidden()
    assert abalance_calls(cluster) == 400
    page.get_by_role("button", name="Reset statistics").click()
    modal.locator("[data-confirm-reset]").click()
    expect(page.get_by_text("Query statistics were reset.")).to_be_visible()
    assert abalance_calls(cluster) == 0
    expect(page.locator(".queries-window")).to_contain_text("Last reset")
