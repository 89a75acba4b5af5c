"""Every page in German, in a real browser, holds no English (issue 38, item 4): the cluster list,
the create form, every tab of a cluster (with events logged in English by the services, as the
workers do), the account's API tokens, the nodes, the benchmarks' tab, a run and a comparison, and
the API docs. What counts as English comes from the catalogue itself: each source sentence of two
words or more (a sentence with placeholders as a pattern), each clearly English word, the English
names of the days; and no ISO date nor English decimal point outside code and the server's own log
lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from benchmarks.tests.test_views_pages import make_run
from panel.accounts.services import set_account_language
from panel.clusters.models import Cluster
from panel.clusters.services import config, firewall, transitions
from panel.core.errors import N_, Message
from panel.managed.lib.updates import DAYS
from panel.managed.services import maintenance
from tests.browser.conftest import log_in, snapshot, wait_for_htmx
from tests.test_i18n_check import i18n_check

pytestmark = pytest.mark.integration
CATALOGUE = Path(__file__).resolve().parents[2] / "locale/de/LC_MESSAGES/django.po"
PLACEHOLDER = re.compile(r"%\(\w+\)[-+ #0]*\d*(?:\.\d+)?[sdfgi]|%[sd]")
WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]+")
ISO_MOMENT = re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}")
# A decimal point before a unit ("17.5 GB", "2.3 s"): German writes 17,5 GB (1.024 GB groups digits).
ENGLISH_DECIMAL = re.compile(r"(?<![\d.,])\d+\.\d{1,2} ?(?:[KMGT]i?B|kB|ms|s|%)(?!\w)")
# Single catalogue words a German page must not show: English, and not German words too.
ENGLISH_WORDS = {
    "Overview", "Settings", "Databases", "Users", "Delete", "Cancel", "Save", "Create", "Remove",
    "Edit", "Download", "Search", "Copy", "Copied", "Close", "Revoke", "Compare", "Running",
    "Succeeded", "Failed", "Queued", "Stopped", "Starting", "Stopping", "Creating", "Deleting",
    "Resizing", "Degraded", "Unknown", "Warning", "Errors", "Queries", "Writes", "Reads", "Calls",
    "Rows", "Summary", "Duration", "Latency", "Progress", "Retry", "Owner", "Uptime", "Connections",
    "Disk", "Configuration", "Alerts", "Pending", "Enabled", "Disabled", "Members", "Maintenance",
    "Replication", "Nodes", "Backups", "Plans", "Transactions", "Elapsed", "Started", "Created",
    "Ready", "Runs", "Threshold", "Username", "Language", "Actions", "Size", "Restore", "Monday",
    "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "never", "failed", "seconds",
    *DAYS,
}  # fmt: skip

# The page's visible text, without code, the server's own log lines and what is hidden.
VISIBLE_TEXT = """() => {
  // Swagger UI (the API docs) is the vendored tool's own, English, around the API's English schema.
  const skip = "script, style, code, pre, kbd, samp, textarea, .log-entry, #swagger-ui, [hidden], [aria-hidden=true]";
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip) || !node.textContent.trim()) continue;
    if (!parent.getClientRects().length || getComputedStyle(parent).visibility === "hidden") continue;
    out.push(node.textContent.replace(/\\s+/g, " ").trim());
  }
  return out.join("\\n");
}"""


def _english(entry: dict) -> bool:
    english, german = entry["msgid"], (entry.get("msgstr") or [""])[0]
    return bool(german) and not entry.get("msgid_plural") and german != english


def english_patterns() -> list[re.Pattern[str]]:
    """Each catalogue sentence of two words or more that German says otherwise, as a pattern (a
    placeholder stands for any short text), and each clearly English word."""
    entries = [e for e in i18n_check.parse_po(CATALOGUE) if _english(e)]
    german_words = {w for e in entries for w in WORDS.findall(e["msgstr"][0])}
    patterns = []
    for entry in entries:
        english = entry["msgid"]
        if "<" in english or "&" in english or "{" in english:
            continue  # markup: the page shows its text in pieces
        pieces = PLACEHOLDER.split(english)
        words = [w for piece in pieces for w in WORDS.findall(piece) if w not in i18n_check.SAME_EVERYWHERE]
        if len(words) < 2 or all(w in german_words for w in words):
            continue
        patterns.append(re.compile(".{1,80}?".join(re.escape(piece) for piece in pieces)))
    for word in sorted(ENGLISH_WORDS - german_words):
        patterns.append(re.compile(rf"(?<![\w-]){word}(?![\w-])"))
    assert len(patterns) > 500, "the catalogue is missing"
    return patterns


def english_on(page: Page, patterns: list[re.Pattern[str]]) -> list[str]:
    expect(page.locator("html")).to_have_attribute("lang", "de")
    wait_for_htmx(page)
    shown = page.evaluate(VISIBLE_TEXT)
    found = []
    for pattern in [*patterns, ISO_MOMENT, ENGLISH_DECIMAL]:
        for match in pattern.finditer(shown):
            found.append(shown[max(0, match.start() - 40) : match.end() + 40].replace("\n", " / "))
    return found


def test_every_page_in_german_has_no_english(
    live_server, journey_user: User, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    patterns = english_patterns()
    # What the services log in English, as a worker does (tests run in English): the events the
    # issue saw in English on German pages.
    firewall.add_trusted_source(cluster, "198.18.0.7")
    firewall.remove_trusted_source(cluster, "198.18.0.7")
    maintenance.set_window(cluster, "wednesday", "3")
    config.update_config(cluster, {"work_mem": 8})
    # A decimal in an event, as the member-count change logs it: 17,5 s on a German page.
    transitions.log_event(
        cluster,
        "members-changed",
        Message(
            N_("The cluster has %(n)s node(s) now (was %(old)s); the change took %(s).1f s."),
            n=1,
            old=1,
            s=17.5,
        ),
    )
    cluster.refresh_from_db()
    assert transitions.mark_postmaster_gone(cluster)
    transitions.mark_online(cluster)
    run = make_run(cluster, samples=4, label="Erster Lauf", clients=2)
    other = make_run(cluster, samples=4, label="Vergleich", clients=4)
    journey_user.is_staff = True  # the nodes page is for staff
    journey_user.save(update_fields=["is_staff"])
    set_account_language(journey_user, "de")

    log_in(page, live_server.url)
    base = live_server.url
    pages = [f"{base}/clusters/", f"{base}/clusters/new/", f"{base}/clusters/{cluster.pk}/"]
    page.goto(pages[-1])
    tabs = (
        ".cluster-tabs a.nav-link:not(.dropdown-toggle), .cluster-tabs a.dropdown-item"  # "More" folds four
    )
    pages += page.eval_on_selector_all(tabs, "links => links.map(a => a.href)")
    bench = f"{base}/clusters/{cluster.pk}/benchmarks/"
    pages += [
        f"{bench}runs/{run.pk}/",
        f"{bench}compare/?run={run.pk}&run={other.pk}",
        f"{base}/clusters/nodes/",
        f"{base}/account/tokens/",
        f"{base}/v2/docs",
    ]
    assert len(pages) >= 18, pages
    english = {}
    for number, url in enumerate(dict.fromkeys(pages)):
        page.goto(url)
        page.wait_for_load_state("networkidle")
        found = english_on(page, patterns)
        snapshot(page, f"de-page-{number:02d}")
        if found:
            english[url.removeprefix(base)] = found[:8]
    assert english == {}, english
