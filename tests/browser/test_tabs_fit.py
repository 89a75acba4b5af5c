"""Every tab of a cluster fits a 1,280 × 800 window, in English and in German: nothing runs past the
right edge of the main column, and a table too wide for it scrolls inside a box whose edges show
that there is more (issue 31: the pools and Queries tables were cut at the right edge, their last
columns behind a scroll bar nobody saw). Each tab is screenshotted for a person to look at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page

from panel.clusters.models import Cluster
from panel.pools import services as pool_services
from tests.browser.conftest import JOURNEY_PASSWORD, JOURNEY_USER, wait_for_htmx
from tests.browser.test_queries_journey import run_pgbench

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1280, 800

# What sticks out of the main column (elements inside a scroll box excepted: they scroll), and
# every scroll box that scrolls without the shadows that say so.
OVERFLOW = """() => {
  const main = document.querySelector("main.panel-main");
  const right = main.getBoundingClientRect().right;
  const name = (el) => el.tagName.toLowerCase() + (el.className && typeof el.className === "string"
    ? "." + el.className.trim().split(/\\s+/).join(".") : "");
  const found = [];
  if (document.documentElement.scrollWidth > window.innerWidth) {
    const wide = [...document.body.querySelectorAll("*")]
      .filter(el => !el.closest(".table-responsive") && el.getBoundingClientRect().right > window.innerWidth)
      .map(el => `${name(el)} (${Math.round(el.getBoundingClientRect().right)})`).slice(-3);
    found.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} > ${window.innerWidth}: ${wide.join(", ")}`);
  }
  for (const el of main.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || el.closest(".modal")) continue;
    const scroller = el.parentElement && el.parentElement.closest(".table-responsive");
    if (!scroller && box.right > right + 1) found.push(`${name(el)} ends at ${Math.round(box.right)} > ${Math.round(right)}`);
    if (el.matches(".table-responsive") && el.scrollWidth > el.clientWidth + 1
        && getComputedStyle(el).backgroundImage === "none") {
      found.push(`${name(el)} scrolls (${el.scrollWidth} > ${el.clientWidth}) without a cue`);
    }
  }
  return found;
}"""


def tab_links(page: Page) -> list[str]:
    return page.eval_on_selector_all(".cluster-tabs a.nav-link", "links => links.map(a => a.href)")


def visit_every_tab(browser: Browser, base_url: str, cluster: Cluster, locale: str, shots: Path) -> dict:
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale=locale)
    page = context.new_page()
    page.goto(f"{base_url}/login/")
    page.locator("input[name=username]").fill(JOURNEY_USER)
    page.locator("input[name=password]").fill(JOURNEY_PASSWORD)
    page.locator("button.btn-primary[type=submit]").click()
    page.wait_for_url(f"{base_url}/clusters/")
    page.goto(f"{base_url}/clusters/{cluster.pk}/")
    assert page.locator("html").get_attribute("lang") == locale[:2]
    problems = {}
    links = tab_links(page)
    assert len(links) >= 10, links
    for url in links:
        page.goto(url)
        page.wait_for_load_state("networkidle")
        wait_for_htmx(page)
        tab = url.rstrip("/").rsplit("/", 1)[-1] if not url.endswith(f"{cluster.pk}/") else "overview"
        page.screenshot(path=str(shots / f"{locale[:2]}-{tab}.png"))
        found = page.evaluate(OVERFLOW)
        if found:
            problems[f"{locale[:2]} {tab}"] = found[:5]
    context.close()
    return problems


def test_every_cluster_tab_fits_1280_pixels_in_both_languages(
    live_server, journey_user: User, journey_cluster: Cluster, browser: Browser, tmp_path: Path
) -> None:
    cluster = journey_cluster
    # Rows in the two tables that were cut: a pool (with its live figures) and statements.
    pool_services.create_pool(cluster, "reporting-pool", "defaultdb", "", "transaction", 10)
    run_pgbench(cluster)
    shots = Path(os.environ.get("PANEL_SCREENSHOTS") or tmp_path)
    problems = {}
    for locale in ("en-US", "de-DE"):
        problems |= visit_every_tab(browser, live_server.url, cluster, locale, shots)
    assert problems == {}, problems
    assert len(list(shots.glob("*.png"))) >= 20
