"""A modal closed while it still fades in closes all the same (static/js/panel.js's hideModal).

Bootstrap's Modal.hide() does nothing until the modal has finished opening, and the end of the
opening is timed from the .modal-dialog's transition: on a loaded machine a quick confirm left the
confirm modal open over the page after its request had gone (test_typed_name_delete.py failed so in
a full run), and a quick Close left the pool delete dialog open (test_console_clean.py).

Here the dialog's transition lasts FADE_S seconds, so every click below lands while Bootstrap still
waits for it. The rule is appended to the vendored Bootstrap stylesheet as the browser fetches it,
so the page's Content-Security-Policy (no inline style) stays in force. On the code before the fix
each of these tests failed: the modal was still open ``modal fade show`` after its click.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Locator, Page, Request, Route, expect

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.pools import services as pool_services
from panel.pools.models import ConnectionPool
from tests.browser.conftest import log_in, wait_for_htmx
from tests.browser.console import ConsoleWatch

pytestmark = pytest.mark.integration

NAME = "fadedb"
FADE_S = 4
# The dialog does not move (Playwright clicks at once) but keeps Bootstrap waiting FADE_S seconds:
# its opacity never changes, so no transitionend ends the wait early.
SLOW_FADE = (
    f"\n.modal-dialog {{ transition: opacity {FADE_S}s linear !important; transform: none !important; }}\n"
)
# Longer than the fade, which a fixed panel waits out before it closes the modal.
CLOSED_WITHIN_MS = 10_000


def _slow_fade(page: Page) -> None:
    def append_rule(route: Route) -> None:
        response = route.fetch()
        route.fulfill(status=response.status, content_type="text/css", body=response.text() + SLOW_FADE)

    page.route("**/vendor/bootstrap/bootstrap.min*.css", append_rule)


def _opened(dialog: Locator) -> None:
    """The modal is on screen, with the slow fade in force."""
    expect(dialog).to_be_visible()
    duration = dialog.locator(".modal-dialog").evaluate("el => getComputedStyle(el).transitionDuration")
    assert duration == f"{FADE_S}s", "the slow fade is not applied: the test would prove nothing"


def _clicked_in_time(started: float) -> None:
    """The close came less than FADE_S seconds after the click that opened the modal: Bootstrap
    was still opening it (it starts timing the dialog's fade only after its backdrop's)."""
    assert time.monotonic() - started < FADE_S, "the click came after the fade: the test proves nothing"


def _exists_in_postgres(cluster: Cluster, name: str) -> bool:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_database WHERE datname = %s", [name]
        ).fetchone()
    return row == (1,)


def _open_users_tab(page: Page, base: str, cluster: Cluster) -> tuple[ConsoleWatch, Locator]:
    roles.add_database(cluster, NAME)
    _slow_fade(page)
    watch = ConsoleWatch(page)
    log_in(page, base, f"/clusters/{cluster.pk}/users/")
    row = page.locator(f"tr[data-database='{NAME}']")
    expect(row).to_be_visible()
    wait_for_htmx(page)
    return watch, row


def test_a_delete_confirmed_while_the_modal_fades_in_closes_it(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    watch, row = _open_users_tab(page, live_server.url, cluster)

    watch.at("users & databases: the name typed and confirmed while the modal still fades in")
    modal = page.locator("#confirm-modal")
    started = time.monotonic()
    row.get_by_role("button", name="Delete").click()
    _opened(modal)
    modal.get_by_label("Type the name to confirm:").fill(NAME)
    with page.expect_request(lambda request: request.method == "POST" and "/delete/" in request.url) as sent:
        modal.get_by_role("button", name="Delete database").click()
    _clicked_in_time(started)
    assert f"confirm_name={NAME}" in (sent.value.post_data or "")
    expect(modal).to_be_hidden(timeout=CLOSED_WITHIN_MS)
    expect(page.get_by_text(f"Database “{NAME}” deleted.")).to_be_visible(timeout=15_000)
    expect(row).to_have_count(0)
    assert not _exists_in_postgres(cluster, NAME)
    watch.at("users & databases: the database deleted, the modal gone")
    assert watch.report() == []


def test_a_cancel_while_the_modal_fades_in_closes_it_and_deletes_nothing(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    watch, row = _open_users_tab(page, live_server.url, cluster)
    posts: list[Request] = []
    page.on("request", lambda request: posts.append(request) if request.method == "POST" else None)

    watch.at("users & databases: Cancel while the modal still fades in")
    modal = page.locator("#confirm-modal")
    started = time.monotonic()
    row.get_by_role("button", name="Delete").click()
    _opened(modal)
    modal.get_by_role("button", name="Cancel").click()
    _clicked_in_time(started)
    expect(modal).to_be_hidden(timeout=CLOSED_WITHIN_MS)
    expect(modal).to_have_count(0)  # removed once closed, as after any cancel

    watch.at("users & databases: opened again, the earlier Cancel does not close it")
    row.get_by_role("button", name="Delete").click()
    expect(modal).to_be_visible()
    page.wait_for_timeout(FADE_S * 1000 + 1000)
    expect(modal).to_be_visible()
    modal.get_by_role("button", name="Cancel").click()
    expect(modal).to_be_hidden()

    expect(row).to_be_visible()
    assert posts == []
    assert cluster.databases.filter(name=NAME).exists()
    assert _exists_in_postgres(cluster, NAME)
    watch.at("users & databases: nothing deleted")
    assert watch.report() == []


def test_the_pool_delete_dialog_closed_while_it_fades_in_closes(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    pool_services.create_pool(cluster, "fade-pool", "defaultdb", None, "transaction", 5)
    _slow_fade(page)
    watch = ConsoleWatch(page)
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/pools/")
    row = page.locator("tr[data-pool='fade-pool']")
    expect(row).to_be_visible()
    posts: list[Request] = []
    page.on("request", lambda request: posts.append(request) if request.method == "POST" else None)

    watch.at("pool delete dialog: Close while it still fades in")
    dialog = page.locator("#delete-pool-modal")
    started = time.monotonic()
    row.get_by_role("link", name="Delete").click()
    _opened(dialog)
    dialog.get_by_role("button", name="Close").click()
    _clicked_in_time(started)
    expect(dialog).to_be_hidden(timeout=CLOSED_WITHIN_MS)

    expect(row).to_be_visible()
    assert posts == []
    assert ConnectionPool.objects.filter(cluster=cluster, name="fade-pool").exists()
    watch.at("pools tab: nothing deleted")
    assert watch.report() == []
