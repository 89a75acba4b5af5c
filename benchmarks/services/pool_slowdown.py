"""Why a run through a pool is slower than the direct run it is compared with, when it clearly is:
the reasons ``lib/pooler_load.py`` finds in what PgBouncer showed during the run. The run page
compares with the direct run of the same shape (its sweep's, else the newest on the cluster);
the compare page with a direct run among the picked ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.lib.pooler_load import clearly_slower, slowdown_reasons
from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.services.read import has_result


def _comparable(run: BenchmarkRun, other: BenchmarkRun) -> bool:
    return (
        not other.pool_name
        and has_result(other)
        and other.engine == run.engine
        and other.script == run.script
        and other.clients == run.clients
    )


def direct_baseline(run: BenchmarkRun) -> BenchmarkRun | None:
    """The direct run of the same engine, script and client count: in the run's sweep if it has
    one, else the newest that succeeded on the cluster."""
    if run.sweep_id is not None:
        candidates = BenchmarkRun.objects.filter(sweep_id=run.sweep_id).order_by("sweep_index")
    else:
        candidates = BenchmarkRun.objects.filter(
            cluster_id=run.cluster_id, pool_name="", status=RunStatus.SUCCEEDED
        ).order_by("-finished_at")[:50]
    return next((other for other in candidates if _comparable(run, other)), None)


def slowdown_note(run: BenchmarkRun, baseline: BenchmarkRun | None = None) -> dict[str, Any] | None:
    """``{"run", "baseline", "share", "reasons"}`` when the pool run is clearly slower than its
    direct baseline and the samples show why; None otherwise (the page then says nothing)."""
    if not run.pool_name or not has_result(run) or not run.pooler:
        return None
    baseline = baseline if baseline is not None else direct_baseline(run)
    if baseline is None or not clearly_slower(run.tps, baseline.tps):
        return None
    reasons = slowdown_reasons(run.pooler)
    if not reasons:
        return None
    share = round(100 * (run.tps or 0.0) / (baseline.tps or 1.0))
    return {"run": run, "baseline": baseline, "share": share, "reasons": reasons}


def compare_slowdowns(runs: Sequence[BenchmarkRun]) -> list[dict[str, Any]]:
    """The compare page's notes: each pool run against a picked direct run of its shape."""
    notes = []
    for run in runs:
        baseline = next((other for other in runs if _comparable(run, other)), None)
        note = slowdown_note(run, baseline) if baseline is not None else None
        if note is not None:
            notes.append(note)
    return notes
