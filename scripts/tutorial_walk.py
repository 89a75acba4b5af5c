#!/usr/bin/env python3
"""The tutorial story, walked in a real browser against a running panel (``make run``), as a user
walks it with the web pages only, printing what each step showed and how long it took:

  create a 4 GB cluster → add the database ``benchmark`` → initialise it (scale 150) → 50 clients
  direct → 150 clients direct, refused → a transaction pool ``test-pool`` of 97 → 150 clients
  through it → compare the three runs on one page (→ delete the cluster, unless --keep).

Headless Debian Chromium via Playwright (never a downloaded browser). Exits 1 at the first step
that does not show what the story expects, naming it.

    .venv/bin/python scripts/tutorial_walk.py --user admin --password '…' [--url http://127.0.0.1:8000]
        [--scale 150] [--duration 15] [--keep] [--screenshots DIR]
"""

from __future__ import annotations

import argparse
import re
import secrets
import sys
import time
from pathlib import Path

from playwright.sync_api import Page, TimeoutError, expect, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.browser.chromium

from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

HTMX_SETTLED = "() => !document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')"


class Walk:
    def __init__(self, page: Page, url: str, screenshots: Path | None) -> None:
        self.page = page
        self.url = url.rstrip("/")
        self.screenshots = screenshots
        self.started = time.monotonic()

    def say(self, step: str, what: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {step}: {what}", flush=True)
        if self.screenshots:
            name = re.sub(r"[^a-z0-9]+", "-", step.lower()).strip("-")
            try:
                self.page.screenshot(path=str(self.screenshots / f"{name}.png"), full_page=True)
            except TimeoutError:  # a picture for a person to look at, not a step of the story
                print(f"           (no screenshot of {name}: the browser did not take one in time)")

    def settle(self) -> None:
        self.page.wait_for_function(HTMX_SETTLED)

    def log_in(self, user: str, password: str) -> None:
        self.page.goto(f"{self.url}/clusters/")
        self.page.get_by_label("Username").fill(user)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Log in").click()
        expect(self.page).to_have_url(f"{self.url}/clusters/")

    def create_cluster(self, name: str) -> str:
        page = self.page
        page.goto(f"{self.url}/clusters/")
        page.get_by_role("link", name="Create cluster").first.click()
        page.locator("label[for='plan-db-s-2vcpu-4gb']").click()
        page.get_by_label("Cluster name").fill(name)
        begun = time.monotonic()
        page.get_by_role("button", name="Create database cluster").click()
        expect(page.locator("h1 .status-badge")).to_have_attribute("data-status", "online", timeout=120_000)
        self.say("cluster", f"“{name}” (4 GB) online {time.monotonic() - begun:.1f} s after submit")
        return page.url.split("/clusters/")[1].split("/")[0]

    def add_database(self, cluster: str, name: str) -> None:
        page = self.page
        page.goto(f"{self.url}/clusters/{cluster}/users/")
        page.get_by_label("Add a database").fill(name)
        page.get_by_role("button", name="Add database").click()
        expect(page.locator("#users-tab").get_by_text(name, exact=True)).to_be_visible()
        self.say("database", f"“{name}” added")

    def initialise(self, cluster: str, database: str, scale: int) -> None:
        page = self.page
        page.goto(f"{self.url}/clusters/{cluster}/benchmarks/")
        init = page.locator("#init-form")
        init.get_by_label("Database").select_option(database)
        init.get_by_label("Scale factor").fill(str(scale))
        begun = time.monotonic()
        init.get_by_role("button", name="Initialise").click()
        row = page.locator(f"tr[data-dataset='{database}']")
        expect(row).to_have_attribute("data-status", "succeeded", timeout=600_000)
        self.say("initialise", f"“{database}” at scale {scale} ready in {time.monotonic() - begun:.1f} s")

    def run(self, cluster: str, target: str, clients: int, duration: int, database: str) -> dict[str, str]:
        """Launch from the form and watch the run page until it is over; its figures."""
        page = self.page
        page.goto(f"{self.url}/clusters/{cluster}/benchmarks/")
        self.settle()
        form = page.locator("#run-form")
        target_select = form.get_by_label("Target")
        wanted = "directly" if target == "Direct" else target  # "The cluster directly"
        value = target_select.evaluate(
            "(select, wanted) => [...select.options].find(o => o.text.includes(wanted))?.value", wanted
        )
        if value is None:
            raise AssertionError(f"no target “{target}” in the run form")
        target_select.select_option(value)
        if target == "Direct":
            form.get_by_label("Database", exact=True).select_option(database)
        form.get_by_label("Clients").fill(str(clients))
        form.get_by_label("Duration (s)").fill(str(duration))
        self.settle()
        form.get_by_role("button", name="Launch run").click()
        expect(page).to_have_url(re.compile(r".*/benchmarks/runs/[0-9a-f-]+/$"), timeout=20_000)
        live = page.locator("#bench-run-live")
        expect(live).to_have_attribute(
            "data-status", re.compile("succeeded|failed|errored|cancelled"), timeout=(duration + 120) * 1000
        )
        figures = {
            "status": live.get_attribute("data-status") or "",
            "tps": live.locator("[data-figure='tps']").inner_text(),
            "failed": live.locator("[data-figure='failed']").inner_text(),
            "url": page.url,
            "text": live.inner_text(),
        }
        return figures

    def create_pool(self, cluster: str, name: str, database: str, size: int) -> None:
        page = self.page
        page.goto(f"{self.url}/clusters/{cluster}/pools/")
        self.settle()
        if not page.get_by_label("Pool name").is_visible():
            page.get_by_role("button", name=re.compile("Create a connection pool")).first.click()
        page.get_by_label("Pool name").fill(name)
        page.get_by_label("Database").select_option(database)
        page.locator("#id_mode_transaction").check()
        page.get_by_label("Pool size").fill(str(size))
        page.get_by_role("button", name="Create pool").click()
        expect(page.locator(f"tr[data-pool='{name}']")).to_be_visible(timeout=20_000)
        self.say(
            "pool",
            f"“{name}” (transaction, {size}) created: {page.locator('.pool-budget-figure').inner_text()}",
        )

    def compare(self, cluster: str, runs: list[str]) -> None:
        page = self.page
        page.goto(f"{self.url}/clusters/{cluster}/benchmarks/")
        self.settle()
        for run_url in runs:
            run_id = run_url.rstrip("/").rsplit("/", 1)[1]
            page.locator(f"#pick-{run_id}").check()
        page.get_by_role("button", name="Compare").click()
        expect(page.locator("[data-bench-compare][data-drawn='true']")).to_be_visible(timeout=20_000)
        rows = page.locator(".bench-compare-table tbody tr")
        self.say(
            "compare",
            f"{rows.count()} runs on one page: "
            + " | ".join(" ".join(rows.nth(i).inner_text().split())[:90] for i in range(rows.count())),
        )

    def delete_cluster(self, cluster: str, name: str) -> None:
        page = self.page
        page.goto(f"{self.url}/clusters/{cluster}/")
        self.settle()
        page.get_by_role("button", name="Actions").click()
        page.get_by_role("link", name="Delete cluster").click()
        dialog = page.locator("#delete-cluster-modal")
        dialog.get_by_label("to confirm").fill(name)
        dialog.get_by_role("button", name="Delete cluster").click()
        expect(page.get_by_role("link", name=name)).to_have_count(0, timeout=120_000)
        self.say("delete", f"“{name}” deleted")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--scale", type=int, default=150)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--keep", action="store_true", help="keep the cluster at the end")
    parser.add_argument("--screenshots", type=Path)
    args = parser.parse_args()
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    name = f"tutorial-{secrets.token_hex(3)}"
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900}, locale="en-US")
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        walk = Walk(page, args.url, args.screenshots)
        try:
            walk.log_in(args.user, args.password)
            cluster = walk.create_cluster(name)
            walk.add_database(cluster, "benchmark")
            walk.initialise(cluster, "benchmark", args.scale)
            direct50 = walk.run(cluster, "Direct", 50, args.duration, "benchmark")
            walk.say("50 direct", f"{direct50['status']}, {direct50['tps']} TPS, {direct50['failed']} failed")
            if direct50["status"] != "succeeded":
                raise AssertionError("50 clients direct did not succeed:\n" + direct50["text"])
            direct150 = walk.run(cluster, "Direct", 150, args.duration, "benchmark")
            reason = next((line for line in direct150["text"].splitlines() if "clients" in line.lower()), "")
            walk.say("150 direct", f"{direct150['status']}: {reason.strip()}")
            if direct150["status"] != "failed":
                raise AssertionError("150 clients direct were not refused:\n" + direct150["text"])
            walk.create_pool(cluster, "test-pool", "benchmark", 97)
            pooled = walk.run(cluster, "test-pool", 150, args.duration, "benchmark")
            walk.say(
                "150 via test-pool", f"{pooled['status']}, {pooled['tps']} TPS, {pooled['failed']} failed"
            )
            if pooled["status"] != "succeeded":
                raise AssertionError("150 clients through test-pool did not succeed:\n" + pooled["text"])
            walk.compare(cluster, [direct50["url"], direct150["url"], pooled["url"]])
            if not args.keep:
                walk.delete_cluster(cluster, name)
        except (AssertionError, TimeoutError) as exc:
            print(f"FAILED at {page.url}: {exc}", file=sys.stderr)
            if args.screenshots:
                page.screenshot(path=str(args.screenshots / "failed.png"), full_page=True)
            return 1
        finally:
            browser.close()
    print(f"console errors: {len(errors)}" + (f" ({errors[:3]})" if errors else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
