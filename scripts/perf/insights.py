#!/usr/bin/env python3
"""Cost of the Insights collector and of chart queries (prints figures; not a timed test).

    .venv/bin/python scripts/perf/insights.py [--clusters 20] [--rounds 20] [--series 12]

1. One collection of one cluster: time spent waiting on PostgreSQL (and PgBouncer), measured
   with ``time.perf_counter`` around the collector's statements; target < 50 ms. Wall time too.
2. ``collect_all()`` over N clusters on the 1 GB plan (target: 20 within one 15 s cycle).
3. ``series()`` and ``read_series()`` over each chart range (raw points, then 1-minute,
   5-minute, hourly and 4-hour rollups) for a cluster holding 30 days of rollups and 24 hours
   of raw points for several series; target < 300 ms.

It provisions throw-away clusters in a private data directory and removes them at the end.
"""

from __future__ import annotations

import shutil
import statistics
import time

from _cli import counts_parser
from _insights_data import ms, setup_django, store_history


def main() -> None:
    parser = counts_parser(__doc__, clusters=20, rounds=20)
    parser.add_argument("--series", type=int, default=12, help="series with 30 days of history")
    args = parser.parse_args()

    data_dir = setup_django()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.utils import timezone

    from panel.clusters import services as cluster_services
    from panel.insights import services
    from panel.insights.engine import collector

    owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
    clusters = []
    try:
        started = time.monotonic()
        for i in range(args.clusters):
            cluster = cluster_services.create_cluster(
                owner, name=f"db-perf-{i:02d}", plan_slug="db-s-1vcpu-1gb", enqueue=False
            )
            clusters.append(cluster)
            cluster = cluster_services.provision_cluster(cluster.pk)
            assert cluster.status == "online", cluster.error_message
            clusters[-1] = cluster
        print(f"provisioned {len(clusters)} clusters in {time.monotonic() - started:.1f} s")

        # 1. one cluster, repeated
        first = clusters[0]
        target = services.target_for(first)
        collector.collect(target)  # warm: first connection, catalog caches
        db_times, walls = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            snap = collector.collect(target)
            walls.append(time.perf_counter() - t0)
            db_times.append(snap.query_seconds)
            assert snap.up["postgres"], snap.errors
        print(
            f"one collection: database time median {ms(statistics.median(db_times))}, "
            f"max {ms(max(db_times))} (target < 50 ms); wall median {ms(statistics.median(walls))} "
            f"incl. connections and psutil; {len(snap.gauges)} gauges, {len(snap.counters)} counters"
        )
        t0 = time.perf_counter()
        services.store(first, snap)
        print(f"storing one snapshot: {ms(time.perf_counter() - t0)}")

        # 2. every cluster in one cycle
        cycles = []
        for _ in range(3):
            t0 = time.perf_counter()
            snaps = services.collect_all()
            cycles.append(time.perf_counter() - t0)
            down = [k for k, s in snaps.items() if not s.up.get("postgres")]
            assert not down, down
        print(
            f"collect_all over {len(clusters)} clusters ({services.collect_workers()} threads): "
            f"{', '.join(f'{c:.2f} s' for c in cycles)} (target < {settings.PANEL_METRICS_INTERVAL} s)"
        )

        # 3. 30 days of history for one cluster
        names = ["tps", "conn_total", "cpu_percent", "cache_hit_percent", "pool_cl_waiting", "db_size_bytes"]
        series_keys = [(names[i % len(names)], f"db=db{i // len(names)}") for i in range(args.series)]
        print(store_history(first, series_keys, timezone.now()))
        for range_key in ("30d", "7d", "24h", "6h", "1h"):
            one, page = [], []
            start, end = timezone.now() - services.RANGES[range_key], timezone.now()
            for _ in range(5):
                t0 = time.perf_counter()
                result = services.series_for_range(first, *series_keys[0], range_key)
                one.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                services.read_series(first, series_keys, start, end)
                page.append(time.perf_counter() - t0)
            print(
                f"series {range_key:>3}: one series {ms(statistics.median(one))} ({len(result.points)} points, "
                f"{result.resolution}); all {len(series_keys)} series together "
                f"{ms(statistics.median(page))} (target < 300 ms)"
            )
        t0 = time.perf_counter()
        built = services.prune_and_rollup()
        print(f"prune_and_rollup after the generated data: {ms(time.perf_counter() - t0)} {built}")
    finally:
        for cluster in clusters:
            try:
                cluster.refresh_from_db()
                cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
            except Exception as exc:  # keep removing the others
                print(f"could not delete {cluster.name}: {exc}")
        if data_dir.name.startswith("pgpanel-test-"):
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
