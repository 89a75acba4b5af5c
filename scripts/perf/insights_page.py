#!/usr/bin/env python3
"""Server time of the Insights tab and of its JSON for a cluster with 30 days of history (prints
figures; not a timed test).

    .venv/bin/python scripts/perf/insights_page.py [--dbs 3] [--pools 2] [--rounds 10]

Stores, for every series the tab charts (per database, per state, per pool, host figures), 30 days
of 5-minute rollups with their hourly and 4-hour merges, and 24 hours of raw points every 15 s
with their 1-minute rollups, as a cluster that has been collected for a month holds; then asks for
the page and for the data of each range through Django's test Client in-process, accepting gzip
as a browser does (sizes are as sent). Targets (medians): the page and the 30- and 7-day data under 100 ms (issue 12), the shorter
windows under 300 ms.
"""

from __future__ import annotations

import shutil
import statistics
import time

from _cli import counts_parser
from _insights_data import ms, setup_django, store_history

TARGETS = {"page": 100, "data 30d": 100, "data 7d": 100}  # ms, median; 300 for the others


def main() -> None:
    args = counts_parser(__doc__, dbs=3, pools=2, rounds=10).parse_args()

    data_dir = setup_django()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from panel.clusters.tests.conftest import make_cluster_row

    settings.ALLOWED_HOSTS = ["*"]
    try:
        owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
        cluster = make_cluster_row(owner, name="db-perf-insights", plan_slug="db-s-1vcpu-1gb")
        dbs = [f"db=db{i}" for i in range(args.dbs)]
        pools = [f"pool=pool-{i}" for i in range(args.pools)]
        series: list[tuple[str, str]] = []
        for name in (
            "tps", "cache_hit_percent", "tup_inserted_ps", "tup_updated_ps", "tup_deleted_ps",
            "tup_fetched_ps", "seq_scan_ps", "idx_scan_ps", "deadlocks_ps", "temp_bytes_ps", "db_size_bytes",
        ):  # fmt: skip
            series += [(name, db) for db in dbs]
        series += [
            ("conn_state", f"state={s}") for s in ("active", "idle", "idle_in_transaction", "waiting_lock")
        ]
        series += [(name, "") for name in ("max_connections", "cpu_percent", "memory_bytes", "load1")]
        series += [(name, "") for name in ("load5", "load15", "disk_percent")]
        for pool in pools:
            series += [(name, pool) for name in ("pool_cl_waiting", "pool_sv_active", "pool_size")]
        print(store_history(cluster, series, timezone.now()))

        client = Client()
        client.force_login(owner)
        tab = reverse("insights:tab", kwargs={"cluster_id": cluster.pk})
        data = reverse("insights:data", kwargs={"cluster_id": cluster.pk})
        cases = [("page", tab, {"range": "30d"})]
        cases += [(f"data {key}", data, {"range": key}) for key in ("30d", "7d", "24h", "6h", "1h")]
        for name, url, params in cases:
            client.get(url, params, headers={"accept-encoding": "gzip"})  # warm: templates, caches
            times, size = [], 0
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                response = client.get(url, params, headers={"accept-encoding": "gzip"})
                times.append(time.perf_counter() - t0)
                assert response.status_code == 200, response.status_code
                size = len(response.content)
            print(
                f"{name:>9}: median {ms(statistics.median(times))}, max {ms(max(times))}, "
                f"{size / 1024:.0f} KiB (target < {TARGETS.get(name, 300)} ms)"
            )
    finally:
        if data_dir.name.startswith("pgpanel-test-"):
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
