"""What a run's load generator used, and whether it was the limit (pure, no Django).

A run stores where its client ran and the client's CPU time (``BenchmarkRun.client``, written by
the executor from the runner's readings). A client whose threads were busy about all the time
measured itself, not the database: its TPS is a floor of what the server can do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A client using this share of the cores its threads can use is taken as the run's bottleneck.
BOUND_SHARE = 0.85


def client_cores(client: Mapping[str, Any] | None) -> float | None:
    """Average cores the client used over its life (CPU seconds / wall seconds); None if unknown."""
    if not client:
        return None
    cpu, wall = client.get("cpu_s"), client.get("wall_s")
    if cpu is None or not wall:
        return None
    return float(cpu) / float(wall)


def is_client_bound(cores: float | None, threads: int, cpu_count: int | None) -> bool:
    """Whether ``cores`` is near all the client could use: one core per thread, at most the
    machine's CPUs (a pgbench thread is one process thread: it cannot use more than a core)."""
    if cores is None or threads < 1:
        return False
    usable = min(threads, cpu_count or threads)
    return cores >= BOUND_SHARE * usable
