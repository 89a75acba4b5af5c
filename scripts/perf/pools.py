#!/usr/bin/env python3
"""Performance of connection pools, measured side by side in one run (ratios, not a timed test).

    .venv/bin/python scripts/perf/pools.py [--seconds 10] [--rounds 2]

1. A new pool is usable through PgBouncer < 1 s after create_pool returns (median of 20).
2. Render + validate + write + RELOAD + verify of 500 pools < 2 s (a 64 GB-plan cluster: 997 for pools).
3. PgBouncer's own cost: select-only pgbench, 10 clients, direct vs through the panel's transaction
   pool vs a plain hand-written configuration (TCP + TLS to the server, default buffers: the anchor).

It provisions a throw-away cluster in a private data directory and removes it at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DATA_DIR = tempfile.mkdtemp(prefix="pgpanel-perf-", dir="/tmp")
os.chmod(DATA_DIR, 0o711)  # the data directory's mode (panel/files.py)
os.environ["PANEL_DATA_DIR"] = DATA_DIR
os.environ.setdefault("PANEL_PORT_RANGE", "27000-27199")
os.environ.pop("DATABASE_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "panel.settings"

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402

from panel.clusters import services as cluster_services  # noqa: E402
from panel.clusters.models import Cluster  # noqa: E402
from panel.pools import apply, config, disk, services, supervisor  # noqa: E402
from panel.pools.lib.authfile import parse_auth_file, render_auth_file  # noqa: E402
from panel.pools.lib.pgbouncer_ini import GlobalSettings, PoolSpec, ServerTarget, render  # noqa: E402
from panel.pools.models import ConnectionPool  # noqa: E402

PGBENCH = shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"
TPS_RE = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")


def provision(owner: User, name: str, plan: str) -> Cluster:
    cluster = cluster_services.create_cluster(owner, name=name, plan_slug=plan, enqueue=False)
    cluster = cluster_services.provision_cluster(cluster.pk)
    if cluster.status != "online":
        raise SystemExit(f"provisioning failed: {cluster.error_message}")
    return cluster


def usable_after_create(cluster: Cluster, count: int = 20) -> None:
    waits, creates = [], []
    for i in range(count):
        started = time.perf_counter()
        pool = services.create_pool(cluster, f"fresh-{i}", "defaultdb", "", "transaction", 1)
        returned = time.perf_counter()
        uri = services.pool_connection_details(pool).uri()
        while True:
            try:
                with psycopg.connect(uri, connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                time.sleep(0.005)
        usable = time.perf_counter()
        creates.append(returned - started)
        waits.append(usable - returned)
    ConnectionPool.objects.filter(cluster=cluster, name__startswith="fresh-").delete()
    apply.apply_config(cluster)
    print(
        f"1. create_pool returns in {statistics.median(creates) * 1000:.0f} ms (median of {count}); "
        f"the pool answers a query {statistics.median(waits) * 1000:.0f} ms later "
        f"(median; max {max(waits) * 1000:.0f} ms; target < 1000 ms, this includes a TLS+SCRAM login)"
    )


def five_hundred_pools(cluster: Cluster) -> None:
    ConnectionPool.objects.bulk_create(
        ConnectionPool(cluster=cluster, name=f"p{i:03d}", database="defaultdb", mode="transaction", size=1)
        for i in range(500)
    )
    apply.apply_config(cluster)  # the first apply starts PgBouncer; what follows are RELOADs
    timings, render_only = [], []
    for round_ in range(5):
        ConnectionPool.objects.filter(cluster=cluster, name="p000").update(size=1 + round_ % 2)
        started = time.perf_counter()
        apply.apply_config(cluster)
        timings.append(time.perf_counter() - started)
        specs = [PoolSpec(p.name, p.database, None, p.mode, p.size) for p in cluster.pools.all()]
        files = disk.bouncer_files(cluster)
        started = time.perf_counter()
        render(config.global_settings(cluster, files), config.server_target(cluster), specs)
        render_only.append(time.perf_counter() - started)
    print(
        f"2. 500 pools: render+validate+write+RELOAD+verify {statistics.median(timings) * 1000:.0f} ms "
        f"(median of 5; render+validate alone {statistics.median(render_only) * 1000:.1f} ms; target < 2000 ms)"
    )
    ConnectionPool.objects.filter(cluster=cluster).delete()
    apply.apply_config(cluster)


def pgbench(cluster: Cluster, port: int, dbname: str, seconds: int) -> float:
    details = cluster_services.connection_details(cluster)
    env = dict(os.environ, PGPASSWORD=details.password, PGSSLMODE="require")
    command = [PGBENCH, "-h", "127.0.0.1", "-p", str(port), "-U", details.user]
    command += ["-S", "-c", "10", "-j", "2", "-T", str(seconds), dbname]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds + 60)
    match = TPS_RE.search(result.stdout)
    if result.returncode != 0 or match is None or "aborted" in result.stdout:
        raise SystemExit(f"pgbench failed ({result.returncode}): {result.stderr[-800:]}")
    return float(match.group(1))


def anchor_bouncer(cluster: Cluster) -> disk.BouncerFiles:
    """A hand-written configuration: server over TCP with TLS, PgBouncer's default buffers."""
    directory = Path(DATA_DIR) / "anchor"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    files = disk.BouncerFiles(directory, directory, port)
    disk.prepare_directory(files)
    panel_files = disk.bouncer_files(cluster)
    for source, target in ((panel_files.tls_cert, files.tls_cert), (panel_files.tls_key, files.tls_key)):
        disk.copy_private(files, source, target)
    # The panel's file paths, but PgBouncer's plain listen_addr and max_client_conn.
    settings = dataclasses.replace(
        config.global_settings(cluster, files),
        listen_addr=GlobalSettings.listen_addr,
        max_client_conn=GlobalSettings.max_client_conn,
    )
    target = ServerTarget("127.0.0.1", int(cluster.port or 0))  # TCP + TLS (server_tls_sslmode=require)
    ini = render(settings, target, [PoolSpec("anchor", "defaultdb", None, "transaction", 10)])
    auth = render_auth_file(_secrets(cluster))  # the same secrets as the panel's
    disk.install(files, ini, auth)
    supervisor.start(files, fds_needed=1200)
    return files


def _secrets(cluster: Cluster) -> dict[str, str]:
    return parse_auth_file(disk.bouncer_files(cluster).auth.read_text())


def pgbouncer_cost(cluster: Cluster, seconds: int, rounds: int) -> None:
    pgbench_init = [PGBENCH, "-i", "-s", "10", "-q", "-h", "127.0.0.1", "-p", str(cluster.port)]
    details = cluster_services.connection_details(cluster)
    subprocess.run(
        [*pgbench_init, "-U", details.user, "defaultdb"],
        env=dict(os.environ, PGPASSWORD=details.password, PGSSLMODE="require"),
        check=True,
        capture_output=True,
        timeout=300,
    )
    services.create_pool(cluster, "bench", "defaultdb", "", "transaction", 10)
    anchor = anchor_bouncer(cluster)
    runs: dict[str, list[float]] = {"direct": [], "panel pool": [], "anchor": []}
    try:
        for _round in range(rounds):
            runs["direct"].append(pgbench(cluster, int(cluster.port or 0), "defaultdb", seconds))
            runs["panel pool"].append(pgbench(cluster, int(cluster.pooler_port or 0), "bench", seconds))
            runs["anchor"].append(pgbench(cluster, anchor.port, "anchor", seconds))
    finally:
        supervisor.stop(anchor)
    direct = statistics.median(runs["direct"])
    print(f"3. select-only pgbench, 10 clients, {seconds} s × {rounds} rounds (TPS, median):")
    for name, values in runs.items():
        tps = statistics.median(values)
        cost = "" if name == "direct" else f"  cost {100 * (1 - tps / direct):5.1f} % of direct TPS"
        shown = ", ".join(f"{v:.0f}" for v in values)
        print(f"   {name:<11} {tps:8.0f}{cost}   (runs: {shown})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
    cluster = provision(owner, "perf-pools", "db-s-16vcpu-64gb")
    try:
        usable_after_create(cluster)
        five_hundred_pools(cluster)
        pgbouncer_cost(cluster, args.seconds, args.rounds)
    finally:
        services.stop_pgbouncer(cluster)
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
        shutil.rmtree(DATA_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
