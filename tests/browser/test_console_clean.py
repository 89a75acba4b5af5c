"""Issue 11, item 5: every page a user reaches, walked in Chromium, logs no console error and no
failed request (a status of 400 or more, or a request the browser gave up on).

On the code before the fix it failed twice: the favicon was a 404 on every page, and the run
form's "#run-warnings" check inherited the form's ``hx-disabled-elt="find button[type='submit']"``,
which finds nothing inside that div, so htmx logged "The selector … returned no matches!" on every
Benchmarks tab load and every change in the form.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import ConsoleMessage, Frame, Page, Request, Response, expect

from benchmarks.models import BenchmarkRun
from benchmarks.tests.test_views_pages import make_run
from conftest import make_local_cluster
from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from panel.pools.models import ConnectionPool
from tests.browser.conftest import log_in, wait_for_htmx

pytestmark = pytest.mark.integration


class ConsoleWatch:
    """Everything that went wrong in the browser, labelled with the step of the walk."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.step = "start"
        self.problems: list[str] = []
        self.navigations = 0
        self._started: dict[Request, int] = {}
        self._aborted: list[tuple[Request, str]] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self._add(f"uncaught exception: {error}"))
        page.on("request", lambda request: self._started.setdefault(request, self.navigations))
        page.on("framenavigated", self._navigated)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _add(self, what: str) -> None:
        self.problems.append(f"[{self.step}] {what}")

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self._add(f"console error: {message.text} ({message.location.get('url')})")

    def _navigated(self, frame: Frame) -> None:
        if frame == self.page.main_frame:
            self.navigations += 1

    def _failed(self, request: Request) -> None:
        what = f"request failed: {request.method} {request.url}: {request.failure}"
        if request.failure == "net::ERR_ABORTED":
            # Leaving a page cancels its polling request in flight: nothing a user sees. Judged once
            # the navigation that may have caused it is known.
            self._aborted.append((request, f"[{self.step}] {what}"))
        else:
            self._add(what)

    def _judge_aborted(self) -> None:
        for request, what in self._aborted:
            if self._started.get(request, self.navigations) == self.navigations:
                self.problems.append(f"{what} (no navigation away from its page)")
        self._aborted.clear()

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            self._add(f"HTTP {response.status}: {response.request.method} {response.url}")

    def at(self, step: str) -> None:
        """Let the page finish what it does on load (htmx load triggers, icons), then name the next step."""
        settle(self.page)
        self._judge_aborted()
        self.step = step


def settle(page: Page) -> None:
    page.wait_for_load_state("load")
    wait_for_htmx(page)
    # Requests fired on load or after a short delay (the run form's check waits 300 ms) included.
    page.wait_for_load_state("networkidle")
    wait_for_htmx(page)


def test_every_page_a_user_reaches_logs_no_console_error(
    live_server, celery_worker, journey_user: User, page: Page
) -> None:
    base = live_server.url
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
    assert watch.problems == []


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
    page.goto(f"{tab}/benchmarks/")
    history = page.locator("#bench-history")
    history.locator(f"#pick-{run.pk}").check()
    history.locator(f"#pick-{other.pk}").check()
    history.get_by_role("button", name="Compare").click()
    expect(page.locator("[data-bench-compare][data-drawn='true']")).to_be_visible(timeout=15_000)
    watch.at("the earlier run's page")
    page.goto(f"{tab}/benchmarks/runs/{other.pk}/")

    watch.at("log out")
    page.locator(".panel-user-toggle").click()
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r".*/login/$"))
    watch.at("end")
