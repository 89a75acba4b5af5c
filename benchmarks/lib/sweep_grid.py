"""A sweep's grid of results: the median of its repeats per (series, client count), the best cell,
where a pool overtakes the direct baseline, and the best series for each client count.

A series is one line of the sweep's chart: a target ("direct", "pool test-pool") or a pool size.
The caller gives one ``Observation`` per finished run; a run that could not start (pgbench's
"could not create connection", exit 1) is an observation with no TPS, which counts as 0 TPS: the
client count was too many for that target, which is exactly what the direct-against-pool chart shows.
Runs still queued or running, cancelled or crashed are not observations.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Observation:
    """One finished run of a sweep."""

    series: str
    clients: int
    tps: float | None  # None: the run failed to produce a throughput (counts as 0)
    latency_ms: float | None = None
    failed_transactions: int = 0
    client_cores: float | None = None  # the load generator's average CPU use (None: not measured)


@dataclass(frozen=True)
class Cell:
    """The median of a (series, client count)'s observations."""

    series: str
    clients: int
    tps: float
    latency_ms: float | None
    failed_transactions: int  # summed over the repeats
    runs: int
    failed_runs: int  # repeats that gave no throughput
    client_cores: float | None = None  # median over the repeats that measured it


@dataclass(frozen=True)
class Grid:
    """Client counts (ascending) × series (in the order given), and the cells that have data."""

    series: tuple[str, ...]
    clients: tuple[int, ...]
    cells: dict[tuple[str, int], Cell]

    def cell(self, series: str, clients: int) -> Cell | None:
        return self.cells.get((series, clients))


def summarise(observations: Iterable[Observation], series_order: Sequence[str] = ()) -> Grid:
    """Group observations by (series, clients) and take medians; series keep ``series_order``
    first, then the order they appear in; client counts ascend."""
    grouped: dict[tuple[str, int], list[Observation]] = {}
    order: list[str] = list(dict.fromkeys(series_order))
    for obs in observations:
        grouped.setdefault((obs.series, obs.clients), []).append(obs)
        if obs.series not in order:
            order.append(obs.series)
    cells: dict[tuple[str, int], Cell] = {}
    for (series, clients), group in grouped.items():
        latencies = [o.latency_ms for o in group if o.tps is not None and o.latency_ms is not None]
        cores = [o.client_cores for o in group if o.client_cores is not None]
        cells[series, clients] = Cell(
            series=series,
            clients=clients,
            tps=statistics.median(o.tps or 0.0 for o in group),
            latency_ms=statistics.median(latencies) if latencies else None,
            failed_transactions=sum(o.failed_transactions for o in group),
            runs=len(group),
            failed_runs=sum(1 for o in group if o.tps is None),
            client_cores=statistics.median(cores) if cores else None,
        )
    clients_seen = sorted({clients for _series, clients in cells})
    return Grid(series=tuple(order), clients=tuple(clients_seen), cells=cells)


def best_cell(grid: Grid) -> Cell | None:
    """The cell of highest median TPS. Ties go to fewer clients (the same throughput for less
    load), then to the series given first; None when no cell has a throughput above 0."""
    best: Cell | None = None
    for clients in grid.clients:
        for series in grid.series:
            cell = grid.cell(series, clients)
            if cell is not None and cell.tps > 0 and (best is None or cell.tps > best.tps):
                best = cell
    return best


def crossover(grid: Grid, baseline: str, challenger: str) -> int | None:
    """The smallest client count from which ``challenger``'s TPS stays above ``baseline``'s for
    every larger count measured by both; None when it is not above at the largest such count
    (no crossover in the measured range). Equal TPS is not above."""
    shared = [c for c in grid.clients if grid.cell(baseline, c) and grid.cell(challenger, c)]
    found: int | None = None
    for clients in reversed(shared):
        base, other = grid.cell(baseline, clients), grid.cell(challenger, clients)
        assert base is not None and other is not None
        if other.tps <= base.tps:
            break
        found = clients
    return found


def best_per_clients(grid: Grid) -> dict[int, list[str]]:
    """For each client count, the series of highest median TPS (several when tied, in series
    order); a client count where every series gave nothing is left out."""
    out: dict[int, list[str]] = {}
    for clients in grid.clients:
        cells = [c for s in grid.series if (c := grid.cell(s, clients)) is not None and c.tps > 0]
        if cells:
            top = max(c.tps for c in cells)
            out[clients] = [c.series for c in cells if c.tps == top]
    return out
