"""What the benchmark pages show, read from the database: no request, no form, no HTML.

The views add the forms and pick the template; the queries and the figures a page is made of are
here, so the ``bench`` command and the API can read the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop as N_

from benchmarks.models import BenchmarkRun, DataSet, JobStatus, RunStatus, Sweep
from benchmarks.services.failure import explain_failure, kind_label
from benchmarks.services.pool_slowdown import slowdown_note
from benchmarks.services.read import live_state, shown_command
from benchmarks.services.sweep_report import sweep_report
from panel.clusters.face import clusters_for, number
from panel.clusters.lib.refusals import without_paths
from panel.clusters.models import Cluster

HISTORY_LIMIT = 50
RECENT_SWEEPS = 10

# Summary fields in reading order; any other field of run.summary follows under its own name.
SUMMARY_LABELS = {
    "tps": N_("TPS"),
    "latency_avg_ms": N_("Latency average (ms)"),
    "latency_stddev_ms": N_("Latency stddev (ms)"),
    "transactions_processed": N_("Transactions processed"),
    "transactions_expected": N_("Transactions expected"),
    "failed_transactions": N_("Failed transactions"),
    "failed_percent": N_("Failed (%)"),
    "initial_connection_time_ms": N_("Initial connection time (ms)"),
    "average_connection_time_ms": N_("Average connection time (ms)"),
    "clients": N_("Clients"),
    "threads": N_("Threads"),
    "duration_s": N_("Duration (s)"),
    "transactions_per_client": N_("Transactions per client"),
    "transaction_type": N_("Transaction type"),
    "query_mode": N_("Query mode"),
    "scaling_factor": N_("Scaling factor"),
    "max_tries": N_("Maximum tries"),
    "serialization_failures": N_("Serialization failures"),
    "deadlock_failures": N_("Deadlock failures"),
    "retried_transactions": N_("Retried transactions"),
    "retried_percent": N_("Retried (%)"),
    "total_retries": N_("Total retries"),
    "skipped_transactions": N_("Skipped transactions"),
    "skipped_percent": N_("Skipped (%)"),
    "latency_limit_ms": N_("Latency limit (ms)"),
    "late_transactions": N_("Late transactions"),
    "late_percent": N_("Late (%)"),
    "schedule_lag_avg_ms": N_("Schedule lag average (ms)"),
    "schedule_lag_max_ms": N_("Schedule lag max (ms)"),
    "latency_includes_failures": N_("Latency includes failures"),
    "tps_includes_connections": N_("TPS includes reconnections"),
    "aborted": N_("Run aborted"),
    "partition_method": N_("Partition method"),
    "partitions": N_("Partitions"),
    "pgbench_version": N_("pgbench version"),
    "server_version": N_("Server version"),
    # sysbench's report
    "qps": N_("Queries per second"),
    "queries": N_("Queries"),
    "reads": N_("Reads"),
    "writes": N_("Writes"),
    "others": N_("Other queries (BEGIN, COMMIT)"),
    "ignored_errors": N_("Errors ignored and retried"),
    "reconnects": N_("Reconnects"),
    "total_time_s": N_("Total time (s)"),
    "latency_min_ms": N_("Latency min (ms)"),
    "latency_max_ms": N_("Latency max (ms)"),
    "latency_p50_ms": N_("Latency p50 (ms)"),
    "latency_p95_ms": N_("Latency p95 (ms)"),
    "latency_p99_ms": N_("Latency p99 (ms)"),
}


def runs_for(user: User) -> QuerySet[BenchmarkRun]:
    """The runs of the clusters the user may see."""
    return BenchmarkRun.objects.filter(cluster__in=clusters_for(user))


def sweeps_for(user: User) -> QuerySet[Sweep]:
    return Sweep.objects.filter(cluster__in=clusters_for(user))


def picked_runs(user: User, cluster: Cluster, ids: Iterable[Any]) -> list[BenchmarkRun]:
    """The runs among ``ids`` that are the cluster's and the user's, oldest first.

    The order the runs were made in, whatever order the form sent them in (the history lists them
    newest first; a comparison reads as a story from the first run on).
    """
    picked = runs_for(user).filter(cluster=cluster, pk__in=list(ids)).select_related("cluster")
    return sorted(picked, key=lambda run: (run.created_at, run.sweep_index))


# --- the tab -------------------------------------------------------------------------------------


def latest_datasets(cluster: Cluster) -> list[dict[str, Any]]:
    """Per database and engine (pgbench's tables and sysbench's are apart): the newest data set
    (maybe still loading or failed) and the newest usable one."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for dataset in DataSet.objects.filter(cluster=cluster).order_by("-created_at")[:200]:
        row = rows.setdefault(
            (dataset.database, dataset.engine),
            {"database": dataset.database, "engine": dataset.engine, "latest": dataset, "ready": None},
        )
        if row["ready"] is None and dataset.status == JobStatus.SUCCEEDED:
            row["ready"] = dataset
    return sorted(rows.values(), key=lambda row: (row["database"], row["engine"]))


def datasets_card(cluster: Cluster) -> dict[str, Any]:
    """The data sets card, polled every second while one is being initialised."""
    datasets = latest_datasets(cluster)
    return {
        "cluster": cluster,
        "datasets": datasets,
        "datasets_busy": any(not row["latest"].is_terminal for row in datasets),
    }


def history_card(cluster: Cluster) -> dict[str, Any]:
    """The newest runs and sweeps, polled every 2 s while a run is queued or running."""
    runs = list(cluster.benchmark_runs.order_by("-created_at")[:HISTORY_LIMIT])
    return {
        "cluster": cluster,
        "runs": runs,
        "runs_active": any(run.status in RunStatus.ACTIVE for run in runs),
        "sweeps": list(cluster.sweeps.order_by("-created_at")[:RECENT_SWEEPS]),
    }


# --- one run -------------------------------------------------------------------------------------


# Summary values that only say a feature was not used: such a row does not apply to the run.
NOT_APPLICABLE = {
    "max_tries": 1,
    "latency_includes_failures": False,
    "tps_includes_connections": False,
    "aborted": False,
}


def applies(key: str, value: Any) -> bool:
    """Whether a summary row says something about this run: pgbench leaves the figures of options
    it did not use (rate, latency limit, retries, partitions…) empty, and those rows are left out."""
    if value is None or value == "" or value == []:
        return False
    return key not in NOT_APPLICABLE or value != NOT_APPLICABLE[key]


def summary_rows(summary: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if not summary:
        return []
    rows = [
        (_(label), _shown(summary[key]))
        for key, label in SUMMARY_LABELS.items()
        if key in summary and applies(key, summary[key])
    ]
    rows += [
        (key.replace("_", " ").capitalize(), _shown(value))
        for key, value in summary.items()
        if key not in SUMMARY_LABELS and key != "statement_latencies" and applies(key, value)
    ]
    return rows


def _shown(value: Any) -> Any:
    """A summary figure as the page shows it, through the one number formatter: floats to at most
    3 decimals with the language's separators (118,504 in German; pgbench prints 118.504488),
    whole numbers with their digits grouped (138.090 in German), everything else as it is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return number(value, -3)
    if isinstance(value, int):
        return number(value)
    return value


def run_page(run: BenchmarkRun) -> dict[str, Any]:
    """Everything the run page shows: status, progress, failure in plain words, summary, command."""
    latest = run.samples.order_by("-seq").first()
    progress = None
    elapsed = latest.elapsed_s if latest else 0.0
    if run.duration_s:
        # Full only when pgbench ran to its end; otherwise the bar stops where the run stopped.
        done = run.status == RunStatus.SUCCEEDED
        progress = 100 if done else min(100, round(100 * elapsed / run.duration_s))
    explanation = explain_failure(run.status, run.error_message, run.first_error)
    command, exact = shown_command(run)
    return {
        "cluster": run.cluster,
        "active_tab": "benchmarks",
        "run": run,
        "latest": latest,
        "elapsed": elapsed,
        "progress": progress,
        "stopped": run.is_terminal and run.status != RunStatus.SUCCEEDED,
        "has_samples": latest is not None,
        "queue_position": run.queue_position,
        "live_state": live_state(run),
        # The tool's words as stored; rows from before the parser left paths out may name some.
        "errors": [
            (error, kind_label(error.kind), without_paths(error.message))
            for error in run.errors.order_by("id")[:20]
        ],
        "first_error": without_paths(run.first_error),
        "summary_rows": summary_rows(run.summary),
        "statement_latencies": (run.summary or {}).get("statement_latencies") or [],
        # An errored run's text is a traceback (the panel's files, paths): the log's, never the page's.
        "reason": without_paths(run.error_message.strip().splitlines()[-1])
        if run.error_message.strip() and run.status != RunStatus.ERRORED
        else "",
        "explanation": explanation,
        "command": command,
        "command_exact": exact,
        "command_workdir": exact and bool(run.workdir) and "$WORKDIR" in command,
        "pool_slowdown": slowdown_note(run) if run.is_terminal else None,
    }


# --- sweeps --------------------------------------------------------------------------------------


def sweep_page(sweep: Sweep) -> dict[str, Any]:
    runs = list(sweep.runs.order_by("sweep_index"))
    report = sweep_report(sweep)
    running = any(run.status in RunStatus.ACTIVE for run in runs)
    return {
        "cluster": sweep.cluster,
        "active_tab": "benchmarks",
        "sweep": sweep,
        "runs": runs,
        "running": running,
        # Until its pool is given back, which follows the last run by a moment.
        "polling": running or (sweep.resizes_pool and sweep.restored_at is None and bool(runs)),
        "finished": sum(1 for run in runs if run.is_terminal),
        "report": report,
        "series_labels": [series["label"] for series in report["series"]],
    }


def sweep_running(results: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether any run of a sweep's results (``read.sweep_results``) is still queued or running."""
    return any(
        status in RunStatus.ACTIVE for points in results.values() for p in points for status in p["statuses"]
    )
