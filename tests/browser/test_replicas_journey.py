"""Read-only replicas in a real browser, with a real Celery worker: a replica added from the
Overview's card, followed there from forking to online, then promoted from its own page."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from tests.browser.conftest import log_in, snapshot, wait_for_htmx

pytestmark = pytest.mark.integration


def test_add_a_replica_on_the_overview_then_promote_it(
    live_server, celery_worker, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/")
    card = page.locator("#cluster-replicas")
    expect(card).to_contain_text("No read-only replica yet.")
    wait_for_htmx(page)

    card.get_by_label("Replica name").fill("db-journey-ro")
    card.get_by_role("button", name="Add a replica").click()
    expect(card).to_contain_text("is being made from this cluster's data")
    row = card.locator("[data-replica='db-journey-ro']")
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "forking")
    # The card polls while the replica is made, and stops once it is online.
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "online", timeout=120_000)
    expect(card).not_to_have_attribute("hx-trigger", "every 2s [document.visibilityState === 'visible']")
    snapshot(page, "replicas-0-source")
    replica = Cluster.objects.get(owner=cluster.owner, name="db-journey-ro")
    try:
        row.get_by_role("link", name="db-journey-ro").click()
        expect(page).to_have_url(f"{live_server.url}/clusters/{replica.pk}/")
        card = page.locator("#cluster-replicas")
        expect(card).to_contain_text("This cluster is a read-only replica of db-journey")
        snapshot(page, "replicas-1-replica")
        wait_for_htmx(page)
        page.once("dialog", lambda dialog: dialog.accept())
        card.get_by_role("button", name="Promote to a cluster").click()
        expect(
            page.get_by_text("“db-journey-ro” is now a cluster of its own; it accepts writes.")
        ).to_be_visible(timeout=60_000)
        expect(page.locator("#cluster-replicas")).to_contain_text("No read-only replica yet.")
        replica.refresh_from_db()
        assert replica.replica_of_id is None
    finally:
        replica.refresh_from_db()
        cluster_services.delete_cluster(replica, confirm_name=replica.name)
