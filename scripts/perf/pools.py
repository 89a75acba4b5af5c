#!/usr/bin/env python3
"""Performance of connection pools, measured side by side in one run (ratios, not a timed test).

    .venv/bin/python scripts/perf/pools.py

1. A new pool is usable through PgBouncer < 1 s after create_pool returns (median of 20).
2. Render + validate + write + RELOAD + verify of 500 pools < 2 s (a 64 GB-plan cluster: 997 for pools).

PgBouncer's own cost (direct vs the panel's pool vs hand-written vs best, interleaved over rounds)
is measured by scripts/perf/pool_cost.py.

It provisions a throw-away cluster in a private data directory and removes it at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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
from panel.pools import services  # noqa: E402
from panel.pools.engine import apply, disk, rendering  # noqa: E402
from panel.pools.lib.pgbouncer_ini import PoolSpec, render  # noqa: E402
from panel.pools.models import ConnectionPool  # noqa: E402


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
        render(rendering.global_settings(cluster, files), rendering.server_target(cluster), specs)
        render_only.append(time.perf_counter() - started)
    print(
        f"2. 500 pools: render+validate+write+RELOAD+verify {statistics.median(timings) * 1000:.0f} ms "
        f"(median of 5; render+validate alone {statistics.median(render_only) * 1000:.1f} ms; target < 2000 ms)"
    )
    ConnectionPool.objects.filter(cluster=cluster).delete()
    apply.apply_config(cluster)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args()
    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
    cluster = provision(owner, "perf-pools", "db-s-16vcpu-64gb")
    try:
        usable_after_create(cluster)
        five_hundred_pools(cluster)
    finally:
        services.stop_pgbouncer(cluster)
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
        shutil.rmtree(DATA_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
