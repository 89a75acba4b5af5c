"""What the journeys through the Benchmarks tab share: watching a run's TPS chart grow while it
runs, and comparing two runs ticked in the tab's history."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page, expect

from benchmarks.models import BenchmarkRun, RunStatus

POINTS_JS = "Chart.getChart(document.querySelector('#chart-tps')).data.datasets[0].data.length"


def points_seen_while_running(page: Page, seconds: float) -> set[int]:
    """The TPS chart's numbers of points while the run page said "running", read until the charts
    say the run is done (or ``seconds`` pass)."""
    seen: set[int] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = page.locator("[data-bench-run-charts]").get_attribute("data-status")
        if status == RunStatus.RUNNING:
            seen.add(page.evaluate(POINTS_JS))
        if page.locator("[data-bench-run-charts][data-done='true']").count():
            break
        time.sleep(0.2)
    return seen


def compare_in_history(
    page: Page, base_url: str, tab: str, first: BenchmarkRun, second: BenchmarkRun
) -> None:
    """Open the Benchmarks tab (``tab``, its path), tick ``first`` then ``second`` in its history and
    press Compare; returns on the comparison's page."""
    page.goto(f"{base_url}{tab}")
    history = page.locator("#bench-history")
    history.locator(f"#pick-{first.pk}").check()
    history.locator(f"#pick-{second.pk}").check()
    history.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(re.compile(rf".*{tab}compare/\?run=.*"))
