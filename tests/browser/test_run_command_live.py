"""The run page's Command card follows the run: the planned command while it is queued, the exact
one pgbench ran as soon as it starts, without a reload (found walking the tutorial: the finished
run still said "The exact one is shown once pgbench starts")."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.tests.conftest import make_cluster_row
from tests.browser.conftest import log_in

pytestmark = pytest.mark.integration


def test_the_command_card_shows_the_exact_command_once_pgbench_starts(
    live_server, journey_user: User, page: Page
) -> None:
    cluster = make_cluster_row(journey_user, name="db-command")
    run = make_run(
        cluster, status=RunStatus.QUEUED, started_at=None, finished_at=None, exit_code=None, summary=None
    )
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/runs/{run.pk}/")
    card = page.locator("#bench-command-card")
    expect(card).to_contain_text("The command planned for this run")
    expect(page.locator("#bench-command")).to_have_attribute("data-exact", "false")

    run.mark_running(worker_hostname="test", worker_pid=1)
    BenchmarkRun.objects.filter(pk=run.pk).update(
        argv=["pgbench", "-h", "127.0.0.1", "-p", "25060", "-c", "50", "-T", "60", "--", "defaultdb"],
        argv_env={"PGPASSWORD": None, "PGSSLMODE": "require"},
    )
    expect(page.locator("#bench-command")).to_have_attribute("data-exact", "true", timeout=10_000)
    expect(card).to_contain_text("The exact command pgbench ran")
    expect(page.locator("#bench-command")).to_contain_text('PGPASSWORD="$PGPASSWORD"')
    assert page.locator("#bench-command-card").count() == 1  # swapped in place, not added
