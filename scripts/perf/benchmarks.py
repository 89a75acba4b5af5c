#!/usr/bin/env python3
"""Harness overhead of benchmark runs, measured side by side (not a timed test; issue 30).

Provisions a throw-away db-s-1vcpu-1gb cluster (test settings: private data directory and ports),
initialises pgbench's tables, then compares the same pgbench run by hand and through the panel:

- by hand: pgbench as a plain subprocess of this script, from the cluster's Connection details
  (advertised host and port, sslmode require: TLS over TCP, as the panel's runs), outside every
  cgroup of the panel (this script's own group, as on a user's own machine);
- through the panel: ``services.execute_run`` (the runner's parser, samples in the database,
  heartbeat, cancel checks), pgbench in the node's clients' cgroup as the bench user.

One warm-up run each way first (not counted; the panel's measures the live lag with a poller
standing in for the run page), then ``--pairs`` pairs without percentiles and as many with them
(the transaction log read live), the order alternating pair by pair. Both argument lists are
printed, with what differs; the load average before, after and at each pair. The last lines are
the summaries: "ratio panel/hand median X (pairs: ...)", target ≥ 0.95.

``--client-weight normal`` gives the clients' cgroup a normal process's CPU weight (1024 / 100
instead of 512 / 50) for the measurement; ``--client-weight compare`` runs rounds of three instead
(hand, panel at the clients' weight, panel at a normal process's weight; no percentiles), to see
whether the weight costs TPS. The weight is put back afterwards.

    .venv/bin/python scripts/perf/benchmarks.py [--clients 10] [--duration 10] [--scale 10] [--pairs 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable

from _bench_setup import bench_cluster, hand_command
from _bench_setup import by_hand as hand_run
from _cli import counts_parser
from _pairs import (
    DEFAULT_PAIRS,
    Pairs,
    argv_differences,
    format_load,
    load_average,
    pairs_of,
    run_pairs,
    run_rounds,
)


def main() -> None:
    parser = counts_parser(__doc__, clients=10, threads=2, duration=10, scale=10, pairs=DEFAULT_PAIRS)
    parser.add_argument("--client-weight", choices=("panel", "normal", "compare"), default="panel")
    args = parser.parse_args()
    print("before:", format_load(load_average()))
    with bench_cluster("db-perf", args.scale) as bench, client_weight(args.client_weight):
        measure(args, bench)
    print("after:", format_load(load_average()))


NORMAL_WEIGHT = (1024, 100)  # one ordinary process's CPU weight: v1 cpu.shares, v2 cpu.weight


def set_client_weight(weight: tuple[int, int]) -> tuple[int, int]:
    """Give the clients' cgroup ``weight`` (v1 shares, v2 weight) from the next run on; the weight
    it had before."""
    from panel.clusters.engine import cgroups

    before = (cgroups.CLIENTS_V1_SHARES, cgroups.CLIENTS_V2_WEIGHT)
    cgroups.CLIENTS_V1_SHARES, cgroups.CLIENTS_V2_WEIGHT = weight
    return before


class client_weight:  # noqa: N801 (a context manager, read as a phrase)
    """The clients' cgroup at a normal process's weight for the measurement, put back after."""

    def __init__(self, which: str) -> None:
        self.which = which

    def __enter__(self) -> None:
        from panel.clusters.engine import cgroups

        self.saved = (cgroups.CLIENTS_V1_SHARES, cgroups.CLIENTS_V2_WEIGHT)
        if self.which == "normal":
            set_client_weight(NORMAL_WEIGHT)
        print(
            f"clients' cgroup weight: {cgroups.CLIENTS_V1_SHARES} of 1024 (v1) / "
            f"{cgroups.CLIENTS_V2_WEIGHT} of 100 (v2)"
            + (f", and {NORMAL_WEIGHT[0]} / {NORMAL_WEIGHT[1]} in turn" if self.which == "compare" else "")
        )

    def __exit__(self, *exc: object) -> None:
        from django.conf import settings

        from panel.clusters.engine import cgroups

        set_client_weight(self.saved)
        cgroups.ensure_clients(settings.PANEL_BENCH_MEMORY_MB * 1024**2)  # as the runner leaves it


def compare_weights(
    args: argparse.Namespace, by_hand: Callable[[], float], panel: Callable[[], float]
) -> None:
    """Rounds of hand, panel at the clients' weight and panel at a normal process's weight."""

    def normal() -> float:
        saved = set_client_weight(NORMAL_WEIGHT)
        try:
            return panel()
        finally:
            set_client_weight(saved)

    def report(index: int, got: dict[str, float]) -> None:
        print(
            f"  round {index + 1}: by hand {got['hand']:8.1f} tps   panel {got['panel']:8.1f} "
            f"({got['panel'] / got['hand']:.3f})   panel, normal weight {got['normal']:8.1f} "
            f"({got['normal'] / got['hand']:.3f})   {format_load(load_average())}"
        )

    figures = run_rounds(args.pairs, {"hand": by_hand, "panel": panel, "normal": normal}, report=report)
    print()
    print(pairs_of("panel at the clients' weight", figures["hand"], figures["panel"]).summary_line())
    print(pairs_of("panel at a normal weight", figures["hand"], figures["normal"]).summary_line())


def measure(args: argparse.Namespace, bench: object) -> None:
    from django.db import connection

    from benchmarks import services
    from benchmarks.lib.pgbench_command import RunOptions
    from benchmarks.models import RunSample

    cluster = bench.cluster  # type: ignore[attr-defined]
    options = RunOptions(clients=args.clients, threads=args.threads, duration_s=args.duration)

    def by_hand() -> float:
        return hand_run(bench, options)

    lags_db: list[float] = []
    lags_seen: list[float] = []
    client_cores: list[float] = []
    executor_cpu: list[float] = []
    panel_argvs: dict[bool, list[str]] = {}
    panel_client: dict[str, object] = {}

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

        # The poller competes for the CPU with pgbench: only in the warm-up, not in the pairs.
        poller = threading.Thread(target=poll if watch else stop.wait)
        poller.start()
        cpu_before, wall_before = time.process_time(), time.monotonic()
        try:
            run = services.execute_run(run.pk, wait_turn_s=30)
        finally:
            stop.set()
            poller.join()
        if not watch:  # this process: the executor's parser, samples, heartbeat, cancel checks
            executor_cpu.append((time.process_time() - cpu_before) / (time.monotonic() - wall_before))
        if run.status != "succeeded" or run.tps is None:
            sys.exit(f"panel run failed: {run.error_message}")
        panel_argvs.setdefault(percentiles, list(run.argv))
        panel_client.update(run.client or {})
        if watch:
            for sample in run.samples.all():
                lags_db.append((sample.created_at - sample.received_at).total_seconds())
                if sample.seq in seen:
                    lags_seen.append(seen[sample.seq] - sample.received_at.timestamp())
        elif run.client_cores is not None:
            client_cores.append(run.client_cores)
        if percentiles:
            missing = run.samples.filter(p50_ms__isnull=True).count()
            print(f"    percentiles: sampling rate {run.percentile_sampling_rate}, {missing} samples without")
        return float(run.tps)

    hand, panel = by_hand(), through_panel(False, watch=True)
    print(f"  warm-up (not counted): by hand {hand:8.1f} tps   panel {panel:8.1f} tps")
    hand_argv, _env = hand_command(bench, options)
    print("  by hand:", " ".join(hand_argv))
    print("  panel:  ", " ".join(panel_argvs[False]))
    only_hand, only_panel = argv_differences(hand_argv[1:], panel_argvs[False][1:])
    print(f"  differ: hand only {only_hand or 'nothing'}, panel only {only_panel or 'nothing'}")
    print(f"  panel client: {panel_client}")

    if args.client_weight == "compare":
        compare_weights(args, by_hand, lambda: through_panel(False))
        return
    results = {p: Pairs("with percentiles" if p else "without percentiles") for p in (False, True)}
    for percentiles, pairs in results.items():

        def report(index: int, hand: float, panel: float, label: str = pairs.label) -> None:
            cores = f"{client_cores[-1]:.2f}" if client_cores else "?"
            print(
                f"  {label} pair {index + 1}: by hand {hand:8.1f} tps   panel {panel:8.1f} tps   "
                f"ratio {panel / hand:.3f}   panel client CPU {cores} cores   "
                f"{format_load(load_average())}"
            )

        run_pairs(pairs, args.pairs, by_hand, lambda p=percentiles: through_panel(p), report=report)
        if percentiles:
            extra = argv_differences(panel_argvs[False], panel_argvs[True])[1]
            print(f"  with percentiles the panel adds {extra}")

    print()
    print(f"{'medians of ' + str(args.pairs) + ' pairs':24}{'by hand tps':>14}{'panel tps':>12}{'ratio':>9}")
    for pairs in results.values():
        hand, panel = pairs.medians()
        print(f"{pairs.label:24}{hand:14.1f}{panel:12.1f}{pairs.median_ratio or 0:9.3f}")
    if client_cores:
        print(
            f"panel client CPU: median {statistics.median(client_cores):.2f} cores ({cluster.plan_slug} server)"
        )
    if executor_cpu:
        print(
            f"panel executor CPU (this process, beside pgbench): median "
            f"{statistics.median(executor_cpu) * 1000:.0f} ms per s of run"
        )
    if lags_db:
        print(
            f"live lag, line read → sample row written: median {statistics.median(lags_db) * 1000:.1f} ms, "
            f"max {max(lags_db) * 1000:.1f} ms ({len(lags_db)} samples)"
        )
    if lags_seen:
        print(
            f"live lag, line read → seen by a 100 ms poller: median {statistics.median(lags_seen) * 1000:.1f} ms, "
            f"max {max(lags_seen) * 1000:.1f} ms (target median ≤ 1000 ms)"
        )
    print()
    for pairs in results.values():
        print(pairs.summary_line())


if __name__ == "__main__":
    main()
