"""The Content-Security-Policy in a real browser (Debian's Chromium through Playwright): the main
pages of a real cluster raise no violation and their JavaScript still works (htmx swaps, Chart.js
draws, progress bars get their width), no page holds an inline script, and a script injected into
a page is refused by the browser."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from panel.insights import services as insight_services
from panel.pools import services as pool_services
from tests.browser.conftest import (  # noqa: F401  (fixtures)
    browser_context_args,
    browser_type_launch_args,
    journey_cluster,
    journey_user,
    log_in,
    wait_for_htmx,
)

pytestmark = [pytest.mark.integration, pytest.mark.browser]

# Playwright adds this before any script of the page (through the DevTools protocol, which the
# page's policy does not govern): every violation the browser reports is kept for the test.
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sample || ""));
});
"""
# Waits are written as functions: Playwright polls a bare expression with eval, which the policy
# refuses (tests/browser/conftest.py's wait_for_htmx does the same).
EXECUTABLE_INLINE = "document.querySelectorAll('script:not([src]):not([type=\"application/json\"])').length"
JSON_ONLY = "[...document.querySelectorAll('script:not([src])')].every(s => s.type === 'application/json')"


@pytest.fixture
def watched(page: Page) -> Iterator[tuple[Page, list[str]]]:
    messages: list[str] = []
    page.add_init_script(WATCH)
    page.on(
        "console", lambda msg: messages.append(msg.text) if "Content Security Policy" in msg.text else None
    )
    page.on("pageerror", lambda exc: messages.append(f"page error: {exc}"))
    yield page, messages


def _clean(page: Page, messages: list[str], where: str) -> None:
    wait_for_htmx(page)
    violations = page.evaluate("window.__violations")
    assert not violations and not messages, (where, violations, messages)
    assert page.evaluate(EXECUTABLE_INLINE) == 0, where
    assert page.evaluate(JSON_ONLY), where  # json_script data blocks are not run by the browser
    assert page.evaluate("htmx.config.includeIndicatorStyles") is False
    assert page.locator("style").count() == 0, where  # no <style> injected by a library


def test_the_main_pages_work_under_the_policy(
    live_server,
    journey_cluster: Cluster,  # noqa: F811  (the fixture imported above)
    watched: tuple[Page, list[str]],
) -> None:
    page, messages = watched
    cluster = journey_cluster
    pool_services.create_pool(cluster, "test-pool", "defaultdb", None, "transaction", 11)
    insight_services.collect_cluster(cluster)
    run = make_run(cluster, samples=5)
    base = f"/clusters/{cluster.pk}"

    log_in(page, live_server.url, "/clusters/")
    expect(page.get_by_role("link", name="db-journey")).to_be_visible()
    _clean(page, messages, "cluster list")

    # Overview: the connection box is an htmx form; changing its format swaps it in place.
    page.goto(f"{live_server.url}{base}/")
    with page.expect_request(lambda r: "/connection/" in r.url):
        page.locator("#conn-view").select_option("uri")
    wait_for_htmx(page)
    expect(page.locator("#connection-details")).to_contain_text("postgresql://doadmin")
    _clean(page, messages, "overview")

    # Pools: the budget bar's width comes from data-progress through panel.js (11 of 22).
    page.get_by_role("link", name="Connection Pools").click()
    expect(page.get_by_text("test-pool").first).to_be_visible()
    bar = page.locator(".pool-budget-bar .progress-bar")
    expect(bar).to_have_attribute("data-progress", "50")
    ratio = page.evaluate(
        "(() => { const b = document.querySelector('.pool-budget-bar .progress-bar');"
        " return b.getBoundingClientRect().width / b.parentElement.getBoundingClientRect().width; })()"
    )
    assert 0.45 < ratio < 0.55, ratio
    # Its live figures poll every 3 s, paused by panel.js while the tab is hidden (htmx's own
    # "[document.visibilityState …]" filter would need eval).
    stats: list[str] = []
    page.on("request", lambda r: stats.append(r.url) if "/pools/stats/" in r.url else None)
    page.evaluate(
        "Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'})"
    )
    page.wait_for_timeout(3500)
    assert stats == []
    page.evaluate("delete document.visibilityState")
    with page.expect_request(lambda r: "/pools/stats/" in r.url, timeout=5_000):
        pass
    _clean(page, messages, "pools tab")

    page.get_by_role("link", name="Benchmarks").click()
    expect(page.locator("#run-form")).to_be_visible()
    wait_for_htmx(page)  # the form's check runs through htmx on load
    _clean(page, messages, "benchmarks tab")

    page.get_by_role("link", name="Insights").click()
    expect(page.locator("[data-insights]")).to_have_attribute("data-loaded-range", "1h", timeout=10_000)
    assert page.evaluate("!!Chart.getChart(document.querySelector('canvas[data-chart]'))")
    _clean(page, messages, "insights tab")

    # A finished run: Chart.js draws its samples.
    page.goto(f"{live_server.url}{base}/benchmarks/runs/{run.pk}/")
    page.wait_for_function("() => { const c = document.querySelector('canvas[data-chart]');"
                           " return c && Chart.getChart(c) && Chart.getChart(c).data.datasets.length > 0; }")  # fmt: skip
    _clean(page, messages, "run page")

    # The browser enforces the policy: a script injected into the page does not run.
    page.evaluate(
        "(() => { const s = document.createElement('script'); s.textContent = 'window.__ran = 1';"
        " document.body.appendChild(s); })()"
    )
    page.wait_for_function("() => window.__violations.length > 0")
    assert page.evaluate("window.__ran") is None
    assert page.evaluate("window.__violations")[0].startswith("script-src")
