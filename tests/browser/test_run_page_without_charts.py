"""The run page follows its run even when Chart.js does not load (a blocked or failed script):
the status and figures come from the same poll as the samples, which does not wait for charts."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from benchmarks.models import RunStatus
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.tests.conftest import make_cluster_row
from tests.browser.conftest import log_in

pytestmark = pytest.mark.integration


def test_run_page_follows_the_run_without_chartjs(live_server, journey_user: User, page: Page) -> None:
    cluster = make_cluster_row(journey_user, name="db-nocharts")
    run = make_run(
        cluster, status=RunStatus.QUEUED, started_at=None, finished_at=None, exit_code=None, summary=None
    )
    page.route("**/chart.umd.min*.js", lambda route: route.abort())
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/runs/{run.pk}/")
    live = page.locator("#bench-run-live")
    expect(live).to_have_attribute("data-status", "queued")
    assert page.evaluate("typeof window.Chart") == "undefined"

    run.mark_running(worker_hostname="test", worker_pid=1)
    expect(live).to_have_attribute("data-status", "running", timeout=10_000)
