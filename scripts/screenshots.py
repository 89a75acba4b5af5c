"""Screenshots of the panel for a person to look at (a release note, an issue's closing note).

    .venv/bin/python scripts/screenshots.py OUTPUT_DIR

Starts what the browser tests start (a test database, the live server, a real cluster), logs in
as a user whose cluster has a database, a pool and a finished benchmark run, and saves a full-page
PNG of every tab of the cluster page, a pool, the run, and the main pages (clusters, nodes,
account) in English and German at 1,280 × 800 into OUTPUT_DIR (``en-01-overview.png`` …). Uses
Debian's Chromium, as the browser tests do; never downloads a browser. Not part of ``make test``
(pytest collects only ``test_*.py``): run it after ``make test`` has installed what it needs.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

OUTPUT = "PANEL_SCREENSHOT_OUTPUT"
ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1280, 800
USER, PASSWORD = "screens", "screens-password-1"
LANGUAGES = (("en", "en-US"), ("de", "de-DE"))
# PANEL_SCREENSHOT_JPEG=70: JPEG at that quality instead of PNG (a tenth of the size).
JPEG_QUALITY = int(os.environ.get("PANEL_SCREENSHOT_JPEG", "0") or 0)
HTMX_BUSY = ".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    output = Path(sys.argv[1]).resolve()
    output.mkdir(parents=True, exist_ok=True)
    os.environ[OUTPUT] = str(output)
    os.chdir(ROOT)
    import pytest

    # This file as a pytest module: the fixtures (test database, live server, real clusters) are
    # the test suite's, so nothing here starts a server of its own.
    args = [__file__, "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=", "-s"]
    return int(pytest.main(args))


ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/?")


def _name(url: str) -> str:
    """``cluster-overview``, ``cluster-pools``, ``clusters``, ``account-tokens``: no ids."""
    path = url.split("://", 1)[1].split("/", 1)[1]
    head, found, tail = path.partition("clusters/")
    if found and ID.match(tail):
        path = "cluster-" + (ID.sub("", tail) or "overview")
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"


def test_screenshots(live_server, transactional_db) -> None:  # noqa: ANN001  (pytest's fixtures)
    from django.contrib.auth.models import User
    from django.urls import reverse
    from django.utils import timezone
    from playwright.sync_api import sync_playwright

    from benchmarks.models import DataSet, JobStatus
    from benchmarks.tests.test_views_pages import SUMMARY, make_run
    from panel.clusters import services
    from panel.clusters.services import roles
    from panel.pools import services as pools
    from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS
    from tests.fixtures.clusters import make_local_cluster

    output = Path(os.environ[OUTPUT])
    user = User.objects.create_user(USER, "screens@example.com", PASSWORD, is_staff=True)  # Nodes too
    cluster = make_local_cluster(user, name="db-shop")
    try:
        roles.add_database(cluster, "inventory")
        pool = pools.create_pool(cluster, "app-pool", "inventory", "", "transaction", 10)
        DataSet.objects.create(
            cluster=cluster,
            database="defaultdb",
            scale=10,
            status=JobStatus.SUCCEEDED,
            progress=100,
            size_bytes=160 * 1024 * 1024,
            duration_s=12.5,
            command_display="pgbench -i -s 10",
            finished_at=timezone.now(),
        )
        # A run as the worker leaves it, its figures agreeing with each other and with the plan.
        summary = {**SUMMARY, "clients": 8, "duration_s": 30, "scaling_factor": 10}
        summary["transactions_processed"] = round(summary["tps"] * 30)
        run = make_run(
            cluster,
            samples=30,
            label="First run",
            clients=8,
            duration_s=30,
            options={"clients": 8, "threads": 2, "duration_s": 30, "progress_interval_s": 1},
            summary=summary,
            command_display="PGPASSWORD=******** PGSSLMODE=require pgbench -h 127.0.0.1 -c 8 -j 2 -T 30 -- defaultdb",
        )
        base = live_server.url
        saved = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for language, locale in LANGUAGES:
                context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale=locale)
                page = context.new_page()
                page.goto(f"{base}/login/")
                page.locator("input[name=username]").fill(USER)
                page.locator("input[name=password]").fill(PASSWORD)
                page.locator("button.btn-primary[type=submit]").click()
                page.wait_for_url(f"{base}/clusters/")
                page.goto(f"{base}/clusters/{cluster.pk}/")
                tabs = page.eval_on_selector_all(
                    ".cluster-tabs a[href]:not([href='#'])", "links => links.map(a => a.href)"
                )
                paths = [
                    reverse("clusters:list"),
                    reverse("clusters:nodes"),
                    reverse("api:tokens"),
                    reverse("pools:detail", args=[cluster.pk, pool.pk]),
                    reverse("benchmarks:run-detail", args=[cluster.pk, run.pk]),
                ]
                urls = list(dict.fromkeys(tabs)) + [f"{base}{path}" for path in paths]
                for index, url in enumerate(urls, 1):
                    page.goto(url)
                    page.wait_for_load_state("networkidle")
                    page.wait_for_function(f"() => !document.querySelector({HTMX_BUSY!r})")
                    stem = f"{language}-{index:02d}-{_name(url)}"
                    if JPEG_QUALITY:  # smaller files for a repository or a note
                        target = output / f"{stem}.jpg"
                        page.screenshot(path=str(target), full_page=True, type="jpeg", quality=JPEG_QUALITY)
                    else:
                        target = output / f"{stem}.png"
                        page.screenshot(path=str(target), full_page=True)
                    saved.append(target)
                context.close()
            browser.close()
        print(f"\n{len(saved)} screenshots in {output}")
    finally:
        cluster.refresh_from_db()
        services.delete_cluster(cluster, confirm_name=cluster.name)


if __name__ == "__main__":
    sys.exit(main())
