"""What a sweep's page and ``bench sweep`` show: its grid of medians, the best cell, and the
sentences (the crossover of each pool against direct, the best pool size per client count).

The arithmetic is ``benchmarks.lib.sweep_grid``'s; this module turns runs into its observations
and its answers into words.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from benchmarks.lib.sweep_grid import (
    Cell,
    Grid,
    Observation,
    best_cell,
    best_per_clients,
    crossover,
    summarise,
)
from benchmarks.models import BenchmarkRun, RunStatus, Sweep

DIRECT = "direct"
# A run that ran gives its throughput; one that could not start or stopped on errors without one
# gives 0 (too many clients for that target is a result). Cancelled and crashed runs measured nothing.
MEASURED = (RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_ERRORS)  # and FAILED, at 0 if no summary


def series_of(sweep: Sweep, run: BenchmarkRun) -> str:
    """The run's line on the sweep's chart: its target, or its pool size."""
    if sweep.resizes_pool and run.pool_size is not None:
        return _("size %(n)s") % {"n": run.pool_size}
    return DIRECT if not run.pool_name else _("pool %(name)s") % {"name": run.pool_name}


def _series_order(sweep: Sweep) -> list[str]:
    if sweep.resizes_pool:
        return [_("size %(n)s") % {"n": size} for size in sweep.pool_sizes]
    return [
        _("pool %(name)s") % {"name": t["pool"]} if t.get("kind") == "pool" else DIRECT for t in sweep.targets
    ]


def _observation(series: str, run: BenchmarkRun) -> Observation | None:
    if run.status not in (*MEASURED, RunStatus.FAILED):
        return None
    summary = run.summary or {}
    if run.tps is None:
        return Observation(series, run.clients, None)  # no throughput: counts as 0
    return Observation(
        series,
        run.clients,
        float(run.tps),
        run.latency_avg_ms,
        int(summary.get("failed_transactions") or 0),
        client_cores=run.client_cores,
    )


def _cell_dict(cell: Cell | None, best: Cell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {
        "clients": cell.clients,
        "tps": round(cell.tps, 1),
        "latency_avg_ms": round(cell.latency_ms, 3) if cell.latency_ms is not None else None,
        "failed_transactions": cell.failed_transactions,
        "runs": cell.runs,
        "failed_runs": cell.failed_runs,
        "client_cores": round(cell.client_cores, 2) if cell.client_cores is not None else None,
        "best": best is not None and (cell.series, cell.clients) == (best.series, best.clients),
    }


def _sentences(sweep: Sweep, grid: Grid) -> list[str]:
    if sweep.resizes_pool:
        best = best_per_clients(grid)
        if not best:
            return []
        parts = [
            _("%(clients)s clients: %(sizes)s") % {"clients": clients, "sizes": _(" or ").join(series)}
            for clients, series in best.items()
        ]
        return [_("Best pool size per client count: %(parts)s.") % {"parts": "; ".join(parts)}]
    if DIRECT not in grid.series:
        return []
    out = []
    for series in grid.series:
        if series == DIRECT or not any(grid.cell(series, c) for c in grid.clients):
            continue
        shared = [c for c in grid.clients if grid.cell(series, c) and grid.cell(DIRECT, c)]
        if not shared:
            continue
        found = crossover(grid, DIRECT, series)
        if found is not None:
            out.append(
                _(
                    "Through the pool from %(n)s clients on: %(series)s beats direct at every count from %(n)s up."
                )
                % {"n": found, "series": series}
            )
        else:
            out.append(
                _(
                    "No crossover in the measured range (%(low)s–%(high)s clients): %(series)s is not ahead of direct at %(high)s clients."
                )
                % {"low": shared[0], "high": shared[-1], "series": series}
            )
    return out


def sweep_report(sweep: Sweep) -> dict[str, Any]:
    """The sweep's grid as JSON-ready data: ``series`` (one line each, points by client count),
    ``rows`` (client counts × series, for the table), ``best`` and ``sentences``; ``done`` once no
    run is queued or running."""
    runs = list(sweep.runs.order_by("sweep_index"))
    observations = []
    statuses: dict[tuple[str, int], list[str]] = {}
    for run in runs:
        series = series_of(sweep, run)
        statuses.setdefault((series, run.clients), []).append(run.status)
        observation = _observation(series, run)
        if observation is not None:
            observations.append(observation)
    order = _series_order(sweep)
    grid = summarise(observations, order)
    series_names = list(dict.fromkeys([*order, *(s for s, _c in statuses)]))
    clients = sorted({*sweep.clients_list, *(c for _s, c in statuses)})
    best = best_cell(grid)
    return {
        "kind": sweep.kind,
        "done": not any(run.status in RunStatus.ACTIVE for run in runs),
        "clients": clients,
        "series": [
            {
                "label": name,
                "points": [
                    {**point, "statuses": statuses.get((name, c), [])}
                    for c in clients
                    if (point := _cell_dict(grid.cell(name, c), best)) is not None
                ],
            }
            for name in series_names
        ],
        "rows": [
            {"clients": c, "cells": [_cell_dict(grid.cell(name, c), best) for name in series_names]}
            for c in clients
        ],
        "best": {"series": best.series, "clients": best.clients, "tps": round(best.tps, 1)} if best else None,
        "sentences": _sentences(sweep, grid),
    }
