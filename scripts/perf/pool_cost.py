#!/usr/bin/env python3
"""PgBouncer's own cost: pgbench select-only (-S) direct and through three PgBouncer configurations,
interleaved round by round in one run (ratios, not a timed test; not part of ``make test``).

    .venv/bin/python scripts/perf/pool_cost.py                 # 10, 50, 150 clients and -C, 5 × 10 s
    .venv/bin/python scripts/perf/pool_cost.py --quick         # smoke test: 10 clients and -C, 5 × 3 s
    .venv/bin/python scripts/perf/pool_cost.py --clients 10 --churn-clients 0 --rounds 8
    .venv/bin/python scripts/perf/pool_cost.py --explore       # try the candidates for "best"

The variants, each reached by pgbench over TCP on 127.0.0.1 with sslmode=require and SCRAM, as
the panel's connection details say:

  direct  PostgreSQL itself.
  panel   the panel's transaction pool, made with ``panel.pools.services.create_pool``: its
          pgbouncer.ini is exactly what the panel writes (``panel.pools.engine.rendering``).
  hand    a minimal pgbouncer.ini a person would write: the server at 127.0.0.1 over TCP (with
          TLS, since the clusters' pg_hba.conf takes TCP clients over TLS only), PgBouncer's
          defaults for everything else.
  best    the fastest configuration found by ``--explore`` on this machine (see BEST below).

Every pooled variant serves the same database with the same pool size and runs as the cluster's
OS user in the cluster's cgroup, as the panel's PgBouncer does. In each round every variant runs
once, in an order rotated by one each round. Per scenario the script prints each variant's median
TPS with its min–max and IQR, then ratios computed round by round (a round's figures were taken
minutes apart under the same load) and a verdict line; where the rounds disagree it says the
spread is too wide to conclude instead of naming a winner.

It provisions a throw-away cluster (plan db-s-4vcpu-8gb by default: max_connections 200, so 150
direct clients can connect and the CPU quota of 4 vCPUs does not bind on this 2-core machine) in a
private data directory, and removes it at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA_DIR = tempfile.mkdtemp(prefix="pgpanel-cost-", dir="/tmp")
os.chmod(DATA_DIR, 0o711)  # the data directory's mode (panel/files.py)
os.environ["PANEL_DATA_DIR"] = DATA_DIR
os.environ.setdefault("PANEL_PORT_RANGE", "27400-27599")
os.environ.pop("DATABASE_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "panel.settings"

import django  # noqa: E402
import psutil  # noqa: E402

django.setup()

from _interleaved import rotation  # noqa: E402
from _pool_cost_configs import BEST_PROCESSES, BEST_SETTINGS, CANDIDATES, HAND, SOCKET_BASE  # noqa: E402
from _pool_cost_report import REFUSED, Results, Run, Scenario, report  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402

from panel.clusters import services as cluster_services  # noqa: E402
from panel.clusters.engine import isolation  # noqa: E402
from panel.clusters.models import Cluster  # noqa: E402
from panel.pools import services  # noqa: E402
from panel.pools.engine import disk, supervisor  # noqa: E402
from panel.pools.lib.authfile import parse_auth_file, render_auth_file  # noqa: E402

PGBENCH = shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"
# "(without initial connection time)", or "(including reconnection times)" with -C.
TPS_RE = re.compile(r"^tps = ([0-9.]+) \(", re.MULTILINE)
# What PostgreSQL says when the clients exceed its connection slots.
REFUSED_RE = re.compile(r"too many clients|remaining connection slots are reserved")
DONE_RE = re.compile(r"^number of transactions actually processed: (\d+)", re.MULTILINE)
POOL_DB = "defaultdb"
SETTLE_S = 0.3

# --- the variants ------------------------------------------------------------------------------


# Every PgBouncer this script started (or tried to), stopped at the end whatever happened.
STARTED: list[disk.BouncerFiles] = []


@dataclass
class Variant:
    name: str
    port: int
    dbname: str
    # The PgBouncer processes' files (none for direct): their CPU time is PgBouncer's own cost.
    bouncers: tuple[disk.BouncerFiles, ...] = ()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hand_written_bouncer(
    cluster: Cluster,
    name: str,
    template: str,
    pool_size: int,
    processes: int = 1,
    extra: dict[str, str] | None = None,
) -> Variant:
    """A PgBouncer of our own on ``template`` (``processes`` of them on one port with so_reuseport),
    as the cluster's OS user in the cluster's cgroup, with the panel's certificate and secrets."""
    port = free_port()
    bouncers = []
    secrets = parse_auth_file(disk.bouncer_files(cluster).auth.read_text())
    user = cluster_services.connection_details(cluster).user
    for index in range(processes):
        directory = Path(DATA_DIR) / f"{name}-{index}"
        files = disk.BouncerFiles(directory, directory, port, cluster.os_user_name)
        disk.prepare_directory(files)
        disk.copy_private(files, cluster.pgdata / "server.crt", files.tls_cert)
        disk.copy_private(files, cluster.pgdata / "server.key", files.tls_key)
        ini = template.format(
            name=name,
            dbname=POOL_DB,
            # Each process has its own pool: together they hold pool_size server connections.
            pool_size=max(1, math.ceil(pool_size / processes)),
            server_port=cluster.port,
            server_socket_dir=cluster.socket_dir,
            port=port,
            socket_dir=directory,
            pidfile=files.pidfile,
            logfile=files.logfile,
            auth_file=files.auth,
            tls_key=files.tls_key,
            tls_cert=files.tls_cert,
        )
        ini += "".join(f"{key} = {value}\n" for key, value in (extra or {}).items())
        disk.install(files, ini, render_auth_file({user: secrets[user]}))
        STARTED.append(files)
        supervisor.start(files, fds_needed=1200, join=isolation.server_cgroup(cluster))
        bouncers.append(files)
    return Variant(name, port, name, tuple(bouncers))


# --- pgbench -----------------------------------------------------------------------------------


def _cpu_seconds(process: psutil.Process, *, children: bool = False) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    total = times.user + times.system
    if children:  # backends that exited were reaped by the postmaster: their time is its children's
        total += times.children_user + times.children_system
    return total


def server_cpu(cluster: Cluster) -> float:
    """CPU seconds used so far by the cluster's postmaster, its live children and the reaped ones."""
    try:
        postmaster = psutil.Process(int((cluster.pgdata / "postmaster.pid").read_text().split()[0]))
        kids = postmaster.children()
    except (OSError, ValueError, psutil.Error):
        return 0.0
    return _cpu_seconds(postmaster, children=True) + sum(_cpu_seconds(kid) for kid in kids)


def bouncer_cpu(variant: Variant) -> float:
    pids = [supervisor.running_pid(files) for files in variant.bouncers]
    return sum(_cpu_seconds(psutil.Process(pid)) for pid in pids if pid is not None)


def pgbench(cluster: Cluster, variant: Variant, scenario: Scenario, seconds: int, jobs: int) -> Run | None:
    """One run, or None when it did not run (the reason is printed; a refusal by the server for
    want of connection slots is also recorded in REFUSED)."""
    details = cluster_services.connection_details(cluster)
    env = dict(os.environ, PGPASSWORD=details.password, PGSSLMODE="require")
    command = [PGBENCH, "-h", "127.0.0.1", "-p", str(variant.port), "-U", details.user, "-n", "-S"]
    command += ["-c", str(scenario.clients), "-j", str(min(jobs, scenario.clients)), "-T", str(seconds)]
    if scenario.churn:
        command.append("-C")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before, bouncer_before = server_cpu(cluster), bouncer_cpu(variant)
    result = subprocess.run(
        [*command, variant.dbname], env=env, capture_output=True, text=True, timeout=seconds + 120
    )
    # Backends that end with pgbench count once the postmaster has reaped them: give it a moment.
    time.sleep(SETTLE_S)
    server_used, bouncer_used = server_cpu(cluster) - server_before, bouncer_cpu(variant) - bouncer_before
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    pgbench_used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tps, done = TPS_RE.search(result.stdout), DONE_RE.search(result.stdout)
    if result.returncode == 0 and done is not None and int(done.group(1)) == 0:
        print(
            f"      {variant.name}: no transaction within {seconds} s (connecting took the whole run: "
            "the machine is too busy for this --seconds)",
            flush=True,
        )
        return None
    if result.returncode != 0 or tps is None or done is None:
        said = [line for line in result.stderr.splitlines() if line.strip()][-1:] or [
            f"exit {result.returncode}"
        ]
        if REFUSED_RE.search(result.stderr):
            REFUSED.add((scenario, variant.name))
        print(f"      {variant.name}: pgbench did not run: {said[0]}", flush=True)
        return None
    transactions = int(done.group(1))
    return Run(
        tps=float(tps.group(1)),
        cpu_us=(pgbench_used + server_used + bouncer_used) * 1e6 / transactions,
        bouncer_us=bouncer_used * 1e6 / transactions,
    )


def measure(
    cluster: Cluster, variants: list[Variant], scenario: Scenario, rounds: int, seconds: int, jobs: int
) -> Results:
    runs: Results = {v.name: [None] * rounds for v in variants}
    by_name = {v.name: v for v in variants}
    print(f"\n== {scenario.label}: {rounds} rounds × {seconds} s, order rotated each round", flush=True)
    for round_index in range(rounds):
        shown = []
        for name in rotation(list(by_name), round_index):
            runs[name][round_index] = run = pgbench(cluster, by_name[name], scenario, seconds, jobs)
            shown.append(f"{name} {run.tps:,.0f} ({run.cpu_us:,.0f} µs)" if run else f"{name} —")
        print(f"   round {round_index + 1} (TPS, CPU per transaction): " + ", ".join(shown), flush=True)
    return runs


# --- the run -----------------------------------------------------------------------------------


def provision(owner: User, plan: str) -> Cluster:
    cluster = cluster_services.create_cluster(owner, name="pool-cost", plan_slug=plan, enqueue=False)
    cluster = cluster_services.provision_cluster(cluster.pk)
    if cluster.status != "online":
        raise SystemExit(f"provisioning failed: {cluster.error_message}")
    return cluster


def init_pgbench(cluster: Cluster, scale: int) -> None:
    details = cluster_services.connection_details(cluster)
    subprocess.run(
        [PGBENCH, "-i", "-q", "-s", str(scale), "-h", "127.0.0.1", "-p", str(cluster.port)]
        + ["-U", details.user, POOL_DB],
        env=dict(os.environ, PGPASSWORD=details.password, PGSSLMODE="require"),
        check=True,
        capture_output=True,
        timeout=600,
    )


def variants_for(cluster: Cluster, wanted: list[str], pool_size: int, explore: bool) -> list[Variant]:
    variants = []
    if "direct" in wanted:
        variants.append(Variant("direct", int(cluster.port or 0), POOL_DB))
    # The panel's pool always exists: the others copy its secrets from the panel's auth file.
    services.create_pool(cluster, "panel", POOL_DB, "", "transaction", pool_size)
    if "panel" in wanted:
        variants.append(
            Variant("panel", int(cluster.pooler_port or 0), "panel", (disk.bouncer_files(cluster),))
        )
    if "hand" in wanted:
        variants.append(hand_written_bouncer(cluster, "hand", HAND, pool_size))
    if explore:
        for name, (extra, processes) in CANDIDATES.items():
            variants.append(hand_written_bouncer(cluster, name, SOCKET_BASE, pool_size, processes, extra))
    elif "best" in wanted:
        variants.append(
            hand_written_bouncer(cluster, "best", SOCKET_BASE, pool_size, BEST_PROCESSES, BEST_SETTINGS)
        )
    return variants


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each running every variant once (5)")
    parser.add_argument("--seconds", type=int, default=10, help="length of one pgbench run (10)")
    parser.add_argument("--clients", default="10,50,150", help="client counts, comma-separated (10,50,150)")
    parser.add_argument(
        "--churn-clients", type=int, default=10, help="clients of the -C scenario; 0 skips it (10)"
    )
    parser.add_argument("--pool-size", type=int, default=10, help="server connections of every pool (10)")
    parser.add_argument("--variants", default="direct,panel,hand,best", help="which variants (all four)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="pgbench -j (the cores)")
    parser.add_argument("--scale", type=int, default=10, help="pgbench -i scale (10)")
    parser.add_argument("--plan", default="db-s-4vcpu-8gb", help="the cluster's plan")
    parser.add_argument("--quick", action="store_true", help="smoke test: 5 rounds × 3 s, 10 clients and -C")
    parser.add_argument(
        "--explore", action="store_true", help="run the candidate configurations for 'best' instead of it"
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.clients = 5, 3, "10"
    args.client_counts = [int(c) for c in args.clients.split(",") if c.strip()]
    args.variant_names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = set(args.variant_names) - {"direct", "panel", "hand", "best"}
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    if args.rounds < 1 or args.seconds < 1:
        parser.error("--rounds and --seconds must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    try:
        run(args)
    finally:
        shutil.rmtree(DATA_DIR, ignore_errors=True)


def run(args: argparse.Namespace) -> None:
    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
    started = time.monotonic()
    cluster = provision(owner, args.plan)
    try:
        init_pgbench(cluster, args.scale)
        variants = variants_for(cluster, args.variant_names, args.pool_size, args.explore)
        print(
            f"cluster on port {cluster.port} (plan {args.plan}, max_connections {cluster.max_connections}); "
            f"pgbench -S scale {args.scale}, -j {args.jobs}; pool size {args.pool_size}; "
            f"{os.cpu_count()} cores; variants: {', '.join(v.name for v in variants)}",
            flush=True,
        )
        scenarios = [Scenario(c, False) for c in args.client_counts]
        if args.churn_clients:
            scenarios.append(Scenario(args.churn_clients, True))
        results = [
            (s, measure(cluster, variants, s, args.rounds, args.seconds, args.jobs)) for s in scenarios
        ]
        print("\n" + "=" * 100)
        print(
            f"PgBouncer's own cost: pgbench -S, {args.rounds} interleaved rounds × {args.seconds} s, "
            f"pool size {args.pool_size}, {os.cpu_count()} cores. Ratios are per round, then the median;\n"
            "a verdict is stated only when every round (at least 3) agrees. CPU per transaction counts "
            "pgbench, the server and PgBouncer,\nso it moves less than TPS when other processes load the "
            "machine; in the CPU verdicts the ratio is the other's CPU ÷ the panel's (above 1: the panel "
            "spends less)."
        )
        for scenario, runs in results:
            print()
            report(scenario, runs)
        print(f"\n(took {time.monotonic() - started:.0f} s)")
    finally:
        for files in STARTED:
            supervisor.stop(files)
        services.stop_pgbouncer(cluster)
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)


if __name__ == "__main__":
    main()
