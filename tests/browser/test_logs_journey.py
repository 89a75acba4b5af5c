"""Issue 17's Logs tab in a real browser: a tenant's error arrives through the live tail without a
reload, the search narrows the list in place, the tail pauses and resumes, the log downloads."""

from __future__ import annotations

import contextlib
import re

import psycopg
import pytest
from playwright.sync_api import Page, expect

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import connect_as_client
from tests.browser.conftest import log_in, snapshot, wait_for_htmx

pytestmark = pytest.mark.integration


def tenant_runs(cluster: Cluster, statement: str) -> None:
    with connect_as_client(cluster) as conn, contextlib.suppress(psycopg.Error):
        conn.execute(statement)


def test_logs_tab_tails_searches_pauses_and_downloads(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    tab = f"/clusters/{cluster.pk}/logs/"
    log_in(page, live_server.url, tab)
    expect(page.get_by_role("link", name="Logs")).to_have_attribute("aria-current", "page")
    expect(page.locator("#log-tail")).to_contain_text("Live")
    errors = page.locator("article.log-entry", has_text="division by zero")
    expect(errors).to_have_count(0)

    # The error arrives at the top through the live tail, with its statement, without a reload.
    page.evaluate("() => { window.__notReloaded = true; }")
    tenant_runs(cluster, "SELECT 1/0 AS browser_marker")
    expect(errors).to_have_count(1, timeout=15_000)
    expect(errors.first).to_contain_text("SELECT 1/0 AS browser_marker")
    expect(page.locator("article.log-entry").first).to_contain_text("division by zero")
    assert page.evaluate("() => window.__notReloaded === true")
    snapshot(page, "logs-0-tail")

    # The search narrows the list in place (and the URL keeps it).
    page.get_by_label("Search").fill("browser_marker")
    expect(page).to_have_url(re.compile(r"[?&]q=browser_marker"), timeout=10_000)
    wait_for_htmx(page)
    expect(page.locator("article.log-entry")).to_have_count(1)
    expect(errors).to_have_count(1)
    page.get_by_label("Level").select_option("FATAL")
    wait_for_htmx(page)
    expect(page.locator("#log-empty")).to_have_text("No entry matches.")
    page.get_by_label("Level").select_option("ERROR")
    wait_for_htmx(page)
    expect(errors).to_have_count(1)
    assert page.evaluate("() => window.__notReloaded === true")

    # The pooler's source offers PgBouncer's levels only; back to PostgreSQL, its own again.
    page.get_by_label("Source").select_option("pooler")
    wait_for_htmx(page)
    expect(page.locator("#log-scope")).to_contain_text("PgBouncer's log")
    expect(page.locator("#id_level option[value='PANIC']")).to_have_count(0)
    expect(page.locator("#log-download")).to_have_attribute("href", re.compile(r"source=pooler"))
    page.get_by_label("Source").select_option("postgres")
    wait_for_htmx(page)
    expect(page.locator("#id_level option[value='PANIC']")).to_have_count(1)
    page.get_by_label("Level").select_option("ERROR")
    wait_for_htmx(page)
    expect(errors).to_have_count(1)

    # Paused, a new error does not arrive; resumed, it does.
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#log-tail")).to_contain_text("Live tail paused.")
    tenant_runs(cluster, "SELECT 2/0 AS browser_marker")
    page.wait_for_timeout(3_000)  # longer than a tail period: nothing may arrive while paused
    expect(errors).to_have_count(1)
    page.get_by_role("button", name="Resume").click()
    expect(errors).to_have_count(2, timeout=15_000)
    snapshot(page, "logs-1-search")

    with page.expect_download() as info:
        page.get_by_role("link", name="Download").click()
    download = info.value
    assert download.suggested_filename.startswith(f"{cluster.name}-postgresql-")
    text = download.path().read_text(encoding="utf-8")
    assert "division by zero" in text and "SELECT 2/0 AS browser_marker" in text
