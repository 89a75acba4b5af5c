#!/usr/bin/env python3
"""Harness overhead of benchmark runs, measured side by side (not a timed test).

Provisions a throw-away cluster (test settings: private data directory and ports), initialises
pgbench's tables, then alternates the same pgbench run by hand (subprocess, no panel) and through
the panel (``services.execute_run``: parser, samples in the database, heartbeat, the client in the
node's clients' cgroup), five pairs without percentiles and five with them. "By hand" is pgbench
outside every cgroup of the panel, as on a user's own machine. Prints each pair's TPS, the panel
client's CPU use, the median ratio panel/hand (target ≥ 0.95), and the live lag: from the runner
reading pgbench's progress line to the sample row being written, and to a poller (standing in for
the run page's data endpoint) seeing it.

    .venv/bin/python scripts/perf/benchmarks.py [--clients 10] [--duration 20] [--scale 10] [--pairs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

from _bench_setup import bench_cluster
from _bench_setup import by_hand as hand_run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()

    with bench_cluster("db-perf", args.scale) as bench:
        from django.db import connection

        from benchmarks import services
        from benchmarks.lib.pgbench_command import RunOptions
        from benchmarks.models import RunSample

        cluster = bench.cluster
        options = RunOptions(clients=args.clients, threads=args.threads, duration_s=args.duration)

        def by_hand() -> float:
            return hand_run(bench, options)

        lags_db: list[float] = []
        lags_seen: list[float] = []
        client_cores: list[float] = []

        def through_panel(percentiles: bool, watch: bool = False) -> float:
            run = services.launch_run(cluster, options=options, percentiles=percentiles, enqueue=False)
            seen: dict[int, float] = {}
            stop = threading.Event()

            def poll() -> None:  # what a page polling the data endpoint would see, and when
                try:
                    while not stop.is_set():
                        for seq in RunSample.objects.filter(run_id=run.pk).values_list("seq", flat=True):
                            seen.setdefault(seq, time.time())
                        time.sleep(0.1)
                finally:
                    connection.close()

            # The poller competes for the CPU with pgbench: only in the lag run, not in the TPS pairs.
            poller = threading.Thread(target=poll if watch else stop.wait)
            poller.start()
            try:
                run = services.execute_run(run.pk, wait_turn_s=30)
            finally:
                stop.set()
                poller.join()
            if run.status != "succeeded" or run.tps is None:
                sys.exit(f"panel run failed: {run.error_message}")
            for sample in run.samples.all():
                lags_db.append((sample.created_at - sample.received_at).total_seconds())
                if sample.seq in seen:
                    lags_seen.append(seen[sample.seq] - sample.received_at.timestamp())
            if run.client_cores is not None:
                client_cores.append(run.client_cores)
            if percentiles:
                missing = run.samples.filter(p50_ms__isnull=True).count()
                print(
                    f"    percentiles: sampling rate {run.percentile_sampling_rate}, {missing} samples without"
                )
            return float(run.tps)

        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for percentiles in (False, True):
            label = "with percentiles" if percentiles else "without percentiles"
            for pair in range(args.pairs):
                # Alternate which goes first so a warming cache or a drifting machine favours neither.
                if pair % 2 == 0:
                    hand = by_hand()
                    panel = through_panel(percentiles)
                else:
                    panel = through_panel(percentiles)
                    hand = by_hand()
                results[percentiles].append((hand, panel))
                cores = f"{client_cores[-1]:.2f}" if client_cores else "?"
                print(
                    f"  {label} pair {pair + 1}: by hand {hand:8.1f} tps   panel {panel:8.1f} tps   "
                    f"ratio {panel / hand:.3f}   panel client CPU {cores} cores"
                )

        through_panel(True, watch=True)  # the live-lag run, with a poller standing in for the page
        print()
        print(
            f"{'medians of ' + str(args.pairs) + ' pairs':24}{'by hand tps':>14}{'panel tps':>12}{'ratio':>9}{'target':>9}"
        )
        for percentiles in (False, True):
            pairs = results[percentiles]
            hand = statistics.median(h for h, _ in pairs)
            panel = statistics.median(p for _, p in pairs)
            ratio = statistics.median(p / h for h, p in pairs)
            label = "with percentiles" if percentiles else "without percentiles"
            print(f"{label:24}{hand:14.1f}{panel:12.1f}{ratio:9.3f}{'≥ 0.95':>9}")
        print(
            f"panel client CPU: median {statistics.median(client_cores):.2f} cores ({cluster.plan_slug} server)"
        )
        print()
        print(
            f"live lag, line read → sample row written: median {statistics.median(lags_db) * 1000:.1f} ms, "
            f"max {max(lags_db) * 1000:.1f} ms ({len(lags_db)} samples)"
        )
        if lags_seen:
            print(
                f"live lag, line read → seen by a 100 ms poller: median {statistics.median(lags_seen) * 1000:.1f} ms, "
                f"max {max(lags_seen) * 1000:.1f} ms (target median ≤ 1000 ms)"
            )


if __name__ == "__main__":
    main()
