"""Issue 18's journey in German, in a real browser: switch with the language menu, create a
database cluster, add a database, get a pool form error and create the pool, initialise a data
set, run a benchmark with its live chart, compare runs. Every page is German: its texts come from
the catalogue (looked up here with gettext, so the test follows the catalogue's words) and none of
the panel's English phrases is left on it; numbers and dates are written the German way."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.utils import translation
from playwright.sync_api import Page, expect

from benchmarks.models import BenchmarkRun
from benchmarks.tests.test_views_pages import make_run
from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from tests.browser.conftest import log_in, snapshot, wait_for_htmx
from tests.test_i18n_check import i18n_check

pytestmark = pytest.mark.integration
CATALOGUE = Path(__file__).resolve().parents[2] / "locale/de/LC_MESSAGES/django.po"
PLACEHOLDER = re.compile(r"%\(|%[sd]|\{|<|&")
GERMAN_NUMBER = re.compile(r"^\d{1,3}(\.\d{3})*,\d$")
GERMAN_DATE = re.compile(r"\b\d{2}\.\d{2}\.\d{4} \d{2}:\d{2}\b")


def de(english: str) -> str:
    with translation.override("de"):
        german = translation.gettext(english)
    return german  # some words are the same in German (Clients, Benchmarks): see docs/glossary-de.md


def english_phrases() -> list[str]:
    """The panel's English phrases that a German page must not show: every catalogue message of
    two words or more whose German differs (and does not contain the English words)."""
    phrases = []
    for entry in i18n_check.parse_po(CATALOGUE):
        english, german = entry["msgid"], (entry.get("msgstr") or [""])[0]
        if entry.get("msgid_plural") or PLACEHOLDER.search(english) or len(english.split()) < 2:
            continue
        if german and english not in german:
            phrases.append(english)
    assert len(phrases) > 200, "the catalogue is missing"
    return phrases


def assert_german(page: Page, phrases: list[str], *expected: str) -> None:
    expect(page.locator("html")).to_have_attribute("lang", "de")
    wait_for_htmx(page)
    for text in expected:
        expect(page.locator("body")).to_contain_text(text)
    shown = page.evaluate("() => document.body.innerText")
    leftovers = [
        shown[max(0, shown.index(phrase) - 60) : shown.index(phrase) + len(phrase) + 60]
        for phrase in phrases
        if phrase in shown
    ]
    assert not leftovers, f"English on {page.url}: {leftovers}"


def test_the_tutorial_story_in_german(live_server, celery_worker, journey_user, page: Page) -> None:
    phrases = english_phrases()
    assert de("Connection Pools") == "Verbindungspools"  # the catalogue is compiled and loaded
    log_in(page, live_server.url)  # the browser asks for English (conftest: locale en-US)
    expect(page.locator("html")).to_have_attribute("lang", "en")

    # The language menu: Deutsch, and the list is German from then on.
    page.locator(".panel-sidebar .panel-language-toggle").click()
    page.locator(".panel-sidebar").get_by_role("button", name="Deutsch").click()
    assert_german(page, phrases, de("Databases"))
    snapshot(page, "de-0-list")

    # Create a database cluster from the German form.
    page.get_by_role("link", name=de("Create cluster")).first.click()
    assert_german(page, phrases, de("Create database cluster"))
    page.locator("label[for='plan-db-s-1vcpu-1gb']").click()
    page.get_by_label(de("Cluster name")).fill("db-deutsch")
    page.get_by_role("button", name=de("Create database cluster")).click()
    expect(page.locator("h1 .status-badge")).to_have_attribute("data-status", "online", timeout=60_000)
    cluster = Cluster.objects.get(name="db-deutsch")
    try:
        assert_german(page, phrases, de("Connection details"), de("Overview"))
        expect(page.locator("body")).to_contain_text(GERMAN_DATE)  # created: 25.11.2026 18:14
        snapshot(page, "de-1-overview")

        # Users & Databases: add the tutorial's database.
        wait_for_htmx(page)
        page.get_by_role("link", name=de("Users & Databases")).click()
        page.get_by_label(de("Add a database")).fill("benchmark")
        page.get_by_role("button", name=de("Add database")).click()
        expect(page.locator("#users-tab").get_by_text("benchmark", exact=True)).to_be_visible()
        assert_german(page, phrases, de("Add database"))

        # The pool form: a pool too big for the budget is refused next to its field, in German.
        page.get_by_role("link", name=de("Connection Pools")).click()
        assert_german(page, phrases, de("Pool size"))
        page.get_by_label(de("Pool name")).fill("tutorial-pool")
        page.get_by_label(de("Database")).select_option("benchmark")
        page.get_by_label(de("Pool size")).fill("500")
        page.get_by_role("button", name=de("Create pool"), exact=True).click()
        refusal = de(
            "Only %(left)s of the cluster's %(total)s connections are left for pools; "
            "a pool of %(size)s does not fit."
        ) % {"left": 22, "total": 22, "size": 500}
        expect(page.locator(".invalid-feedback", has_text=refusal)).to_be_visible(timeout=10_000)
        assert_german(page, phrases)
        snapshot(page, "de-2-pool-error")
        page.get_by_label(de("Pool size")).fill("10")
        page.get_by_role("button", name=de("Create pool"), exact=True).click()
        expect(page.locator("tr[data-pool='tutorial-pool']")).to_be_visible(timeout=15_000)
        assert_german(page, phrases, de("Connection Pools"))

        # Benchmarks: initialise, run with the live chart, compare.
        tab = f"/clusters/{cluster.pk}/benchmarks/"
        page.goto(f"{live_server.url}{tab}")
        assert_german(page, phrases, de("Initialise"), de("Launch run"))
        init = page.locator("#init-form")
        init.get_by_label(de("Database")).select_option("benchmark")
        init.get_by_label(de("Scale factor")).fill("1")
        init.get_by_role("button", name=de("Initialise")).click()
        row = page.locator("tr[data-dataset='benchmark']")
        expect(row).to_have_attribute("data-status", "succeeded", timeout=60_000)
        wait_for_htmx(page)
        form = page.locator("#run-form")
        form.get_by_label(de("Database")).select_option("benchmark")
        form.get_by_label(de("Clients")).fill("2")
        form.get_by_label(de("Duration (s)")).fill("4")
        form.get_by_role("button", name=de("Launch run")).click()
        expect(page).to_have_url(re.compile(rf".*{tab}runs/[0-9a-f-]+/$"), timeout=15_000)
        page.wait_for_function("() => window.Chart && Chart.getChart(document.querySelector('#chart-tps'))")
        assert page.evaluate("Chart.getChart(document.querySelector('#chart-tps')).options.locale") == "de"
        expect(page.locator("#bench-run-live")).to_have_attribute("data-status", "succeeded", timeout=60_000)
        assert_german(page, phrases, de("Transactions processed"))
        snapshot(page, "de-3-run")

        run = BenchmarkRun.objects.get(cluster=cluster)
        other = make_run(cluster, samples=4, label="Vergleich", clients=4)
        page.goto(f"{live_server.url}{tab}")
        history = page.locator("#bench-history")
        history.locator(f"#pick-{run.pk}").check()
        history.locator(f"#pick-{other.pk}").check()
        history.get_by_role("button", name=de("Compare")).click()
        expect(page.locator("[data-bench-compare][data-drawn='true']")).to_be_visible(timeout=15_000)
        assert_german(page, phrases)
        tps = page.locator(f".bench-compare-table tr[data-run='{other.pk}'] td.bench-num").nth(1).inner_text()
        assert GERMAN_NUMBER.match(tps.strip()), tps  # 2.001,0
        snapshot(page, "de-4-compare")
    finally:
        time.sleep(0)  # the cluster goes, whatever failed above
        cluster.refresh_from_db()
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
