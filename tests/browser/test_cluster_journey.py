"""The issue's journey in a real browser: log in, create a cluster, connect, add a database."""

from __future__ import annotations

import time

import psycopg
import pytest
from playwright.sync_api import Page, expect

from panel.clusters import services
from panel.clusters.models import Cluster
from tests.browser.conftest import log_in, snapshot, wait_for_htmx

pytestmark = pytest.mark.integration


def test_create_cluster_show_password_copy_uri_and_add_database(
    live_server, celery_worker, journey_user, page: Page
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    log_in(page, live_server.url)
    expect(page.locator(".empty-state")).to_be_visible()

    snapshot(page, "1-empty-list")
    page.get_by_role("link", name="Create cluster").first.click()
    page.locator("label[for='plan-db-s-2vcpu-4gb']").click()
    page.get_by_label("Cluster name").fill("db-journey")
    snapshot(page, "2-create-form")
    started = time.monotonic()
    page.get_by_role("button", name="Create database cluster").click()

    # The page updates itself: mark the document, and check the mark survives (no reload).
    page.evaluate("window.__sameDocument = true")
    expect(page.locator("h1 .status-badge")).to_have_attribute("data-status", "online", timeout=30_000)
    online_after = time.monotonic() - started
    print(f"\n4 GB cluster online in the browser after {online_after:.1f} s")
    assert page.evaluate("window.__sameDocument === true"), "the page was reloaded"
    # The creation's message left with the creation (it stayed on the online cluster, issue 38).
    expect(page.get_by_text("is being created")).to_have_count(0)

    cluster = Cluster.objects.get(name="db-journey")
    password = cluster.users.get(name="doadmin").password
    box = page.locator("#connection-details")
    assert password not in page.content()

    wait_for_htmx(page)
    box.get_by_role("button", name="show").first.click()
    expect(box.get_by_text(password)).to_be_visible()
    snapshot(page, "3-overview-password-shown")

    wait_for_htmx(page)
    page.locator("#conn-view").select_option("uri")
    expect(box.locator("code", has_text="postgresql://")).to_be_visible()
    box.get_by_role("button", name="Copy").first.click()
    expect(box.get_by_role("button", name="Copied").first).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == services.connection_details(cluster).uri()
    with psycopg.connect(copied, connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("doadmin",)

    wait_for_htmx(page)
    page.get_by_role("link", name="Users & Databases").click()
    page.get_by_label("Add a database").fill("benchmark")
    page.get_by_role("button", name="Add database").click()
    expect(page.locator("#users-tab").get_by_text("benchmark", exact=True)).to_be_visible()
    with psycopg.connect(copied.replace("/defaultdb?", "/benchmark?"), connect_timeout=5) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("benchmark",)
    snapshot(page, "4-users-and-databases")

    # Delete from the page: the list shows the cluster deleting, then drops it, without a reload.
    data_root = cluster.data_root
    wait_for_htmx(page)
    page.get_by_role("button", name="Actions").click()
    page.get_by_role("link", name="Delete cluster").click()
    dialog = page.locator("#delete-cluster-modal")
    dialog.get_by_label("to confirm").fill("db-journey")
    dialog.get_by_role("button", name="Delete cluster").click()
    expect(page.get_by_text("Deleting cluster “db-journey”")).to_be_visible(timeout=15_000)
    page.evaluate("window.__sameDocument = true")
    expect(page.get_by_role("link", name="db-journey")).to_have_count(0, timeout=60_000)
    assert page.evaluate("window.__sameDocument === true"), "the list was reloaded"
    assert not Cluster.objects.filter(name="db-journey").exists()
    assert not data_root.exists()
    snapshot(page, "5-deleted")
