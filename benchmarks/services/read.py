"""Reading runs: live samples, records, comparisons, exports and sweep results."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from django.template.defaultfilters import floatformat
from django.utils.translation import gettext as _

from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import BenchmarkRun, RunStatus, Sweep
from benchmarks.services.failure import explain_failure
from panel.clusters.lib.refusals import without_paths
from panel.core.errors import N_, ServiceError

SAMPLE_FIELDS = (
    "seq",
    "elapsed_s",
    "tps",
    "latency_avg_ms",
    "latency_stddev_ms",
    "failed",
    "lag_ms",
    "skipped",
    "retried",
    "retries",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "percentile_count",
)


def sample_fields(run: BenchmarkRun) -> tuple[str, ...]:
    """The shared fields and the engine's own (a sysbench run's queries per second; pgbench's
    exports are unchanged)."""
    engine = engines.engine_for(run.engine)
    return (*SAMPLE_FIELDS, *engine.extra_sample_fields) if engine is not None else SAMPLE_FIELDS


def samples_after(run: BenchmarkRun, after: int = 0, limit: int = 5000) -> list[dict[str, Any]]:
    """Samples with ``seq > after``, for a chart fed incrementally."""
    return list(run.samples.filter(seq__gt=after).order_by("seq").values(*sample_fields(run))[:limit])


def live_state(run: BenchmarkRun) -> str:
    """A short token of what the run page's HTML part shows apart from the per-second figures
    (status, queue position, warnings, errors, the exact command): the page re-fetches that part only when it changes,
    and the data endpoint answers "nothing new" while it stays the same and no sample came."""
    parts = [
        run.status,
        run.queue_position if run.status == RunStatus.QUEUED else "",
        len(run.warnings or []),
        run.error_count,
        run.aborted_clients,
        int(bool(run.first_error)),
        int(bool(run.argv)),  # the exact command, shown once pgbench started
    ]
    return ".".join(str(part) for part in parts)


def live_figures(run: BenchmarkRun, latest: dict[str, Any]) -> dict[str, Any]:
    """The figures of a running run's status card after its ``latest`` sample, formatted as the
    template formats them, for the page's script to put in place without re-rendering the card."""
    dash = "—"
    figures: dict[str, Any] = {
        "tps": floatformat(latest["tps"], "1g"),
        "latency": f"{floatformat(latest['latency_avg_ms'], '2g')} ms"
        if latest["latency_avg_ms"] is not None
        else dash,
        "p95": f"{floatformat(latest['p95_ms'], '2g')} ms" if latest["p95_ms"] is not None else dash,
        "failed": floatformat(latest["failed"], "0g") if latest["failed"] is not None else dash,
    }
    if run.duration_s:
        elapsed = latest["elapsed_s"] or 0.0
        figures["progress"] = min(100, round(100 * elapsed / run.duration_s))
        figures["elapsed"] = _("%(e)s s of %(d)s s") % {
            "e": floatformat(elapsed, "0g"),
            "d": floatformat(run.duration_s, "0g"),
        }
    return figures


def shown_command(run: BenchmarkRun) -> tuple[str, bool]:
    """The command shown for a run and whether it is the exact one that ran (its argv, stored when
    pgbench started); before pgbench starts, or for runs older than the stored argv, the planned one."""
    if run.argv:
        return cmd.exact_command(run.argv, run.argv_env, run.workdir, run.custom_script), True
    return run.command_display, False


def run_record(run: BenchmarkRun) -> dict[str, Any]:
    """What a run is, in JSON-friendly types (export, compare, the CLI)."""
    return {
        "id": str(run.pk),
        "label": str(run),
        "cluster": run.cluster.name,
        "target": run.target_display,
        "pool": run.pool_name or None,
        "database": run.database,
        "user": run.user,
        "status": run.status,
        "status_meaning": str(run.status_meaning),
        "engine": run.engine,
        "clients": run.clients,
        "threads": run.threads,
        "duration_s": run.duration_s,
        "transactions": run.transactions,
        "script": run.script,
        "query_mode": run.query_mode,
        "options": run.options,
        "command": shown_command(run)[0],
        "argv": run.argv or None,
        "exit_code": run.exit_code,
        # The tool's words; rows from before the parser left paths out may name the server's socket.
        "error_message": without_paths(run.error_message),
        "first_error": without_paths(run.first_error),
        "error_count": run.error_count,
        "aborted_clients": run.aborted_clients,
        "percentile_sampling_rate": run.percentile_sampling_rate,
        "tps": run.tps,
        "client": run.client or None,
        "client_cores": run.client_cores,
        "client_bound": run.client_bound,
        # PgBouncer as sampled during a pool run (clients waiting, its CPU): the summary, not the samples.
        "pooler": (run.pooler or {}).get("summary") or None,
        "latency_avg_ms": run.latency_avg_ms,
        "summary": run.summary,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def has_result(run: BenchmarkRun) -> bool:
    """Whether the run has a TPS of its own to compare: pgbench ran to the end (all or some clients)."""
    return run.status in (RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_ERRORS) and run.tps is not None


def compare_records(runs: Sequence[BenchmarkRun]) -> list[dict[str, Any]]:
    """The records of the runs to compare (the compare page's table), in the given order; at least
    two are needed. Each says whether it has a result, why not (in words) and whether it is the
    best: the highest TPS among the runs with a result, never a run that failed."""
    if len(runs) < 2:
        raise ServiceError(
            N_("Pick at least two runs to compare."), field="runs", code="run.compare_too_few", params={}
        )
    with_result = [run for run in runs if has_result(run)]
    best = max(with_result, key=lambda run: run.tps or 0.0) if len(with_result) > 1 else None
    records = []
    for run in runs:
        explanation = explain_failure(run.status, run.error_message, run.first_error)
        records.append(
            {
                **run_record(run),
                "has_result": has_result(run),
                "best": best is not None and run.pk == best.pk,
                "reason": explanation.title if explanation else "",
                "reason_advice": explanation.advice if explanation else "",
            }
        )
    return records


def compare_runs(runs: Sequence[BenchmarkRun]) -> dict[str, Any]:
    """Series aligned on the interval number (x = seq × progress interval), one column per run,
    ``None`` where a run has no sample, plus each run's summary."""
    records = compare_records(runs)
    columns: dict[str, dict[int, dict[str, Any]]] = {}
    longest = 0
    for run in runs:
        rows = {row["seq"]: row for row in run.samples.order_by("seq").values(*SAMPLE_FIELDS)}
        if not rows:
            continue  # no line (and no legend entry) for a run that has no sample
        columns[str(run.pk)] = rows
        longest = max(longest, max(rows, default=0))
    seqs = list(range(1, longest + 1))
    series: dict[str, dict[str, list[Any]]] = {}
    for metric in ("tps", "latency_avg_ms", "p50_ms", "p95_ms", "p99_ms", "failed"):
        series[metric] = {
            run_id: [rows.get(seq, {}).get(metric) for seq in seqs] for run_id, rows in columns.items()
        }
    interval = {str(run.pk): run.options.get("progress_interval_s", 1) for run in runs}
    return {
        "x": seqs,
        "interval_s": interval,
        "series": series,
        "runs": records,
        # Lines for the runs with samples, bars for the runs with a result, in the runs' order.
        "lines": [record["id"] for record in records if record["id"] in columns],
        "tps_bars": [
            {"id": str(run.pk), "label": str(run), "tps": run.tps} for run in runs if has_result(run)
        ],
    }


def export_run(run: BenchmarkRun, fmt: str = "csv") -> str:
    """The run's samples as CSV, or the whole record (summary, samples, errors) as JSON."""
    samples = samples_after(run, 0, limit=10_000_000)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=sample_fields(run), lineterminator="\n")
        writer.writeheader()
        writer.writerows(samples)
        return out.getvalue()
    if fmt == "json":
        errors: list[Any] = list(run.errors.order_by("id").values("at", "kind", "message", "client_id"))
        for error in errors:
            error["at"] = error["at"].isoformat()
            error["message"] = without_paths(error["message"])
        return json.dumps({**run_record(run), "samples": samples, "errors": errors}, indent=2)
    raise ServiceError(
        N_("Unknown export format %(f)s: choose csv or json."),
        field="format",
        code="run.export_format_unknown",
        params={"f": fmt},
    )


def sweep_results(sweep: Sweep) -> dict[str, list[dict[str, Any]]]:
    """Per target, mean TPS and latency by client count over finished repeats (the sweep chart)."""
    results: dict[str, dict[int, list[BenchmarkRun]]] = {}
    for run in sweep.runs.order_by("sweep_index"):
        results.setdefault(run.target_display, {}).setdefault(run.clients, []).append(run)
    out: dict[str, list[dict[str, Any]]] = {}
    for target, by_clients in results.items():
        points = []
        for clients, runs in sorted(by_clients.items()):
            done = [
                r
                for r in runs
                if r.status in (RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_ERRORS) and r.tps
            ]
            points.append(
                {
                    "clients": clients,
                    "runs": len(runs),
                    "finished": len(done),
                    "tps": sum(r.tps or 0 for r in done) / len(done) if done else None,
                    "latency_avg_ms": sum(r.latency_avg_ms or 0 for r in done) / len(done) if done else None,
                    "statuses": [r.status for r in runs],
                }
            )
        out[target] = points
    return out
