#!/usr/bin/env python3
"""What a tenant's benchmark does to the panel's own pages, with plan limits and without (issue 13).

Provisions a 1 GB / 1 vCPU cluster (test settings: private data directory and ports) with
pgbench's tables, starts the panel's web server (``manage.py runserver``, a process of its own),
and requests four of the cluster's pages in turn (overview, pools, benchmarks, insights) as a
logged-in user, measuring each answer:

  1. idle: no load;
  2. limited: a 50-client pgbench run launched through the panel, through a transaction pool of 22
     (the plan's whole budget: 50 clients direct would be refused), the server and PgBouncer in
     the cluster's cgroup (its plan's memory and one core, at a lower CPU weight), pgbench in the
     node's clients' cgroup (its own memory limit, no quota, a weight below the panel's);
  3. unlimited: the same run with the server, PgBouncer and pgbench out of every cgroup, as before
     plan limits were enforced.

Prints the p95 of each phase and the ratios loaded/idle side by side (the target: limited ≤ 2×).
Needs root and a writable cgroup hierarchy for phase 2 to differ from 3. The machine may be
shared: the load (``uptime``) is printed before and after.

    .venv/bin/python scripts/perf/panel_under_load.py [--clients 50] [--duration 20] [--scale 10]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import threading
import time
import urllib.request

from _bench_setup import BenchCluster, bench_cluster, start_web_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 20 else max(values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--scale", type=int, default=10)
    args = parser.parse_args()
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with bench_cluster("db-under-load", args.scale) as bench:
        measure(args, bench)
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


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
    try:
        client = Client()
        client.force_login(owner)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        base = f"http://127.0.0.1:{port}/clusters/{cluster.pk}"
        pages = [f"{base}/", f"{base}/pools/", f"{base}/benchmarks/", f"{base}/insights/"]

        def sample(seconds: float) -> list[float]:
            times: list[float] = []
            deadline = time.monotonic() + seconds
            i = 0
            while time.monotonic() < deadline:
                request = urllib.request.Request(pages[i % len(pages)], headers={"Cookie": cookie})
                started = time.perf_counter()
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
                times.append(time.perf_counter() - started)
                i += 1
            return times

        pool = pools.create_pool(
            cluster, "load-pool", "defaultdb", None, "transaction", cluster.pool_connections
        )

        def loaded() -> list[float]:
            options = RunOptions(clients=args.clients, threads=2, duration_s=args.duration)
            run = services.launch_run(cluster, pool=pool, options=options, enqueue=False)
            outcome: dict[str, object] = {}

            def execute() -> None:
                from django.db import connection

                try:
                    outcome["run"] = services.execute_run(run.pk, wait_turn_s=30)
                finally:
                    connection.close()

            worker = threading.Thread(target=execute)
            worker.start()
            time.sleep(3)  # past the clients' connection start
            times = sample(args.duration - 5)
            worker.join()
            done = outcome.get("run")
            print(f"    run: {getattr(done, 'status', '?')}, {getattr(done, 'tps', 0) or 0:.0f} TPS")
            return times

        sample(3)  # warm the server up
        idle = sample(15)
        print(
            f"1. idle       p95 {p95(idle) * 1000:7.1f} ms  (median {statistics.median(idle) * 1000:.1f} ms, {len(idle)} pages)"
        )
        with_limits = loaded()
        print(f"2. limited    p95 {p95(with_limits) * 1000:7.1f} ms  ({len(with_limits)} pages)")

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
            without = loaded()
        finally:
            isolation.server_cgroup = original  # type: ignore[assignment]
            runner.client_cgroup = original_clients  # type: ignore[assignment]
        print(f"3. unlimited  p95 {p95(without) * 1000:7.1f} ms  ({len(without)} pages)")
        print()
        print(
            f"page p95 under {args.clients} clients / idle: limited {p95(with_limits) / p95(idle):.2f}× "
            f"(target ≤ 2), unlimited {p95(without) / p95(idle):.2f}×"
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
