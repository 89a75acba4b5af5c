"""The quota cycle's cost: the database time of one measurement (the issue's target: at most
20 ms per cluster per cycle with 1,000 relations), next to the same measurement on an empty
cluster, on one throw-away cluster in one run.

    .venv/bin/python scripts/perf/quotas.py [--relations 1000] [--rounds 15]

Prints the median and the worst database time of ``--rounds`` measurements with the relations,
and the ratio to the empty cluster's median measured in the same run (the machine is shared:
compare within a run). Database time is the servers' queries as the client sees them, without
connecting; the whole cycle (connections, judging, writing) is printed beside it.
"""

from __future__ import annotations

import statistics
import sys
import time

from _bench_setup import bench_cluster
from _cli import counts_parser


def measure(cluster, rounds: int) -> tuple[list[float], list[float]]:
    from panel.quotas.services.measure import measure as read

    databases = list(cluster.databases.values_list("name", flat=True))
    database_ms, wall_ms = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        usage = read(cluster, databases)
        wall_ms.append((time.perf_counter() - started) * 1000)
        database_ms.append(usage.database_ms)
    return database_ms, wall_ms


def main() -> None:
    args = counts_parser(__doc__, relations=1000, rounds=15).parse_args()
    with bench_cluster("perf-quotas", scale=1) as bench:
        import psycopg

        from panel.clusters import services as cluster_services
        from panel.quotas import services as quotas

        cluster = bench.cluster
        empty_db, _ = measure(cluster, args.rounds)
        uri = cluster_services.connection_details(cluster).uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            # A table with an index and a sequence is 4 relations (its TOAST and TOAST index too:
            # counted in space, not as relations), so relations/3 tables give about that many.
            for i in range(args.relations // 3):
                conn.execute(f"CREATE TABLE perf_{i} (id serial PRIMARY KEY, note text)")
            count = conn.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
            ).fetchone()[0]
        full_db, full_wall = measure(cluster, args.rounds)
        started = time.perf_counter()
        quotas.set_quota(cluster, "database", "defaultdb", space_hard="10G")
        cycle_ms = (time.perf_counter() - started) * 1000
        print(f"relations in defaultdb (tenant's, TOAST aside): {count}")
        print(
            f"database time per measurement: median {statistics.median(full_db):.1f} ms, "
            f"worst {max(full_db):.1f} ms (target <= 20 ms); whole measurement with connections: "
            f"median {statistics.median(full_wall):.1f} ms"
        )
        print(
            f"empty cluster, same run: median {statistics.median(empty_db):.1f} ms; "
            f"ratio {statistics.median(full_db) / max(statistics.median(empty_db), 0.001):.1f}x"
        )
        print(
            f"a quota set and its first cycle (measure, judge, write quota.conf, reload): {cycle_ms:.0f} ms"
        )
        if statistics.median(full_db) > 20:
            sys.exit(1)


if __name__ == "__main__":
    main()
