#!/usr/bin/env python3
"""What a tenant's benchmark does to the panel's own pages, with plan limits and without (issues 13, 30).

Provisions a 1 GB / 1 vCPU cluster (test settings: private data directory and ports) with
pgbench's tables, starts the panel's web server (``manage.py runserver``, a process of its own, in
this script's cgroup: the panel's own group, the parent of the clusters' and clients' groups), and
requests four of the cluster's pages in turn (overview, pools, benchmarks, insights) as a
logged-in user, timing each answer. Rounds of two windows, the order alternating round by round:

  idle     no load;
  limited  a 50-client pgbench run launched through the panel, through a transaction pool of 22
           (the plan's whole budget), the server and PgBouncer in the cluster's cgroup (the plan's
           memory and one core, at a lower CPU weight), pgbench in the node's clients' cgroup (its
           own memory limit, no quota, a weight below the panel's).

Then ``--unlimited-rounds`` rounds of idle against "unlimited": the same run with the server,
PgBouncer and pgbench out of every cgroup, as before plan limits were enforced (last, as the
server cannot go back into its group without a restart).

Each round's ratio is its loaded p95 over its idle p95 (on a shared machine other people's load
drifts: a ratio of windows a few seconds apart says more than one idle window against one loaded
one). Prints each round, the p95 of each page in each phase (which page suffers), the load average
at each round, and the summary "ratio loaded/idle p95 median X (rounds: ...)", target ≤ 2.
Needs root and a writable cgroup hierarchy for the two loaded phases to differ.

    .venv/bin/python scripts/perf/panel_under_load.py [--clients 50] [--duration 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time
import urllib.request
from collections.abc import Callable

from _bench_setup import BenchCluster, bench_cluster, execute_in_background, start_web_server
from _cli import counts_parser
from _pairs import format_load, load_average, rotation

IDLE_S = 10
# Past the clients' connection start, and before the run ends: the window sampled under load.
LOADED_SKIP_S = 3
LOADED_TAIL_S = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 20 else max(values)


def main() -> None:
    args = counts_parser(
        __doc__, clients=50, duration=20, scale=10, rounds=5, unlimited_rounds=2
    ).parse_args()
    print("before:", format_load(load_average()))
    with bench_cluster("db-under-load", args.scale) as bench:
        measure(args, bench)
    print("after:", format_load(load_average()))


Times = dict[str, list[float]]  # page → answer times (s)


def merged(windows: list[Times]) -> list[float]:
    return [t for window in windows for times in window.values() for t in times]


def round_ratio(idle: Times, loaded: Times) -> float:
    return p95(merged([loaded])) / p95(merged([idle]))


def summary(label: str, ratios: list[float]) -> str:
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    median = statistics.median(ratios)
    verdict = "met" if median <= 2 else "missed"
    return f"{label}: ratio loaded/idle p95 median {median:.2f} (rounds: {shown}); target ≤ 2 {verdict}"


def measure(args: argparse.Namespace, bench: BenchCluster) -> None:
    import psutil
    from django.conf import settings
    from django.test import Client

    from benchmarks import services
    from benchmarks.engine import runner
    from benchmarks.lib.pgbench_command import RunOptions
    from panel.clusters.engine import cgroups, isolation, postgres
    from panel.pools import services as pools
    from panel.pools.engine import supervisor
    from panel.pools.engine.disk import bouncer_files

    cluster, owner = bench.cluster, bench.owner
    limited = bool(isolation.server_cgroup(cluster))
    print(
        f"cgroups: v{cgroups.version()}" if limited else "cgroups: none writable here (phases 2 and 3 alike)"
    )
    port = free_port()
    server = start_web_server(port)
    print(f"web server in cgroup {cgroups.group_of(server.pid, 'cpu') or '?'} (cpu), pid {server.pid}")
    try:
        client = Client()
        client.force_login(owner)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        base = f"http://127.0.0.1:{port}/clusters/{cluster.pk}"
        pages = {
            "overview": f"{base}/",
            "pools": f"{base}/pools/",
            "benchmarks": f"{base}/benchmarks/",
            "insights": f"{base}/insights/",
        }

        def sample(seconds: float) -> Times:
            times: Times = {name: [] for name in pages}
            deadline = time.monotonic() + seconds
            names = list(pages)
            i = 0
            while time.monotonic() < deadline:
                name = names[i % len(names)]
                request = urllib.request.Request(pages[name], headers={"Cookie": cookie})
                started = time.perf_counter()
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
                times[name].append(time.perf_counter() - started)
                i += 1
            return times

        pool = pools.create_pool(
            cluster, "load-pool", "defaultdb", None, "transaction", cluster.pool_connections
        )

        def loaded() -> Times:
            options = RunOptions(clients=args.clients, threads=2, duration_s=args.duration)
            run = services.launch_run(cluster, pool=pool, options=options, enqueue=False)
            worker, outcome = execute_in_background(run)
            time.sleep(LOADED_SKIP_S)
            times = sample(args.duration - LOADED_SKIP_S - LOADED_TAIL_S)
            worker.join()
            done = outcome.get("run")
            cores = getattr(done, "client_cores", None)
            print(
                f"    run: {getattr(done, 'status', '?')}, {getattr(done, 'tps', 0) or 0:.0f} TPS, "
                f"client CPU {'?' if cores is None else f'{cores:.2f}'} cores"
            )
            return times

        def rounds(
            label: str, count: int, load: Callable[[], Times]
        ) -> tuple[list[Times], list[Times], list[float]]:
            idles: list[Times] = []
            loads: list[Times] = []
            ratios: list[float] = []
            for index in range(count):
                got: dict[str, Times] = {}
                for side in rotation(["idle", label], index):
                    got[side] = sample(IDLE_S) if side == "idle" else load()
                idles.append(got["idle"])
                loads.append(got[label])
                ratios.append(round_ratio(got["idle"], got[label]))
                print(
                    f"  {label} round {index + 1}: idle p95 {p95(merged([got['idle']])) * 1000:7.1f} ms, "
                    f"{label} p95 {p95(merged([got[label]])) * 1000:7.1f} ms, ratio {ratios[-1]:.2f}   "
                    f"{format_load(load_average())}"
                )
            return idles, loads, ratios

        def per_page(label: str, windows: list[Times]) -> None:
            shown = "  ".join(
                f"{name} {p95([t for w in windows for t in w[name]]) * 1000:.0f}" for name in pages
            )
            print(f"    {label:9} p95 per page (ms): {shown}  ({len(merged(windows))} pages)")

        sample(3)  # warm the server up
        idle_l, with_limits, limited_ratios = rounds("limited", args.rounds, loaded)

        # As before plan limits: the server (and its backends to come) out of the cluster's group,
        # pgbench started without joining it.
        own = cgroups.own_procs_files()
        for pid in (postgres.postmaster_pid(cluster.pgdata), supervisor.running_pid(bouncer_files(cluster))):
            if limited and own and pid:
                tree = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
                cgroups.add_processes(own, tree)
        original, original_clients = isolation.server_cgroup, runner.client_cgroup
        isolation.server_cgroup = lambda _cluster: []  # type: ignore[assignment]
        runner.client_cgroup = runner.ClientGroup  # type: ignore[assignment]
        try:
            idle_u, without, unlimited_ratios = rounds("unlimited", args.unlimited_rounds, loaded)
        finally:
            isolation.server_cgroup = original  # type: ignore[assignment]
            runner.client_cgroup = original_clients  # type: ignore[assignment]
        print()
        per_page("idle", idle_l + idle_u)
        per_page("limited", with_limits)
        per_page("unlimited", without)
        print()
        print(summary(f"page p95 under {args.clients} clients, limited", limited_ratios))
        if unlimited_ratios:
            print(summary(f"page p95 under {args.clients} clients, unlimited", unlimited_ratios))
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
