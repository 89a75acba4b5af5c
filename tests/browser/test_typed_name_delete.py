"""Deleting a database through the Users & Databases tab's modal (issue 38, item 6): the name typed
in the modal unlocks the button and goes with the request as ``confirm_name``, which the server
checks (a POST without it deletes nothing: panel/clusters/tests/test_views_users.py)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from tests.browser.conftest import log_in, wait_for_htmx
from tests.browser.console import ConsoleWatch

pytestmark = pytest.mark.integration

NAME = "scratchdb"


def _exists_in_postgres(cluster: Cluster, name: str) -> bool:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_database WHERE datname = %s", [name]
        ).fetchone()
    return row == (1,)


def test_a_database_is_deleted_by_typing_its_name_in_the_modal(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    roles.add_database(cluster, NAME)
    watch = ConsoleWatch(page)
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/users/")
    row = page.locator(f"tr[data-database='{NAME}']")
    expect(row).to_be_visible()
    wait_for_htmx(page)

    watch.at("users & databases: the delete modal asks for the database's name")
    row.get_by_role("button", name="Delete").click()
    modal = page.locator("#confirm-modal")
    expect(modal).to_be_visible()
    confirm = modal.get_by_role("button", name="Delete database")
    typed = modal.get_by_label("Type the name to confirm:")
    typed.fill(NAME.upper())
    expect(confirm).to_be_disabled()
    typed.fill(NAME)
    expect(confirm).to_be_enabled()
    with page.expect_request(lambda request: request.method == "POST" and "/delete/" in request.url) as sent:
        confirm.click()
    assert f"confirm_name={NAME}" in (sent.value.post_data or "")
    expect(modal).to_be_hidden()
    expect(page.get_by_text(f"Database “{NAME}” deleted.")).to_be_visible(timeout=15_000)
    expect(row).to_have_count(0)
    assert not cluster.databases.filter(name=NAME).exists()
    assert not _exists_in_postgres(cluster, NAME)
    watch.at("users & databases: the database deleted")
    assert watch.report() == []
