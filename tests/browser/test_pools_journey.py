"""Issue 3's journey in a real browser: create a pool from the form, see it in the table with the
budget updated, copy its connection string and connect through it, then delete it."""

from __future__ import annotations

import psycopg
import pytest
from playwright.sync_api import Page, expect

from panel.clusters.models import Cluster
from panel.pools import services
from panel.pools.models import ConnectionPool
from tests.browser.conftest import log_in, snapshot, wait_for_htmx

pytestmark = pytest.mark.integration


def test_create_a_pool_copy_its_uri_connect_and_delete_it(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/pools/")
    expect(page.get_by_role("link", name="Connection Pools")).to_have_attribute("aria-current", "page")
    expect(page.locator(".empty-state")).to_be_visible()
    expect(page.locator(".pool-budget-figure")).to_have_text("0 of 22 connections allocated to pools")

    # The form is open while there is no pool; the budget follows the size as it is typed.
    page.get_by_label("Pool name").fill("web-pool")
    page.get_by_label("Database").select_option("defaultdb")
    expect(page.locator("#id_mode_transaction")).to_be_checked()
    page.get_by_label("Pool size").fill("30")
    expect(page.locator("[data-budget-output]")).to_have_text("30 of 22 used — 8 over the budget")
    page.get_by_label("Pool size").fill("12")
    expect(page.locator("[data-budget-output]")).to_have_text("12 of 22 used — 10 left")
    snapshot(page, "pools-0-create-form")
    page.get_by_role("button", name="Create pool").click()

    row = page.locator("tr[data-pool='web-pool']")
    expect(row).to_be_visible(timeout=15_000)
    expect(page.locator(".pool-budget-figure")).to_have_text("12 of 22 connections allocated to pools")
    expect(row.get_by_text("Active")).to_be_visible()
    pool = ConnectionPool.objects.get(cluster=cluster, name="web-pool")
    snapshot(page, "pools-1-tab")

    row.get_by_role("link", name="web-pool").click()
    box = page.locator("#connection-details")
    details = services.pool_connection_details(pool)
    assert details.password not in page.content()
    wait_for_htmx(page)
    page.locator("#conn-view").select_option("uri")
    expect(box.locator("code", has_text="postgresql://")).to_contain_text(f":{cluster.pooler_port}/web-pool")
    box.get_by_role("button", name="Copy").click()
    expect(box.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == details.uri()
    assert "sslmode=require" in copied
    snapshot(page, "pools-2-pool-page")

    client = psycopg.connect(copied, connect_timeout=5)
    try:
        assert client.execute("SELECT current_database()").fetchone() == ("defaultdb",)
        assert client.pgconn.ssl_in_use

        page.get_by_role("link", name="Delete pool").click()
        dialog = page.locator("#delete-pool-modal")
        expect(dialog.get_by_text("1 client is connected to this pool now.")).to_be_visible()
        expect(dialog).to_contain_text("every client connected to it is disconnected")
        dialog.get_by_role("button", name="Delete pool").click()

        expect(page).to_have_url(f"{live_server.url}/clusters/{cluster.pk}/pools/")
        expect(page.get_by_text("1 connected client was disconnected")).to_be_visible()
        expect(page.locator(".pool-budget-figure")).to_have_text("0 of 22 connections allocated to pools")
        assert not ConnectionPool.objects.filter(cluster=cluster).exists()
        with pytest.raises(psycopg.OperationalError):
            client.execute("SELECT 1")
    finally:
        client.close()
