#!/usr/bin/env python3
"""The tutorial story's figures through the panel, next to the same runs by hand (issue 30).

Provisions a db-s-2vcpu-4gb cluster (test settings: private data directory and ports; 97
connections for pools), initialises pgbench at ``--scale`` (the tutorial's 150 by default), makes
the transaction pool ``test-pool`` of 97, then, ``--pairs`` times, alternating which goes first:

  - 50 clients directly to the server: through the panel, and by hand;
  - 150 clients through test-pool: through the panel, and by hand.

"By hand" is pgbench run as a subprocess outside every cgroup of the panel, as on a user's own
machine; the panel's runs execute with ``services.execute_run`` (the client in the node's clients'
cgroup). Prints each run's TPS, the panel client's CPU and the median ratios. The machine may be
shared: the load (``uptime``) is printed before and after.

    .venv/bin/python scripts/perf/story.py [--scale 150] [--duration 30] [--pairs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from typing import Any

from _bench_setup import BenchCluster, bench_cluster, by_hand


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=int, default=150)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    print("load before:", uptime())
    with bench_cluster("db-story", args.scale, plan="db-s-2vcpu-4gb") as bench:
        measure(args, bench)
    print("load after:", uptime())


def through_panel(cluster: Any, name: str, options: Any, pool: Any) -> tuple[float, float | None]:
    """One run launched and executed through the panel's services: its TPS and client CPU."""
    from benchmarks import services

    # No percentiles (no transaction log): the same pgbench command as the run by hand.
    run = services.launch_run(cluster, pool=pool, options=options, percentiles=False, enqueue=False)
    run = services.execute_run(run.pk, wait_turn_s=60)
    if run.status != "succeeded" or run.tps is None:
        sys.exit(f"{name}: panel run {run.status}: {run.error_message} {run.first_error}")
    return float(run.tps), run.client_cores


def measure(args: argparse.Namespace, bench: BenchCluster) -> None:
    from benchmarks import services
    from benchmarks.lib.pgbench_command import RunOptions
    from panel.pools import services as pools

    cluster = bench.cluster
    pool = pools.create_pool(cluster, "test-pool", "defaultdb", None, "transaction", 97)
    pooled = services.resolve_target(cluster, pool=pool, database=None, user=None)
    cases = {
        "50 direct": (RunOptions(clients=50, threads=2, duration_s=args.duration), None, bench.target),
        "150 via test-pool (97)": (
            RunOptions(clients=150, threads=2, duration_s=args.duration),
            pool,
            pooled,
        ),
    }
    figures: dict[str, list[tuple[float, float, float | None]]] = {name: [] for name in cases}
    for pair in range(args.pairs):
        for name, (options, target_pool, target) in cases.items():
            if target_pool is None:
                # As the panel does before a direct run: the pool's idle server connections (kept
                # for server_idle_timeout after the pooled run) would take the direct run's slots.
                pools.release_idle_servers(cluster)
            if pair % 2 == 0:
                hand = by_hand(bench, options, target)
                tps, cores = through_panel(cluster, name, options, target_pool)
            else:
                tps, cores = through_panel(cluster, name, options, target_pool)
                if target_pool is None:
                    pools.release_idle_servers(cluster)
                hand = by_hand(bench, options, target)
            figures[name].append((hand, tps, cores))
            shown = f"{cores:.2f}" if cores is not None else "?"
            print(
                f"  {name:24} pair {pair + 1}: by hand {hand:8.1f} tps   panel {tps:8.1f} tps"
                f"   ratio {tps / hand:.3f}   panel client CPU {shown} cores"
            )
    print()
    print(f"{'medians':24}{'by hand tps':>14}{'panel tps':>12}{'ratio':>9}{'client CPU':>12}")
    for name, rows in figures.items():
        cores = [c for _h, _p, c in rows if c is not None]
        print(
            f"{name:24}{statistics.median(h for h, _p, _c in rows):14.1f}"
            f"{statistics.median(p for _h, p, _c in rows):12.1f}"
            f"{statistics.median(p / h for h, p, _c in rows):9.3f}"
            f"{(statistics.median(cores) if cores else float('nan')):12.2f}"
        )


if __name__ == "__main__":
    main()
