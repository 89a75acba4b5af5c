"""The run, compare and sweep pages and their JSON endpoints, against rows written directly in the
database (finished runs with samples); no PostgreSQL, pgbench or worker behind them."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import BenchmarkRun, RunError, RunSample, RunStatus, Sweep
from panel.clusters.models import Cluster

HTMX = {"HX-Request": "true"}
SUMMARY = {
    "tps": 2301.5,
    "latency_avg_ms": 21.7,
    "latency_stddev_ms": 7.5,
    "transactions_processed": 138090,
    "failed_transactions": 0,
    "failed_percent": 0.0,
    "initial_connection_time_ms": 95.2,
    "clients": 50,
    "threads": 2,
    "duration_s": 60,
    "scaling_factor": 150,
    "query_mode": "simple",
    "pgbench_version": "15.18",
    "statement_latencies": [],
}
# What every sample of ``make_run`` says besides its time and TPS.
FIGURES = {
    "latency_avg_ms": 20.0,
    "latency_stddev_ms": 5.0,
    "failed": 0,
    "p50_ms": 18.0,
    "p95_ms": 30.0,
    "p99_ms": 45.0,
    "percentile_count": 2000,
}
RESERVED = (
    'connection to server at "127.0.0.1", port 26900 failed: FATAL:  remaining connection slots '
    "are reserved for non-replication superuser connections"
)


def make_run(cluster: Cluster, *, samples: int = 0, **fields: Any) -> BenchmarkRun:
    """A run row as the worker would leave it, with ``samples`` one-second samples."""
    now = timezone.now()
    values: dict[str, Any] = {
        "cluster": cluster,
        "database": "defaultdb",
        "user": "doadmin",
        "clients": 50,
        "threads": 2,
        "duration_s": 60,
        "script": "tpcb-like",
        "options": {"clients": 50, "threads": 2, "duration_s": 60, "progress_interval_s": 1},
        "status": RunStatus.SUCCEEDED,
        "command_display": "PGPASSWORD=******** PGSSLMODE=require pgbench -h 127.0.0.1 -c 50 -j 2 -T 60 -- defaultdb",
        "exit_code": 0,
        "summary": SUMMARY,
        "percentile_sampling_rate": 1.0,
        "started_at": now,
        "finished_at": now,
    }
    values.update(fields)
    run = BenchmarkRun.objects.create(**values)
    RunSample.objects.bulk_create(
        RunSample(run=run, seq=seq, elapsed_s=float(seq), tps=2000.0 + seq, received_at=now, **FIGURES)
        for seq in range(1, samples + 1)
    )
    return run


def run_url(name: str, run: BenchmarkRun, **extra: Any) -> str:
    return reverse(name, kwargs={"cluster_id": run.cluster_id, "run_id": run.pk, **extra})


@pytest.fixture
def story(cluster_row: Cluster) -> list[BenchmarkRun]:
    """The tutorial's three runs: 50 direct, 150 direct (could not start), 150 through a pool."""
    baseline = make_run(cluster_row, samples=5, label="50 direct")
    refused = make_run(
        cluster_row,
        label="150 direct",
        clients=150,
        status=RunStatus.FAILED,
        exit_code=1,
        summary=None,
        error_message="pgbench could not start (exit code 1)",
        first_error=RESERVED,
        error_count=1,
    )
    RunError.objects.create(run=refused, kind="connection", message=RESERVED, client_id=97)
    pooled = make_run(
        cluster_row, samples=4, label="150 via test-pool", clients=150, pool_name="test-pool",
        summary={**SUMMARY, "tps": 1702.0, "clients": 150},
    )  # fmt: skip
    return [baseline, refused, pooled]


# --- the run page --------------------------------------------------------------------------------


def test_the_run_page_shows_summary_command_exports_and_a_link_back(owner_client, story):
    run = story[0]
    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    assert "Succeeded" in page and str(run.status_meaning) in page
    assert "Transactions processed" in page and "138,090" in page and "Scaling factor" in page
    assert "pgbench -h 127.0.0.1 -c 50 -j 2 -T 60" in page and 'data-copy-target="#bench-command"' in page
    assert run_url("benchmarks:run-export", run, fmt="csv") in page
    assert run_url("benchmarks:run-export", run, fmt="json") in page
    assert reverse("benchmarks:tab", args=[run.cluster_id]) in page
    assert 'data-url="{}"'.format(run_url("benchmarks:run-samples", run)) in page
    assert "vendor/chartjs/chart.umd.min.js" in page and "js/bench-charts.js" in page
    assert 'hx-trigger="every 1s' not in page, "a finished run does not poll"
    assert "Cancel run" not in page


def test_a_run_that_could_not_start_says_why(owner_client, story):
    page = owner_client.get(run_url("benchmarks:run-detail", story[1])).content.decode()
    assert "Failed" in page and "could not start" in page
    assert "remaining connection slots are reserved" in page
    assert "pgbench printed no summary" in page


def test_a_running_run_polls_shows_progress_figures_and_cancel(owner_client, cluster_row):
    run = make_run(cluster_row, samples=3, status=RunStatus.RUNNING, summary=None, finished_at=None)
    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    # Re-fetched when its state changes; bench-charts.js polls (not while the tab is hidden).
    assert 'hx-trigger="bench-run-changed"' in page
    assert "3 s of 60 s" in page and '<span class="bench-run-progress">5</span> %' in page
    assert "2,003.0" in page and "30.00 ms" in page  # English separators (German: 2.003,0)
    assert "Cancel run" in page
    partial = owner_client.get(run_url("benchmarks:run-detail", run), headers=HTMX).content.decode()
    assert partial.lstrip().startswith('<div id="bench-run-live"')
    assert "<canvas" not in partial, "the charts stay in place while the figures refresh"


def test_a_queued_run_shows_its_place_in_line(owner_client, cluster_row):
    make_run(cluster_row, status=RunStatus.RUNNING, summary=None, finished_at=None)
    queued = make_run(cluster_row, status=RunStatus.QUEUED, summary=None, started_at=None, finished_at=None)
    page = owner_client.get(run_url("benchmarks:run-detail", queued)).content.decode()
    assert "1 run ahead of this one on this cluster." in page


def test_cancel_stops_a_queued_run(owner_client, cluster_row):
    run = make_run(cluster_row, status=RunStatus.QUEUED, summary=None, started_at=None, finished_at=None)
    response = owner_client.post(run_url("benchmarks:run-cancel", run))
    assert response.status_code == 302 and response["Location"] == run_url("benchmarks:run-detail", run)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


# --- the data endpoint and exports -------------------------------------------------------------------


def test_the_data_endpoint_returns_the_samples_after_a_seq(owner_client, cluster_row):
    run = make_run(cluster_row, samples=10, status=RunStatus.RUNNING, summary=None, finished_at=None)
    url = run_url("benchmarks:run-samples", run)
    body = owner_client.get(url).json()
    assert [s["seq"] for s in body["samples"]] == list(range(1, 11))
    assert body["status"] == "running" and body["terminal"] is False and body["percentiles"] is True
    assert set(body["samples"][0]) >= {"elapsed_s", "tps", "latency_avg_ms", "p50_ms", "p95_ms", "p99_ms"}
    body = owner_client.get(url, {"after": 7}).json()
    assert [s["seq"] for s in body["samples"]] == [8, 9, 10]
    assert owner_client.get(url, {"after": 10}).json()["samples"] == []
    assert len(owner_client.get(url, {"after": "junk"}).json()["samples"]) == 10


def test_the_data_endpoint_says_when_the_run_is_over(owner_client, story):
    body = owner_client.get(run_url("benchmarks:run-samples", story[0])).json()
    assert body["terminal"] is True and body["status"] == "succeeded"


def test_export_csv_is_an_attachment_with_one_row_per_sample(owner_client, story):
    response = owner_client.get(run_url("benchmarks:run-export", story[0], fmt="csv"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment;")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["seq"] for row in rows] == ["1", "2", "3", "4", "5"]
    assert rows[0]["tps"] == "2001.0"


def test_export_json_holds_the_record_samples_and_errors(owner_client, story):
    run = story[0]
    RunError.objects.create(run=run, kind="client_aborted", message="client 3 aborted", client_id=3)
    response = owner_client.get(run_url("benchmarks:run-export", run, fmt="json"))
    assert response["Content-Disposition"].startswith("attachment;")
    record = json.loads(response.content)
    assert record["status"] == "succeeded" and len(record["samples"]) == 5
    assert record["errors"][0]["message"] == "client 3 aborted"
    assert owner_client.get(run_url("benchmarks:run-export", run, fmt="xml")).status_code == 404


def test_a_run_without_samples_offers_no_export_and_its_urls_say_why(owner_client, story):
    """Issue 11 item 2: the old page linked CSV/JSON files of nothing, and the URLs served them."""
    refused = story[1]
    page = owner_client.get(run_url("benchmarks:run-detail", refused)).content.decode()
    assert "bench-export" not in page and "export.csv" not in page
    for fmt in ("csv", "json"):
        response = owner_client.get(run_url("benchmarks:run-export", refused, fmt=fmt))
        assert response.status_code == 404 and "Content-Disposition" not in response
        assert "no samples to export" in response.content.decode()


# --- compare ---------------------------------------------------------------------------------------


def test_compare_shows_the_story_at_a_glance(owner_client, story):
    url = reverse("benchmarks:compare", args=[story[0].cluster_id])
    page = owner_client.get(url, {"run": [str(run.pk) for run in story]}).content.decode()
    for run in story:
        assert f'data-run="{run.pk}"' in page
    assert "2,301.5" in page and "1,702.0" in page
    assert "bench-row-failed" in page and "remaining connection slots are reserved" in page
    assert 'data-bench-compare data-url="' in page and "js/bench-compare.js" in page


def test_the_compare_page_reads_no_samples_and_one_query_for_all_runs(owner_client, story):
    url = reverse("benchmarks:compare", args=[story[0].cluster_id])
    with CaptureQueriesContext(connection) as queries:
        response = owner_client.get(url, {"run": [str(run.pk) for run in story]})
    assert response.status_code == 200
    sql = [query["sql"] for query in queries.captured_queries]
    assert not [q for q in sql if RunSample._meta.db_table in q], "the charts fetch samples themselves"
    run_queries = [q for q in sql if f'FROM "{BenchmarkRun._meta.db_table}"' in q]
    assert len(run_queries) == 1, run_queries


def test_compare_data_draws_only_the_runs_with_data(owner_client, story):
    """Issue 11 item 3: the failed run used to get a legend entry of nothing and a zero bar."""
    url = reverse("benchmarks:compare-data", args=[story[0].cluster_id])
    body = owner_client.get(url, {"run": [str(story[0].pk), str(story[1].pk)]}).json()
    assert set(body["series"]["tps"]) == {str(story[0].pk)}
    assert body["lines"] == [str(story[0].pk)]
    assert body["series"]["tps"][str(story[0].pk)][:2] == [2001.0, 2002.0]
    assert [bar["id"] for bar in body["tps_bars"]] == [str(story[0].pk)]


def test_compare_lists_runs_oldest_first_marks_the_failed_one_and_never_calls_it_best(owner_client, story):
    """Issue 11 item 3: the history sends the newest first; the table read that order, and the
    failed run showed a bold TPS of 0."""
    url = reverse("benchmarks:compare", args=[story[0].cluster_id])
    newest_first = [str(run.pk) for run in reversed(story)]
    page = owner_client.get(url, {"run": newest_first}).content.decode()
    positions = [page.index(f'data-run="{run.pk}"') for run in story]
    assert positions == sorted(positions), "runs must read oldest first"
    refused_row = page[positions[1] : positions[2]]
    assert "bench-failed-badge" in refused_row and "More clients than the plan allows" in refused_row
    assert 'data-best="false"' in refused_row and ">0<" not in refused_row
    assert page.count('data-best="true"') == 1
    assert 'data-best="true"' in page[positions[0] : positions[1]]  # 2301.5 beats 1702.0


def test_compare_needs_two_runs(owner_client, story):
    url = reverse("benchmarks:compare", args=[story[0].cluster_id])
    page = owner_client.get(url, {"run": [str(story[0].pk), "not-a-uuid"]}).content.decode()
    assert "Pick at least two runs to compare." in page


# --- the tab's history and sweeps -------------------------------------------------------------------


def test_the_history_lists_runs_with_checkboxes_and_a_compare_button(owner_client, story):
    page = owner_client.get(reverse("benchmarks:tab", args=[story[0].cluster_id])).content.decode()
    for run in story:
        assert f'name="run" value="{run.pk}"' in page
        assert run_url("benchmarks:run-detail", run) in page
    assert "Compare" in page and "2,301.5" in page and "21.70 ms" in page
    assert "pool <code>test-pool</code>" in page


def test_the_history_polls_only_while_a_run_is_active(owner_client, cluster_row):
    url = reverse("benchmarks:history", args=[cluster_row.pk])
    make_run(cluster_row)
    assert "every 2s" not in owner_client.get(url).content.decode()
    make_run(cluster_row, status=RunStatus.QUEUED, summary=None)
    assert "every 2s" in owner_client.get(url).content.decode()


def test_the_sweep_page_lists_its_runs_and_serves_its_results(owner_client, cluster_row):
    sweep = Sweep.objects.create(
        cluster=cluster_row, name="scan", clients_list=[10, 50], targets=[{"kind": "direct"}]
    )
    make_run(cluster_row, sweep=sweep, sweep_index=0, clients=10)
    make_run(cluster_row, sweep=sweep, sweep_index=1, clients=50, status=RunStatus.QUEUED, summary=None)
    kwargs = {"cluster_id": cluster_row.pk, "sweep_id": sweep.pk}
    page = owner_client.get(reverse("benchmarks:sweep-detail", kwargs=kwargs)).content.decode()
    assert "1 of 2 finished" in page and "every 2s" in page and "js/bench-sweep.js" in page
    body = owner_client.get(reverse("benchmarks:sweep-data", kwargs=kwargs)).json()
    assert body["done"] is False
    assert [(p["clients"], p["tps"]) for p in body["targets"]["direct"]] == [(10, 2301.5), (50, None)]


def test_the_data_endpoint_pages_a_long_run(owner_client, cluster_row, monkeypatch):
    monkeypatch.setattr("benchmarks.views.runs.SAMPLES_PAGE", 4)
    run = make_run(cluster_row, samples=6)
    url = run_url("benchmarks:run-samples", run)
    body = owner_client.get(url).json()
    assert [s["seq"] for s in body["samples"]] == [1, 2, 3, 4] and body["more"] is True
    body = owner_client.get(url, {"after": 4}).json()
    assert [s["seq"] for s in body["samples"]] == [5, 6] and body["more"] is False
