"""The pages of lists that grow (issue 41): the clusters list and the Nodes page's cluster lists
with their page links, and the Nodes page's cycle times with a slow round flagged, fit 1,280
pixels in English and German; a page link fetches the next page by HTMX and the address names it."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Browser, expect

from panel.clusters.models import CycleKind, NodeCycle
from panel.clusters.services import nodes
from panel.clusters.tests.test_views_list_paging import rows_only
from tests.browser.conftest import wait_for_htmx
from tests.browser.test_tabs_fit import log_in, visit

pytestmark = pytest.mark.integration

LONG_NODE = "frankfurt-storage-heavy-node-number-0042"  # 40 characters, the longest a name takes


@pytest.fixture
def many(journey_user: User, settings: object) -> None:
    """60 stopped clusters (rows, no servers) on a node of the longest name, whose last reconciler
    round took longer than its period; the journey user is staff (the Nodes page)."""
    journey_user.is_staff = True
    journey_user.save(update_fields=["is_staff"])
    node = nodes.add_node(
        LONG_NODE,
        address="db-frankfurt-0042.example.net",
        ports=(41000, 41299),
        data_dir="/srv/pg",
        ram_gb=96,
        vcpus=48,
    )
    rows_only(journey_user, 60, prefix="inventory-warehouse-stock-movements", node=node)
    started = timezone.now() - dt.timedelta(seconds=40)
    NodeCycle.objects.create(node=node, kind=CycleKind.RECONCILE, started_at=started, seconds=123.45)
    NodeCycle.objects.create(node=node, kind=CycleKind.COLLECT, started_at=started, seconds=2.5)


def test_paged_lists_and_cycle_times_fit_in_both_languages(
    live_server, many: None, browser: Browser, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("PANEL_SCREENSHOTS") or tmp_path)
    base = live_server.url
    paths = ["/clusters/", "/clusters/?page=3", "/clusters/nodes/", f"/clusters/nodes/?{LONG_NODE}-page=3"]
    problems = {}
    for locale in ("en-US", "de-DE"):
        page = log_in(browser, base, locale)
        problems |= visit(page, [f"{base}{path}" for path in paths], locale, shots)
        for path, name in ((paths[1], "list"), (paths[3], "nodes")):  # the pagers, below the fold
            page.goto(f"{base}{path}")
            page.locator("nav.pager").first.screenshot(path=str(shots / f"{locale[:2]}-pager-{name}.png"))
        page.context.close()
    assert not problems, "\n".join(f"{page}: {found}" for page, found in problems.items())


def test_a_page_link_swaps_the_list_and_names_the_page(live_server, many: None, browser: Browser) -> None:
    page = log_in(browser, live_server.url, "en-US")
    rows = page.locator("#cluster-table tbody tr")
    expect(rows).to_have_count(25)
    first_name = rows.first.locator("a.fw-semibold").inner_text()
    page.locator("#cluster-table .pagination a.page-link", has_text="2").click()
    page.wait_for_url(f"{live_server.url}/clusters/?page=2")
    wait_for_htmx(page)
    expect(rows).to_have_count(25)
    assert rows.first.locator("a.fw-semibold").inner_text() != first_name
    expect(page.locator("#cluster-table .page-item.active")).to_have_text("2")
    # The Nodes page flags the slow round.
    page.goto(f"{live_server.url}/clusters/nodes/")
    expect(
        page.locator(f'[data-node="{LONG_NODE}"] [data-cycle="reconcile"] .node-cycle-slow')
    ).to_be_visible()
    page.locator(f'[data-node="{LONG_NODE}"] .pagination a.page-link', has_text="Next").click()
    page.wait_for_url(f"{live_server.url}/clusters/nodes/?{LONG_NODE}-page=2")
    wait_for_htmx(page)
    expect(page.locator(f'[data-node="{LONG_NODE}"] .page-item.active')).to_have_text("2")
    page.context.close()
