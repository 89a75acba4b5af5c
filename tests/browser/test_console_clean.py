"""Issue 11, item 5 and issue 38, item 5: every page a user reaches, walked in Chromium, logs no
console error, no Content-Security-Policy violation and no failed request (a status of 400 or
more, or a request the browser gave up on).

On the code before issue 11's fix it failed twice: the favicon was a 404 on every page, and the run
form's "#run-warnings" check inherited the form's ``hx-disabled-elt="find button[type='submit']"``,
which finds nothing inside that div, so htmx logged "The selector … returned no matches!" on every
Benchmarks tab load and every change in the form.

Before issue 38's it failed on the Nodes page (its RAM and vCPU bars' ``style="width: …"``, refused
by the policy, left them empty) and on every htmx swap that settled an element whose style a
script had set (htmx copied the ``style`` attribute back with setAttribute: an inline style).
The users' and databases' deletes ask in the page's modal for the typed name, not with confirm().
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Dialog, Page, expect

from benchmarks.models import BenchmarkRun
from benchmarks.tests.test_views_pages import make_run
from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster, Node
from panel.pools.models import ConnectionPool
from tests.browser.conftest import log_in, wait_for_htmx
from tests.browser.console import ConsoleWatch
from tests.browser.run_pages import compare_in_history
from tests.fixtures.clusters import make_local_cluster

pytestmark = pytest.mark.integration

# Each node bar's width against its track's (a function: Playwright evaluates an expression with
# eval, which the policy refuses).
BAR_RATIOS = """() => [...document.querySelectorAll(".node-card .progress")].map((track) => [
  track.getAttribute("aria-label"),
  track.querySelector(".progress-bar").getBoundingClientRect().width / track.getBoundingClientRect().width,
])"""


def test_every_page_a_user_reaches_logs_no_console_error(
    live_server, celery_worker, journey_user: User, page: Page
) -> None:
    base = live_server.url
    journey_user.is_staff = True  # the Nodes page and the attach form too
    journey_user.save(update_fields=["is_staff"])
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    watch = ConsoleWatch(page)

    watch.at("login page")
    page.goto(f"{base}/login/")
    watch.at("log in, empty cluster list")
    log_in(page, base)
    expect(page.locator(".empty-state")).to_be_visible()

    watch.at("create form")
    page.get_by_role("link", name="Create cluster").first.click()
    expect(page.get_by_label("Cluster name")).to_be_visible()
    page.get_by_label("Cluster name").fill("db-console")
    watch.at("create form filled")

    cluster = make_local_cluster(journey_user, name="db-console")
    try:
        _walk_cluster(page, base, watch, cluster)
    finally:
        if Cluster.objects.filter(pk=cluster.pk).exists():
            cluster.refresh_from_db()
            cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
    assert watch.report() == []


def _walk_cluster(page: Page, base: str, watch: ConsoleWatch, cluster: Cluster) -> None:
    tab = f"{base}/clusters/{cluster.pk}"
    watch.at("cluster list with a cluster")
    page.goto(f"{base}/clusters/")
    expect(page.get_by_role("link", name="db-console").first).to_be_visible()

    watch.at("overview")
    page.get_by_role("link", name="db-console").first.click()
    box = page.locator("#connection-details")
    expect(box).to_be_visible()
    watch.at("connection details: show password")
    box.get_by_role("button", name="show").first.click()
    watch.at("connection details: flags")
    page.locator("#conn-view").select_option("flags")
    expect(box.locator("code", has_text="psql")).to_be_visible(timeout=15_000)
    watch.at("connection details: parameters")
    page.locator("#conn-view").select_option("params")
    watch.at("connection details: copy the URI")
    page.locator("#conn-view").select_option("uri")
    # The box is swapped in by htmx: a click on the button it replaces would copy nothing.
    expect(box.locator("code", has_text="postgresql://")).to_be_visible(timeout=15_000)
    wait_for_htmx(page)
    box.get_by_role("button", name="Copy").first.click()
    expect(box.get_by_role("button", name="Copied").first).to_be_visible(timeout=15_000)

    watch.at("users & databases")
    page.get_by_role("link", name="Users & Databases").click()
    expect(page.locator("#users-tab")).to_be_visible()
    _delete_with_the_typed_name(page, watch)

    watch.at("insights")
    page.get_by_role("link", name="Insights").click()
    expect(page).to_have_url(re.compile(r".*/insights/$"))

    watch.at("queries")
    page.locator(".cluster-tabs").get_by_role("link", name="Queries").click()
    expect(page.locator("#queries-body")).to_be_visible()

    watch.at("settings tab: resize, configuration, trusted sources")
    page.locator(".cluster-tabs").get_by_role("link", name="Settings").click()
    expect(page.locator("#settings-trusted-sources")).to_be_visible()
    expect(page.locator("#settings-resize")).to_be_visible()
    expect(page.locator("#settings-config")).to_be_visible()

    watch.at("quotas tab: empty, then a quota")
    page.locator(".cluster-tabs").get_by_role("button", name="More").click()  # the less-used tabs
    page.locator(".cluster-tabs").get_by_role("link", name="Quotas").click()
    expect(page.locator(".quota-empty")).to_be_visible()
    page.get_by_label("Database or user").fill("defaultdb")
    page.get_by_label("Space hard limit").fill("1G")
    page.get_by_role("button", name="Save quota").click()
    quota_row = page.locator("tr[data-quota='database:defaultdb']")
    expect(quota_row).to_be_visible(timeout=15_000)
    expect(quota_row).to_contain_text("1024M")
    expect(quota_row).to_contain_text("OK")

    watch.at("empty pools tab")
    page.get_by_role("link", name="Connection Pools").click()
    expect(page.locator(".empty-state")).to_be_visible()
    page.get_by_label("Pool name").fill("console-pool")
    page.get_by_label("Database").select_option("defaultdb")
    page.get_by_label("Pool size").fill("5")
    watch.at("create a pool")
    page.get_by_role("button", name="Create pool").click()
    row = page.locator("tr[data-pool='console-pool']")
    expect(row).to_be_visible(timeout=15_000)
    watch.at("pools tab with a pool")
    page.wait_for_timeout(3_500)  # one round of the table's live figures (every 3 s)
    watch.at("pool delete dialog")
    row.get_by_role("link", name="Delete").click()
    dialog = page.locator("#delete-pool-modal")
    expect(dialog.get_by_role("button", name="Delete pool")).to_be_visible(timeout=15_000)
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    watch.at("pool page")
    row.get_by_role("link", name="console-pool").click()
    expect(page.locator("#connection-details")).to_be_visible()
    watch.at("pool page: flags with the password")
    page.locator("#conn-view").select_option("flags")
    page.locator("#connection-details").get_by_role("button", name="show password").click()

    # The less-used tabs (under "More"), each opened by its address.
    watch.at("logs tab")
    page.goto(f"{tab}/logs/")
    expect(page.locator("#log-results")).to_be_visible()
    watch.at("backups tab")
    page.goto(f"{tab}/backups/")
    expect(page.get_by_role("button", name="Back up now")).to_be_visible()
    watch.at("migration tab")
    page.goto(f"{tab}/migration/")
    expect(page.locator("#migration-card")).to_be_visible()

    watch.at("benchmarks tab")
    page.goto(f"{tab}/benchmarks/")
    expect(page.get_by_text("No data set yet.")).to_be_visible()
    watch.at("benchmarks: initialise a data set")
    init = page.locator("#init-form")
    init.get_by_label("Database").select_option("defaultdb")
    init.get_by_label("Scale factor").fill("1")
    init.get_by_role("button", name="Initialise").click()
    dataset = page.locator("tr[data-dataset='defaultdb']")
    expect(dataset).to_have_attribute("data-status", "succeeded", timeout=60_000)
    watch.at("benchmarks: fill the run form")
    form = page.locator("#run-form")
    pool = ConnectionPool.objects.get(cluster=cluster, name="console-pool")
    form.get_by_label("Target").select_option(str(pool.pk))
    form.get_by_label("Target").select_option("direct")
    form.get_by_label("Clients").fill("1")
    form.get_by_label("Duration (s)").fill("2")
    form.get_by_label("Duration (s)").press("Tab")
    expect(page.locator("#run-warnings > *")).to_have_count(1, timeout=5_000)
    watch.at("benchmarks: launch a run, watch it")
    form.get_by_role("button", name="Launch run").click()
    expect(page).to_have_url(re.compile(r".*/benchmarks/runs/[0-9a-f-]+/$"), timeout=10_000)
    expect(page.locator("#bench-run-live")).to_have_attribute("data-status", "succeeded", timeout=60_000)
    run = BenchmarkRun.objects.get(cluster=cluster)

    watch.at("compare")
    other = make_run(cluster, samples=4, label="baseline", clients=4)
    compare_in_history(page, tab, "/benchmarks/", run, other)
    expect(page.locator("[data-bench-compare][data-drawn='true']")).to_be_visible(timeout=15_000)
    watch.at("the earlier run's page")
    page.goto(f"{tab}/benchmarks/runs/{other.pk}/")

    _walk_account_and_staff_pages(page, base, watch)

    watch.at("log out")
    page.locator(".panel-user-toggle").click()
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r".*/login/$"))
    watch.at("end")


def _delete_with_the_typed_name(page: Page, watch: ConsoleWatch) -> None:
    """A database and a user are deleted through the page's modal, the typed name unlocking the
    button; the browser's own confirm() would fail the walk (Playwright dismisses it)."""

    def refuse(dialog: Dialog) -> None:
        watch.add(f"a browser dialog: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", refuse)
    for kind, name, label, add_button, delete_button in (
        ("database", "scratch", "Add a database", "Add database", "Delete database"),
        ("user", "scratcher", "Add a user", "Add user", "Delete user"),
    ):
        watch.at(f"users & databases: add the {kind} {name}")
        page.get_by_label(label).fill(name)
        page.get_by_role("button", name=add_button, exact=True).click()
        row = page.locator(f"tr[data-{kind}='{name}']")
        expect(row).to_be_visible(timeout=15_000)
        wait_for_htmx(page)
        watch.at(f"users & databases: delete the {kind} {name}, first cancelled")
        modal = page.locator("#confirm-modal")
        row.get_by_role("button", name="Delete").click()
        expect(modal).to_be_visible()
        expect(modal.get_by_role("heading")).to_have_text(delete_button)
        expect(modal.get_by_role("button", name=delete_button)).to_be_disabled()
        modal.get_by_role("button", name="Cancel").click()
        expect(modal).to_be_hidden()
        expect(row).to_be_visible()
        watch.at(f"users & databases: delete the {kind} {name}")
        row.get_by_role("button", name="Delete").click()
        expect(modal).to_be_visible()
        typed = modal.get_by_label("Type the name to confirm:")
        typed.fill(name[:-1])
        expect(modal.get_by_role("button", name=delete_button)).to_be_disabled()
        typed.fill(name)
        modal.get_by_role("button", name=delete_button).click()
        expect(modal).to_be_hidden()
        expect(row).to_have_count(0, timeout=15_000)


def _walk_account_and_staff_pages(page: Page, base: str, watch: ConsoleWatch) -> None:
    watch.at("api tokens")
    page.locator(".panel-user-toggle").click()
    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", name="API tokens", exact=True)).to_be_visible()

    watch.at("nodes page (staff)")
    # A node of 4 GB and 4 vCPUs: the 1 GB cluster takes a quarter of each, a bar to see.
    Node.objects.update(ram_bytes=4 * 1024**3, vcpus=4)
    page.get_by_role("link", name="Nodes").click()
    card = page.locator(".node-card").first
    expect(card).to_be_visible()
    # The bars have their width: the cluster holds part of this node's RAM and vCPUs.
    expect(card.locator(".progress-bar")).to_have_count(2)
    for name, ratio in page.evaluate(BAR_RATIOS):
        if not 0.2 < ratio < 0.3:
            watch.add(f"the {name} bar is {ratio:.0%} wide, not 25 %")
    watch.at("nodes page: one poll")
    with page.expect_response(lambda r: r.url.endswith("/clusters/nodes/"), timeout=15_000):
        pass

    watch.at("attach form (staff)")
    page.goto(f"{base}/clusters/attach/")
    expect(page.get_by_role("heading", level=1)).to_be_visible()

    watch.at("a page that does not exist")
    missing = f"{base}/clusters/no-such-page/"
    watch.expect_status(missing, 404)
    page.goto(missing)
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    page.get_by_role("link", name="Back to the clusters").click()
    expect(page).to_have_url(f"{base}/clusters/")
