"""Issue 16's journey in a real browser, with a real Celery worker: "Back up now" on the Backups
tab, its progress followed until the backup is listed with the recovery window, then a fork from
the restore form, followed on the same tab until its link opens the new cluster, marked with its
origin."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from tests.browser.conftest import log_in, snapshot, wait_for_htmx

pytestmark = pytest.mark.integration


def test_back_up_now_then_fork_from_the_tab(
    live_server, celery_worker, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/backups/")
    expect(page.locator(".cluster-tabs").get_by_role("link", name="Backups", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.get_by_text("No backups yet.")).to_be_visible()
    expect(page.get_by_text("a full backup on Sundays")).to_be_visible()

    page.locator("#id_backup_type").select_option("full")
    page.get_by_role("button", name="Back up now").click()
    expect(page.get_by_text("Backup queued.")).to_be_visible()
    # The tab polls while the job runs, and stops once the backup is listed.
    expect(page.locator("tr[data-backup]")).to_have_count(1, timeout=240_000)
    expect(page.locator("[data-window]")).to_contain_text("Restorable from")
    expect(page.locator("[data-job][data-status='succeeded']")).to_have_count(1, timeout=60_000)
    # Polling stopped with the job: no swap can wipe the form while it is filled in.
    expect(page.locator("#backups-tab")).not_to_have_attribute("hx-trigger", "every 2s")
    snapshot(page, "backups-0-tab")
    wait_for_htmx(page)

    page.get_by_label("New cluster name").fill("db-journey-fork")
    page.get_by_label("The latest point (fork)").check()
    page.get_by_role("button", name="Restore").click()
    expect(page).to_have_url(f"{live_server.url}/clusters/{cluster.pk}/backups/")
    link = page.get_by_role("link", name="db-journey-fork")
    expect(link).to_be_visible(timeout=300_000)
    fork = Cluster.objects.get(owner=cluster.owner, name="db-journey-fork")
    try:
        link.click()
        expect(page).to_have_url(f"{live_server.url}/clusters/{fork.pk}/")
        expect(page.locator("[data-origin]")).to_contain_text("Forked from db-journey")
        snapshot(page, "backups-1-fork")
    finally:
        fork.refresh_from_db()
        cluster_services.delete_cluster(fork, confirm_name=fork.name)
