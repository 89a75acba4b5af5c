"""Issue 11, item 1 in a real browser: after a load through a pool holding the whole budget the
Overview and the Pools tab warn that direct connections are refused; "Release now" / "Release
idle" give the slots back and the warning goes away, and a new load brings it back, all without a
reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters.models import Cluster
from panel.pools import services
from panel.pools.tests.test_integration_pgbench import pgbench
from panel.pools.tests.test_integration_slots import direct_works, load
from tests.browser.conftest import log_in, snapshot, wait_for_htmx

pytestmark = pytest.mark.integration

WARNING = "Pools hold 22 idle server connections: direct connections are refused until they are released."


def test_the_lockout_warning_appears_and_goes_away_without_a_reload(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    pgbench(cluster, ["-i", "-s", "1", "-q"], port=int(cluster.port or 0), dbname="defaultdb")
    pool = services.create_pool(cluster, "full-pool", "defaultdb", "", "transaction", 22)
    errors: list[str] = []
    # Failed requests are checked by URL below (the favicon is item 5's, not this test's).
    page.on(
        "console",
        lambda msg: (
            errors.append(msg.text)
            if msg.type == "error" and not msg.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.on(
        "response",
        lambda r: (
            errors.append(f"{r.status} {r.url}")
            if r.status >= 400 and not r.url.endswith("/favicon.ico")
            else None
        ),
    )
    navigations: list[str] = []
    page.on(
        "framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None
    )

    log_in(page, live_server.url, f"/clusters/{cluster.pk}/")
    wait_for_htmx(page)
    expect(page.locator(".pools-lockout")).to_have_count(0)
    loaded = len(navigations)

    # The load stops; the pool keeps its 22 servers; the Overview's poll shows the warning.
    load(cluster, pool, clients=30)
    assert not direct_works(cluster)
    warning = page.locator("#pools-slots .pools-lockout")
    expect(warning).to_contain_text(WARNING, timeout=15_000)
    snapshot(page, "lockout-0-overview")
    warning.get_by_role("button", name="Release now").click()
    expect(page.locator("#pools-slots .pools-released")).to_contain_text("22 idle server connections closed")
    expect(warning).to_have_count(0)
    assert direct_works(cluster)

    # On the Pools tab: the held figures next to the budget bar, the warning, and the per-pool action.
    page.get_by_role("link", name="Connection Pools").click()
    expect(page.locator(".pool-slots-held")).to_contain_text("Pools hold 0 server connections now")
    tab_loaded = len(navigations)
    load(cluster, pool, clients=30)
    expect(page.locator(".pool-slots-held")).to_contain_text(
        "Pools hold 22 server connections now (0 active, 22 idle) of 22", timeout=15_000
    )
    expect(page.locator(".pool-slots-direct")).to_have_text("0 direct connections left")
    expect(page.locator("#pools-live .pools-lockout")).to_contain_text(WARNING)
    snapshot(page, "lockout-1-pools-tab")
    page.locator("tr[data-pool='full-pool']").get_by_role(
        "button", name="Release idle server connections of full-pool"
    ).click()
    expect(page.locator("#pools-live .pools-released")).to_contain_text(
        "Pool “full-pool”: 22 idle server connections closed"
    )
    expect(page.locator("#pools-live .pools-lockout")).to_have_count(0)
    expect(page.locator(".pool-slots-direct")).not_to_have_text("0 direct connections left")
    assert direct_works(cluster)

    # No reload happened on either page: one navigation for the Overview, one for the tab.
    assert len(navigations) == tab_loaded == loaded + 1
    assert errors == []
