"""Read-only replicas in a real browser, with a real Celery worker: a replica added from the
Overview's card, followed there from forking to online, then promoted from its own page: the
replica's name typed in the page's modal, a progress line while it promotes. The card polls without
eval and the console stays clean (issue 38, items 5 and 6)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from tests.browser.conftest import log_in, snapshot, wait_for_htmx
from tests.browser.console import ConsoleWatch

pytestmark = pytest.mark.integration


def test_add_a_replica_on_the_overview_then_promote_it(
    live_server, celery_worker, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    watch = ConsoleWatch(page)
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/")
    card = page.locator("#cluster-replicas")
    expect(card).to_contain_text("No read-only replica yet.")
    wait_for_htmx(page)

    card.get_by_label("Replica name").fill("db-journey-ro")
    card.get_by_role("button", name="Add a replica").click()
    expect(card).to_contain_text("is being made from this cluster's data")
    watch.at("source overview: the replica card polls while the replica is made")
    row = card.locator("[data-replica='db-journey-ro']")
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "forking")
    # The card polls while the replica is made, and stops once it is online.
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "online", timeout=120_000)
    expect(card).not_to_have_attribute("hx-trigger", re.compile(r".+"))
    snapshot(page, "replicas-0-source")
    replica = Cluster.objects.get(owner=cluster.owner, name="db-journey-ro")
    try:
        watch.at("replica page")
        row.get_by_role("link", name="db-journey-ro").click()
        expect(page).to_have_url(f"{live_server.url}/clusters/{replica.pk}/")
        card = page.locator("#cluster-replicas")
        expect(card).to_contain_text("This cluster is a read-only replica of db-journey")
        snapshot(page, "replicas-1-replica")
        wait_for_htmx(page)
        watch.at("replica page: promote, the name typed in the modal")
        card.get_by_role("button", name="Promote to a cluster").click()
        modal = page.locator("#confirm-modal")
        expect(modal).to_contain_text("Promote this replica?")
        expect(modal.get_by_role("button", name="Promote", exact=True)).to_be_disabled()
        modal.get_by_label("Type the name to confirm:").fill("db-journey-ro")
        modal.get_by_role("button", name="Promote", exact=True).click()
        expect(page.locator("#promote-progress")).to_be_visible()
        expect(card.get_by_role("button", name="Promote to a cluster")).to_be_disabled()
        expect(
            page.get_by_text("“db-journey-ro” is now a cluster of its own; it accepts writes.")
        ).to_be_visible(timeout=60_000)
        expect(page.locator("#cluster-replicas")).to_contain_text("No read-only replica yet.")
        replica.refresh_from_db()
        assert replica.replica_of_id is None
        watch.at("end")
        assert watch.report() == []
    finally:
        replica.refresh_from_db()
        cluster_services.delete_cluster(replica, confirm_name=replica.name)
