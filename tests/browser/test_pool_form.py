"""Issue 11, item 6, in Chromium: the big "Create a connection pool" button of an empty Pools tab
opens the form (it used to collapse the form already open), and a pool with a fixed user as the
benchmark target disables the User select and shows that user (it used to stay a free choice)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.pools import services as pool_services
from tests.browser.conftest import log_in, wait_for_htmx

pytestmark = pytest.mark.integration


def test_the_create_button_opens_the_form_and_never_collapses_it(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    log_in(page, live_server.url, f"/clusters/{journey_cluster.pk}/pools/")
    panel = page.locator("#create-pool-panel")
    button = page.get_by_role("button", name="Create a connection pool")
    expect(panel).to_be_visible()  # an empty tab opens the form

    for _click in range(2):
        button.click()
        page.wait_for_timeout(600)  # longer than Bootstrap's collapse transition (350 ms)
        expect(panel).to_be_visible()
        expect(panel).to_have_class("collapse show")
        expect(button).to_have_attribute("aria-expanded", "true")
        expect(page.get_by_label("Pool name")).to_be_focused()


def test_a_fixed_user_pool_as_benchmark_target_decides_the_user(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    roles.add_user(cluster, "app")
    fixed = pool_services.create_pool(cluster, "fixed-pool", "defaultdb", "app", "transaction", 5)
    inbound = pool_services.create_pool(cluster, "open-pool", "defaultdb", None, "transaction", 5)
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/")
    wait_for_htmx(page)
    form = page.locator("#run-form")
    target, user = form.get_by_label("Target"), form.get_by_label("User")
    note = form.locator("[data-bench-pool-user]")

    user.select_option("doadmin")
    target.select_option(str(fixed.pk))
    expect(user).to_be_disabled()
    expect(user).to_have_value("app")
    expect(note).to_be_visible()
    expect(note).to_have_text("This pool always logs in as app.")

    # An inbound-user pool, or the cluster directly: the user is the user's choice again.
    target.select_option(str(inbound.pk))
    expect(user).to_be_enabled()
    expect(user).to_have_value("doadmin")
    expect(note).to_be_hidden()
    target.select_option("direct")
    expect(user).to_be_enabled()
