"""Issue 38 replayed as its user saw it, in one story in Chromium at 1,280 × 800, on the session's
two-member cluster (a loan of the HA pair, which ends with the pair as it found it).

1. A switchover from the Overview's Members card (the page's modal, a disabled button and a
   progress line) while a metrics collection and a quota cycle meet it on purpose (member 1's
   postmaster stopped for the handover, as in panel/clusters/tests/test_ha_status_truth.py): the
   cluster is online on the page and in ``manage.py cluster list`` within 30 s and stays so for
   more rounds; no event says "PostgreSQL is not running".
2. No banner on any tab of that cluster carries the driver's words or a socket path.
3. (A restored cluster's first backup is no browser matter:
   panel/backups/tests/test_first_backup.py.)
4. The user switches to German with the language menu: the Overview (events, members), the
   Configuration card and the Users & Databases tab hold no English from the catalogue
   (tests/browser/test_german_every_page.py's patterns).
5. The console holds no Content-Security-Policy violation and no JavaScript error all along,
   the Members card's polls included.
6. Restart from the Actions menu (Restart and Stop offered, not Start) keeps the primary where
   the switchover put it and says so; deleting a database asks for its typed name in the
   page's modal (a wrong name leaves the button disabled).
7. At 1,280 × 800, in both languages, no page scrolls sideways and the tabs take one row: the
   Overview with the Members card and a 63-character database name chosen in the connection
   box, and every tab.

On the code before the issue's fixes (7636d75) the journey fails at 7 (the Overview 1,340 px
wide), and, run past each failure in turn, at 6 (the browser's confirm(), no progress line, a
stale events list, "Starting 100 %", the primary moved back to member-1, a delete without the
typed name), 1 (degraded for good), 2 (the quota banner with psycopg's words and the socket path)
and 4 (English events and Configuration help). Its console stayed clean there: the old code's
policy violations were on pages this journey does not poll (tests/browser/test_console_clean.py)."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import Page, expect

from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import Cluster, MemberRole
from panel.clusters.services import reconciler, roles
from panel.clusters.standbys.services import ha, switchover
from panel.insights.lib.metrics import POSTGRES
from panel.insights.services import collection
from panel.quotas import services as quotas
from panel.quotas.models import Storage
from tests.browser.conftest import log_in, snapshot, wait_for_htmx
from tests.browser.console import ConsoleWatch
from tests.browser.test_german_every_page import english_on, english_patterns
from tests.fixtures.ha_pair import HaPair, lend_ha_pair

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1280, 800
LONG_NAME = ("inventory_warehouse_stock_movements_" * 2)[:63]
HEALTHY_TIMEOUT = 120
RESTART_TIMEOUT = 150_000  # ms: a rolling restart of two members on a loaded machine

# How wide the document is, how many rows the cluster tabs take, and what sticks out of its card
# (a function: Playwright evaluates an expression with eval, which the panel's policy refuses).
FIT = """() => ({
  width: document.documentElement.scrollWidth,
  rows: new Set([...document.querySelectorAll(".cluster-tabs > li")]
    .map((li) => Math.round(li.getBoundingClientRect().top))).size,
  out: [...document.querySelectorAll("main .card")].flatMap((card) => {
    const edge = card.getBoundingClientRect().right;
    return [...card.querySelectorAll("*")]
      .filter((el) => el.getBoundingClientRect().width && !el.closest(".dropdown-menu, .table-responsive"))
      .filter((el) => el.getBoundingClientRect().right > edge + 1)
      .map((el) => `${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}.${[...el.classList].join(".")}`
        + ` +${Math.round(el.getBoundingClientRect().right - edge)} px`);
  }),
})"""
BANNERS = """() => [...document.querySelectorAll(".alert")]
  .filter((alert) => alert.getClientRects().length).map((alert) => alert.innerText.trim())"""
# A path ("/run/…/.s.PGSQL.5432") and what psycopg and libpq say when a server does not answer.
PATH = re.compile(r"(?<![\w.:/])/(?:[\w.@-]+/)+[\w.@-]*")
DRIVER_WORDS = re.compile(
    r"connection to server|FATAL|server closed the connection|could not connect|Is the server running"
    r"|psycopg|\.s\.PGSQL|No such file|Connection refused|terminating connection"
)


@pytest.fixture
def issue38_cluster(journey_user: User, ha_pair: HaPair, django_db_blocker: object) -> Iterator[Cluster]:
    """The HA pair as the journey user's db-issue38, with a database of the longest name
    PostgreSQL takes (deleted in the journey; here too if the journey stopped before)."""
    with lend_ha_pair(ha_pair, django_db_blocker, journey_user, "db-issue38") as cluster:
        roles.add_database(cluster, LONG_NAME)
        try:
            yield cluster
        finally:
            with django_db_blocker.unblock():  # type: ignore[attr-defined]
                if cluster.databases.filter(name=LONG_NAME).exists():
                    roles.delete_database(cluster, LONG_NAME, confirm_name=LONG_NAME)


def listed_status(cluster: Cluster) -> str:
    """The cluster's status as ``manage.py cluster list`` prints it."""
    out = io.StringIO()
    call_command("cluster", "list", stdout=out)
    row = next(line for line in out.getvalue().splitlines() if line.split()[:1] == [cluster.name])
    return row.split()[2]


def exists_in_postgres(cluster: Cluster, name: str) -> bool:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_database WHERE datname = %s", [name]
        ).fetchone()
    return row == (1,)


def restart_diagnosis(cluster: Cluster) -> str:
    """The members' statuses, the cluster's last events and its logs' tails, for a restart that
    did not end online."""
    tails = [
        f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-60:])
        for path in [
            *sorted(cluster.log_file.parent.glob("*.log")),
            Path(settings.PANEL_DATA_DIR) / "celery-worker.log",
        ]
        if path.is_file()
    ]
    events = list(cluster.events.values_list("created_at", "kind", "message")[:10])
    return f"statuses: {ha.read_statuses(cluster)}\nevents: {events}\n" + "\n".join(tails)


def assert_fits(page: Page, where: str) -> None:
    wait_for_htmx(page)
    fit = page.evaluate(FIT)
    assert fit["width"] <= WIDTH, f"{where}: the page is {fit['width']} px wide at {WIDTH} px"
    assert fit["rows"] == 1, f"{where}: the tabs take {fit['rows']} rows"
    assert fit["out"] == [], f"{where}: out of its card: {fit['out'][:6]}"


def assert_banners_plain(page: Page, where: str) -> None:
    for banner in page.evaluate(BANNERS):
        raw = PATH.search(banner) or DRIVER_WORDS.search(banner)
        assert raw is None, f"{where}: a banner carries the driver's text ({raw.group(0)!r}): {banner}"


def open_overview_with_long_database(page: Page, base: str, cluster: Cluster) -> None:
    page.goto(f"{base}/clusters/{cluster.pk}/")
    page.locator("#members-table tbody tr[data-member]").first.wait_for()
    page.locator("#conn-database").select_option(LONG_NAME)
    expect(page.locator("#connection-details")).to_contain_text(LONG_NAME)
    wait_for_htmx(page)


def meet_the_switchover(monkeypatch: pytest.MonkeyPatch, cluster: Cluster) -> dict[str, bool]:
    """While Patroni hands over (member 1's postmaster stopped: its data directory is the
    cluster's pgdata), the periodic collection and quota cycle run, in the request that asked
    for the switchover (the live server runs in this process)."""
    met = {"collection": False, "quotas": False}
    real_wait = switchover.Switchover.wait_writable

    def collect_meanwhile(self: switchover.Switchover) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and postgres.postmaster_pid(cluster.pgdata) is not None:
            time.sleep(0.01)
        while time.monotonic() < deadline and postgres.postmaster_pid(cluster.pgdata) is None:
            if not met["quotas"]:  # first: the old code's collection made the cluster degraded
                quotas.run_all()
                met["quotas"] = bool(Storage.objects.filter(cluster=cluster).exclude(blind="").exists())
            if not met["collection"]:
                snap = collection.collect_cluster(Cluster.objects.get(pk=cluster.pk))
                met["collection"] = snap.up.get(POSTGRES) is False
            if all(met.values()):
                break
        return real_wait(self)

    monkeypatch.setattr(switchover.Switchover, "wait_writable", collect_meanwhile)
    return met


def test_issue_38_as_its_user_saw_it(
    live_server,
    celery_worker: None,
    issue38_cluster: Cluster,
    page: Page,
    monkeypatch: pytest.MonkeyPatch,
    settings: object,
    wait_until: Callable[..., object],
) -> None:
    cluster = issue38_cluster
    base = live_server.url
    settings.PANEL_DISK_RESERVE_MB = 0  # type: ignore[attr-defined]  # the quota cycle makes no reserve file here
    assert ha.wait_healthy(cluster, HEALTHY_TIMEOUT), ha.read_statuses(cluster)
    ha.refresh_members(cluster)
    old = cluster.members.get(role=MemberRole.PRIMARY).name
    new = cluster.members.get(role=MemberRole.STANDBY).name
    started = timezone.now()
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    watch = ConsoleWatch(page)

    # 7 (English): the Overview with the Members card and the longest database name fits.
    watch.at("overview in English at 1,280 px")
    log_in(page, base, f"/clusters/{cluster.pk}/")
    open_overview_with_long_database(page, base, cluster)
    assert_fits(page, "Overview (en)")
    snapshot(page, "issue38-0-overview")

    # 1: the switchover, met by a collection and a quota cycle on purpose.
    watch.at("switchover from the Members card")
    met = meet_the_switchover(monkeypatch, cluster)
    card = page.locator("#members-card")
    card.get_by_label("New primary").select_option(new)
    card.get_by_role("button", name="Switchover").click()
    modal = page.locator("#confirm-modal")
    expect(modal).to_contain_text("Switch over now?")
    modal.get_by_role("button", name="Switch over").click()
    expect(page.locator("#switchover-progress")).to_be_visible()
    expect(page.locator("#switchover-progress")).to_contain_text("Switching over")
    expect(card.get_by_role("button", name="Switchover")).to_be_disabled()
    expect(page.locator("#members-card .alert[role=status]")).to_contain_text(
        f"{new} is the primary now.", timeout=90_000
    )
    monkeypatch.undo()
    assert met == {"collection": True, "quotas": True}, f"not met with member 1's postmaster stopped: {met}"
    expect(page.locator(".event-list")).to_contain_text(
        f"Switchover: {new} is the primary now (was {old})", timeout=15_000
    )

    def online_after_a_round() -> bool:  # the periodic reconciler and collection, as beat runs them
        reconciler.reconcile()
        collection.collect_cluster(Cluster.objects.get(pk=cluster.pk))
        return listed_status(cluster) == "online"

    wait_until(online_after_a_round, timeout=30, message="manage.py cluster list did not say online")
    watch.at("overview after the switchover")
    page.reload()
    expect(page.locator("h1 .status-badge")).to_have_attribute("data-status", "online")
    for _ in range(3):
        assert online_after_a_round(), f"after the switchover: {listed_status(cluster)}"
    page.reload()
    expect(page.locator("h1 .status-badge")).to_have_attribute("data-status", "online")
    events = page.locator(".event-list")
    expect(events).to_contain_text(f"Switchover: {new} is the primary now (was {old})")
    expect(events).not_to_contain_text("PostgreSQL is not running")
    since = cluster.events.filter(created_at__gte=started)
    assert not since.filter(kind__in=["postmaster-gone", "degraded"]).exists(), list(
        since.values_list("kind", "message")
    )
    snapshot(page, "issue38-1-after-switchover")

    # 2 and 7: every tab (those in the "More" menu too), its banners plain words, in one row.
    tabs = page.eval_on_selector_all(
        ".cluster-tabs a[href]:not([href='#'])", "links => links.map(a => a.href)"
    )
    assert len(tabs) >= 11, tabs
    for url in dict.fromkeys(tabs):
        watch.at(f"tab {url.removeprefix(base)}")
        page.goto(url)
        page.wait_for_load_state("networkidle")
        assert_banners_plain(page, url)
        assert_fits(page, url)

    # 6: Restart from the Actions menu keeps the primary where it is, and says so.
    watch.at("restart from the Actions menu")
    page.goto(f"{base}/clusters/{cluster.pk}/")
    page.get_by_role("button", name="Actions").click()
    menu = page.locator("#cluster-live .dropdown-menu")
    expect(menu.locator("form button")).to_have_text(["Restart", "Stop"])  # no Start beside them
    menu.get_by_role("button", name="Restart").click()
    expect(page.locator("#cluster-progress")).to_contain_text(
        re.compile("Restarting (member by member|the standbys|the primary in place)"), timeout=30_000
    )
    try:
        expect(page.locator("h1 .status-badge")).to_have_attribute(
            "data-status", "online", timeout=RESTART_TIMEOUT
        )
    except AssertionError as exc:  # rare, under load: what the members said, for the next look
        raise AssertionError(f"{exc}\n{restart_diagnosis(cluster)}") from exc
    expect(page.locator(".event-list")).to_contain_text(
        f"Cluster restarted member by member, the standbys first; {new} is still the primary.", timeout=30_000
    )
    expect(page.locator(f"#members-card [data-member='{new}']")).to_have_attribute(
        "data-role", "primary", timeout=15_000
    )
    ha.refresh_members(cluster)
    assert cluster.members.get(role=MemberRole.PRIMARY).name == new
    assert listed_status(cluster) == "online"
    snapshot(page, "issue38-2-after-restart")

    # 4 and 7 (German): the language menu, then the pages in German only, still fitting.
    watch.at("language menu: Deutsch")
    page.locator(".panel-sidebar .panel-language-toggle").click()
    page.locator(".panel-sidebar").get_by_role("button", name="Deutsch").click()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    patterns = english_patterns()
    watch.at("overview in German")
    open_overview_with_long_database(page, base, cluster)
    expect(page.locator(".event-list")).to_contain_text(f"{new}")
    assert english_on(page, patterns) == [], "the Overview in German"
    assert_fits(page, "Overview (de)")
    assert_banners_plain(page, "Overview (de)")
    snapshot(page, "issue38-3-overview-de")
    watch.at("settings in German: the Configuration card")
    page.goto(f"{base}/clusters/{cluster.pk}/settings/")
    expect(page.locator("#settings-config-title")).to_be_visible()
    assert english_on(page, patterns) == [], "the Settings tab in German"
    assert_fits(page, "Settings (de)")

    # 6: the database goes only once its name is typed in the page's modal.
    watch.at("users & databases in German: delete the long-named database")
    page.goto(f"{base}/clusters/{cluster.pk}/users/")
    row = page.locator(f"tr[data-database='{LONG_NAME}']")
    expect(row).to_be_visible()
    assert english_on(page, patterns) == [], "the Users & Databases tab in German"
    assert_fits(page, "Users & Databases (de)")
    wait_for_htmx(page)
    row.locator("button[type=submit]").click()
    modal = page.locator("#confirm-modal")
    expect(modal).to_be_visible()
    typed, confirm = modal.locator("[data-confirm-input]"), modal.locator("[data-confirm-ok]")
    expect(modal.locator("[data-confirm-expected]")).to_have_text(LONG_NAME)
    typed.fill(LONG_NAME[:-1])
    expect(confirm).to_be_disabled()
    typed.fill(LONG_NAME)
    expect(confirm).to_be_enabled()
    confirm.click()
    expect(modal).to_be_hidden()
    expect(row).to_have_count(0, timeout=15_000)
    assert not cluster.databases.filter(name=LONG_NAME).exists()
    assert not exists_in_postgres(cluster, LONG_NAME)
    snapshot(page, "issue38-4-users-de")

    watch.at("end")
    assert watch.report() == []
