"""Watching a run must not cost the run (issue 11, item 12): the run page takes every new sample
into its charts' data each second, but draws the canvases at most every few seconds while the run
goes, and at once when it is over."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page

from benchmarks.models import RunSample, RunStatus
from benchmarks.tests.test_views_pages import SUMMARY, make_run
from panel.clusters.tests.conftest import make_cluster_row
from tests.browser.conftest import log_in

pytestmark = pytest.mark.integration

TPS = "Chart.getChart(document.querySelector('#chart-tps'))"
# Counts the draws of the TPS chart from now on (its draw() wrapped on that one instance).
COUNT_DRAWS_JS = f"""() => {{
  const chart = {TPS};
  const draw = chart.draw.bind(chart);
  window.tpsDraws = 0;
  chart.draw = function () {{ window.tpsDraws += 1; return draw(); }};
}}"""


def add_sample(run, seq: int) -> None:
    RunSample.objects.create(
        run=run,
        seq=seq,
        elapsed_s=float(seq),
        tps=1000.0 + seq,
        latency_avg_ms=10.0,
        latency_stddev_ms=2.0,
        failed=0,
        p50_ms=9.0,
        p95_ms=15.0,
        p99_ms=20.0,
        percentile_count=100,
        received_at=timezone.now(),
    )


def test_a_watched_run_takes_every_sample_but_redraws_its_charts_seldom(
    live_server, journey_user: User, page: Page
) -> None:
    cluster = make_cluster_row(journey_user, name="db-redraws")
    run = make_run(
        cluster, samples=2, status=RunStatus.RUNNING, finished_at=None, exit_code=None, summary=None
    )
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/runs/{run.pk}/")
    page.wait_for_function(f"() => window.Chart && {TPS} && {TPS}.data.datasets[0].data.length === 2")
    page.evaluate(COUNT_DRAWS_JS)

    # Eight seconds of a live run, a sample a second, as pgbench's progress lines come.
    for seq in range(3, 11):
        add_sample(run, seq)
        time.sleep(1)
    page.wait_for_function(f"() => {TPS}.data.datasets[0].data.length === 10")
    draws = page.evaluate("window.tpsDraws")
    # Drawn every second, this would be 8 or so; at most every 5 s it is 1 or 2.
    assert 1 <= draws <= 3, f"the TPS chart was drawn {draws} times in 8 s"

    # The run ends: the last samples are drawn at once, not up to 5 s later.
    add_sample(run, 11)
    run.__class__.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED, finished_at=timezone.now(), exit_code=0, summary=SUMMARY
    )
    page.wait_for_selector("[data-bench-run-charts][data-done='true']", state="attached", timeout=10_000)
    assert page.evaluate(f"{TPS}.data.datasets[0].data.length") == 11
    drawn_points = page.evaluate(f"{TPS}.getDatasetMeta(0).data.length")
    assert drawn_points == 11  # what is on the canvas, not only in the data
