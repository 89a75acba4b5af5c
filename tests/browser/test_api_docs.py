"""The API documentation page in Chromium: Swagger UI renders the schema's operations under the
panel's strict Content-Security-Policy with no console error, and a token made on the API tokens
page, given to Authorize, makes a real call from the page."""

from __future__ import annotations

from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from panel.clusters.tests.conftest import make_cluster_row
from tests.browser.conftest import log_in
from tests.browser.console import ConsoleWatch

LIST_OPERATION = "#operations-databases-panel_api_v2_databases_list_databases"


def test_the_docs_page_renders_the_operations_and_calls_the_api_with_a_token(
    live_server, redis_server: str, journey_user: User, page: Page
) -> None:
    make_cluster_row(journey_user, name="db-docs", port=None, pooler_port=None)
    base = live_server.url
    watch = ConsoleWatch(page)

    watch.at("docs page, signed out")
    page.goto(f"{base}/v2/docs")
    # (Swagger UI's bundle is about 1 MB of JavaScript: parsed in a second when quiet, several
    # when the suite's other sessions load both cores.)
    expect(page.get_by_text("List database clusters")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("Destroy a database cluster")).to_be_visible()

    watch.at("log in, make a token")
    log_in(page, base, "/account/tokens/")
    page.get_by_label("Name").fill("docs")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").inner_text().strip()
    assert token.startswith("pgp_")

    watch.at("docs page from the tokens page")
    page.locator(".page-header").get_by_role("link", name="API documentation").click()
    expect(page).to_have_url(f"{base}/v2/docs")
    expect(page.locator(".panel-sidebar")).to_be_visible()  # signed in: the page sits in the panel
    expect(page.get_by_text("List database clusters")).to_be_visible()

    watch.at("authorize with the token")
    page.locator(".swagger-ui .auth-wrapper button.authorize").click()
    dialog = page.locator(".swagger-ui .dialog-ux")
    dialog.get_by_label("auth-bearer-value").fill(token)
    dialog.get_by_role("button", name="Apply credentials").click()
    expect(dialog.get_by_role("button", name="Remove authorization")).to_be_visible()
    dialog.get_by_role("button", name="Close").click()

    watch.at("try it out: list database clusters")
    operation = page.locator(LIST_OPERATION)
    operation.locator(".opblock-summary").click()
    operation.get_by_role("button", name="Try it out").click()
    operation.get_by_role("button", name="Execute").click()
    live = operation.locator(".live-responses-table")
    expect(live.locator("tr.response .response-col_status")).to_have_text("200")
    expect(live.locator("tr.response .response-col_description")).to_contain_text('"db-docs"')

    watch.at("done")
    assert watch.problems == []
