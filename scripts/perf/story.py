#!/usr/bin/env python3
"""The tutorial story's figures through the panel, next to the same runs by hand (issue 30).

Provisions a db-s-2vcpu-4gb cluster (test settings: private data directory and ports; 97
connections for pools), initialises pgbench at ``--scale`` (the tutorial's 150 by default), makes
the transaction pool ``test-pool`` of 97, then for each of the story's runs:

  - 50 clients directly to the server;
  - 150 clients through test-pool;

a short warm-up each way (not counted), then ``--pairs`` pairs, the order alternating pair by pair.
"By hand" is pgbench as a subprocess of this script from the cluster's (or the pool's) Connection
details (advertised host and port, sslmode require), outside every cgroup of the panel, as on a
user's own machine; the panel's runs execute with ``services.execute_run`` (the client in the
node's clients' cgroup). Both sides get the same pgbench options (no percentiles). Prints each
pair's TPS side by side, the panel client's CPU, the load average at each pair, and one summary
line per run: "ratio panel/hand median X (pairs: ...)".

    .venv/bin/python scripts/perf/story.py [--scale 150] [--duration 20] [--pairs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from _bench_setup import BenchCluster, bench_cluster, by_hand
from _cli import counts_parser
from _pairs import Pairs, format_load, load_average, run_pairs

WARM_UP_S = 10


def warm_up(run: Callable[[Any], float], options: Any) -> str:
    """One run not counted; on a loaded machine 150 TLS connections may outlast it (no figure)."""
    try:
        return f"{run(options):8.1f} tps"
    except SystemExit as exc:
        return f"no figure ({str(exc.code).strip().splitlines()[-1][:80]})"


def main() -> None:
    args = counts_parser(__doc__, scale=150, duration=20, pairs=3).parse_args()
    print("before:", format_load(load_average()))
    with bench_cluster("db-story", args.scale, plan="db-s-2vcpu-4gb") as bench:
        measure(args, bench)
    print("after:", format_load(load_average()))


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
    results: list[tuple[Pairs, list[float]]] = []
    for name, (options, target_pool, target) in cases.items():
        cores: list[float] = []

        def hand(options: Any = options, target_pool: Any = target_pool, target: Any = target) -> float:
            if target_pool is None:
                # As the panel does before a direct run: the pool's idle server connections (kept
                # for server_idle_timeout after the pooled run) would take the direct run's slots.
                pools.release_idle_servers(cluster)
            return by_hand(bench, options, target)

        def panel(
            options: Any = options,
            target_pool: Any = target_pool,
            name: str = name,
            cores: list[float] = cores,
        ) -> float:
            tps, used = through_panel(cluster, name, options, target_pool)
            if used is not None:
                cores.append(used)
            return tps

        warm = replace(options, duration_s=WARM_UP_S)
        print(
            f"  {name:24} warm-up ({WARM_UP_S} s, not counted): by hand {warm_up(hand, warm)}"
            f"   panel {warm_up(panel, warm)}"
        )
        cores.clear()

        def report(
            index: int, by_hand_tps: float, panel_tps: float, name: str = name, cores: list[float] = cores
        ) -> None:
            shown = f"{cores[-1]:.2f}" if cores else "?"
            print(
                f"  {name:24} pair {index + 1}: by hand {by_hand_tps:8.1f} tps   panel {panel_tps:8.1f} tps"
                f"   ratio {panel_tps / by_hand_tps:.3f}   panel client CPU {shown} cores"
                f"   {format_load(load_average())}"
            )

        pairs = run_pairs(Pairs(name), args.pairs, hand, panel, report=report)
        results.append((pairs, cores))
    print()
    print(f"{'medians':24}{'by hand tps':>14}{'panel tps':>12}{'ratio':>9}{'client CPU':>12}")
    for pairs, cores in results:
        hand_tps, panel_tps = pairs.medians()
        print(
            f"{pairs.label:24}{hand_tps:14.1f}{panel_tps:12.1f}{pairs.median_ratio or 0:9.3f}"
            f"{(statistics.median(cores) if cores else float('nan')):12.2f}"
        )
    print()
    for pairs, _cores in results:
        print(pairs.summary_line())


if __name__ == "__main__":
    main()
