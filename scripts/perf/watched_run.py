#!/usr/bin/env python3
"""What watching a run costs the run (issues 11 and 30), measured side by side (not a timed test).

Provisions a throw-away db-s-1vcpu-1gb cluster (test settings: private data directory and ports),
initialises pgbench's tables, starts the panel's web server (``manage.py runserver``, a process of
its own as in production) and a headless Chromium (Debian's /usr/bin/chromium via Playwright, never
a downloaded browser), then runs rounds of three, the order rotating round by round:

  hand     the same pgbench run by hand: a subprocess of this script from the cluster's Connection
           details (advertised host and port, sslmode require), outside every cgroup of the panel;
  watched  a run through the panel's service (``services.execute_run``) with its run page open in
           the browser, polling, for the whole run;
  closed   the same with the page closed (the tab on about:blank): what the panel's runner costs.

One tab stays open throughout, as a user keeps the panel open (a tab opened per run would charge
the run a renderer's start-up). One warm-up round first (not counted), then ``--pairs`` rounds
without percentiles and as many with them (the transaction log read live). Prints each round's TPS,
the page's cost while it watched (requests and bytes per second, the web server's and the browser's
CPU per second of run), the load average at each round, and the summaries: "ratio panel/hand
median X (pairs: ...)" for watched and for closed, target ≥ 0.95.

    .venv/bin/python scripts/perf/watched_run.py [--clients 10] [--duration 8] [--scale 10] [--pairs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _bench_setup import BenchCluster, bench_cluster, execute_in_background, start_web_server
from _bench_setup import by_hand as hand_run
from _cli import counts_parser
from _pairs import format_load, load_average, pairs_of, run_rounds

CHROMIUM = "/usr/bin/chromium"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), children it waited for included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (the browser: Playwright's driver and Chromium's processes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # gone meanwhile
            total += cpu_seconds(pid)
    return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = counts_parser(__doc__, clients=10, threads=2, duration=8, scale=10, pairs=5)
    parser.add_argument(
        "--reduced-motion", action="store_true", help="the browser prefers reduced motion (no animated bar)"
    )
    args = parser.parse_args()

    print("before:", format_load(load_average()))
    with bench_cluster("db-watch", args.scale) as bench:
        measure(args, bench)
    print("after:", format_load(load_average()))


def measure(args: argparse.Namespace, bench: BenchCluster) -> None:
    from django.conf import settings
    from django.test import Client
    from django.urls import reverse
    from playwright.sync_api import sync_playwright

    from benchmarks import services
    from benchmarks.lib.pgbench_command import RunOptions

    cluster, owner = bench.cluster, bench.owner
    port = free_port()
    # The web server as in production: a process of its own, reading the same database.
    server = start_web_server(port)
    base = f"http://127.0.0.1:{port}"
    try:
        client = Client()
        client.force_login(owner)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value

        options = RunOptions(clients=args.clients, threads=args.threads, duration_s=args.duration)

        def by_hand() -> float:
            return hand_run(bench, options)

        costs: list[dict[str, float]] = []

        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
            )
            context = browser.new_context(
                viewport={"width": 1400, "height": 900},
                reduced_motion="reduce" if args.reduced_motion else "no-preference",
            )
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base}])

            # One tab for the whole measurement, as a user keeps the panel open: it shows the
            # Benchmarks tab, then each watched run's page (a same-site navigation, as the form's
            # redirect is), which stays open and idle, its run over, while the next hand run goes.
            # A tab opened per run would charge the run a browser renderer's start-up.
            page = context.new_page()
            page.goto(base + reverse("benchmarks:tab", kwargs={"cluster_id": cluster.pk}))
            # The page's own requests are read from its Resource Timing entries after each run: a
            # Playwright event per response would add the driver's work to what the browser costs.
            polls_js = """(since) => performance.getEntriesByType("resource")
                .filter(e => e.name.includes("/benchmarks/runs/"))
                .filter(e => e.startTime >= since)
                .map(e => e.encodedBodySize)"""

            client_cores: list[float] = []

            def through_panel(percentiles: bool, watch: bool) -> float:
                run = services.launch_run(cluster, options=options, percentiles=percentiles, enqueue=False)
                url = reverse("benchmarks:run-detail", kwargs={"cluster_id": cluster.pk, "run_id": run.pk})
                if watch:
                    page.goto(base + url)
                    page.wait_for_selector("#bench-run-live")
                else:
                    page.goto("about:blank")
                since = page.evaluate("performance.now()")  # the page itself is not the polling
                cpu_before = cpu_seconds(server.pid)
                browser_pids = [pid for pid in descendants(os.getpid()) if pid != server.pid]
                browser_before = tree_cpu_seconds(browser_pids)
                started = time.monotonic()
                worker, outcome = execute_in_background(run)
                # The page polls by itself; Python only waits (a Playwright call here would add the
                # driver's round trips to what the browser costs).
                worker.join()
                seconds = time.monotonic() - started
                server_cpu = cpu_seconds(server.pid) - cpu_before
                browser_cpu = tree_cpu_seconds(browser_pids) - browser_before
                if watch:
                    polls = [int(size) for size in page.evaluate(polls_js, since)]
                    costs.append(
                        {
                            "requests_per_s": len(polls) / seconds,
                            "bytes_per_s": sum(polls) / seconds,
                            "server_cpu_per_s": server_cpu / seconds,
                            "browser_cpu_per_s": browser_cpu / seconds,
                        }
                    )
                done = outcome.get("run")
                if done is None or done.status != "succeeded" or done.tps is None:
                    sys.exit(f"panel run failed: {getattr(done, 'error_message', '?')}")
                if done.client_cores is not None:
                    client_cores.append(done.client_cores)
                return float(done.tps)

            def sides(percentiles: bool) -> dict[str, Callable[[], float]]:
                return {
                    "hand": by_hand,
                    "watched": lambda: through_panel(percentiles, watch=True),
                    "closed": lambda: through_panel(percentiles, watch=False),
                }

            warm = {name: run() for name, run in sides(False).items()}
            print("  warm-up (not counted): " + "   ".join(f"{n} {v:8.1f} tps" for n, v in warm.items()))
            costs.clear()
            summaries = []
            for percentiles in (False, True):
                label = "with percentiles" if percentiles else "without percentiles"

                def report(index: int, got: dict[str, float], label: str = label) -> None:
                    cost = costs[-1]
                    print(
                        f"  {label} round {index + 1}: by hand {got['hand']:8.1f} tps"
                        f"   watched {got['watched']:8.1f} ({got['watched'] / got['hand']:.3f})"
                        f"   closed {got['closed']:8.1f} ({got['closed'] / got['hand']:.3f})"
                        f"   page: {cost['requests_per_s']:.2f} req/s, {cost['bytes_per_s']:.0f} B/s,"
                        f" server CPU {cost['server_cpu_per_s'] * 1000:.1f} ms/s,"
                        f" browser CPU {cost['browser_cpu_per_s'] * 1000:.0f} ms/s   {format_load(load_average())}"
                    )

                figures = run_rounds(args.pairs, sides(percentiles), report=report)
                for side in ("watched", "closed"):
                    summaries.append(pairs_of(f"{side} {label}", figures["hand"], figures[side]))
            browser.close()

        print()
        print(f"panel client CPU: median {statistics.median(client_cores):.2f} cores")
        print(
            "page cost while watching (median): "
            f"{statistics.median(c['requests_per_s'] for c in costs):.2f} requests/s, "
            f"{statistics.median(c['bytes_per_s'] for c in costs):.0f} bytes/s, "
            f"server CPU {statistics.median(c['server_cpu_per_s'] for c in costs) * 1000:.1f} ms per s, "
            f"browser CPU {statistics.median(c['browser_cpu_per_s'] for c in costs) * 1000:.0f} ms per s"
        )
        print()
        for pairs in summaries:
            print(pairs.summary_line())
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
