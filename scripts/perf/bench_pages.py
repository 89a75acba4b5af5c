"""Server time of a one-hour run's pages: the run page, its HTMX live fragment and its data endpoint
(all samples, and ``?after=`` the last one), for a run of 3,600 one-second samples.

Measured in-process with Django's test Client against a throwaway test database (median of 20);
prints the figures and how they compare with the 100 ms budget. Not a timed test: a report.

    .venv/bin/python scripts/perf/bench_pages.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "panel.test_settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from benchmarks.models import BenchmarkRun, RunSample, RunStatus  # noqa: E402
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Database, DatabaseUser  # noqa: E402

SAMPLES = 3_600
REPEATS = 20
BUDGET_MS = 100.0


def make_run(owner: User, status: str, port: int) -> BenchmarkRun:
    cluster = Cluster.objects.create(
        owner=owner, name=f"db-perf-{status}", kind=ClusterKind.LOCAL, version="15",
        plan_slug="db-s-2vcpu-4gb", status=ClusterStatus.ONLINE, port=port, pooler_port=port + 1,
    )  # fmt: skip
    admin = DatabaseUser(cluster=cluster, name="doadmin", is_protected=True)
    admin.password = "perf-password"
    admin.save()
    Database.objects.create(cluster=cluster, name="defaultdb", is_protected=True)
    now = timezone.now()
    finished = status != RunStatus.RUNNING
    run = BenchmarkRun.objects.create(
        cluster=cluster, database="defaultdb", user="doadmin", clients=50, threads=2, duration_s=SAMPLES,
        script="tpcb-like", options={"progress_interval_s": 1}, status=status,
        command_display="PGPASSWORD=******** pgbench -c 50 -j 2 -T 3600 -P 1 -- defaultdb",
        summary={"tps": 2300.0, "latency_avg_ms": 21.7, "transactions_processed": 8_280_000} if finished else None,
        percentile_sampling_rate=1.0, started_at=now, finished_at=now if finished else None,
    )  # fmt: skip
    RunSample.objects.bulk_create(
        (
            RunSample(
                run=run,
                seq=seq,
                elapsed_s=float(seq),
                tps=2300.0 + seq % 17,
                latency_avg_ms=21.7,
                latency_stddev_ms=7.5,
                failed=0,
                p50_ms=19.0,
                p95_ms=35.0,
                p99_ms=48.0,
                percentile_count=2300,
                received_at=now,
            )  # fmt: skip
            for seq in range(1, SAMPLES + 1)
        ),
        batch_size=900,
    )
    return run


def median_ms(client: Client, url: str, **extra: object) -> tuple[float, int]:
    times = []
    size = 0
    for _ in range(REPEATS + 2):
        start = time.perf_counter()
        response = client.get(url, **extra)
        elapsed = (time.perf_counter() - start) * 1000
        assert response.status_code == 200, (url, response.status_code)
        size = len(response.content)
        times.append(elapsed)
    return statistics.median(times[2:]), size  # the first two warm caches and templates


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        owner = User.objects.create_user("perf", password="perf-password-1")
        client = Client()
        client.force_login(owner)
        rows = []
        for port, status in ((26990, RunStatus.RUNNING), (26992, RunStatus.SUCCEEDED)):
            run = make_run(owner, status, port)
            kwargs = {"cluster_id": run.cluster_id, "run_id": run.pk}
            page = reverse("benchmarks:run-detail", kwargs=kwargs)
            data = reverse("benchmarks:run-samples", kwargs=kwargs)
            rows += [
                (f"{status}: run page", *median_ms(client, page)),
                (f"{status}: live fragment (HTMX)", *median_ms(client, page, headers={"HX-Request": "true"})),
                (f"{status}: data, all {SAMPLES} samples", *median_ms(client, data)),
                (f"{status}: data ?after={SAMPLES - 1}", *median_ms(client, f"{data}?after={SAMPLES - 1}")),
                (f"{status}: data ?after={SAMPLES}", *median_ms(client, f"{data}?after={SAMPLES}")),
            ]
        print(
            f"One-hour run, {SAMPLES} samples; median server time of {REPEATS} requests (Django test Client)"
        )
        print(f"{'request':44} {'ms':>8} {'of budget':>10} {'bytes':>9}")
        for name, ms, size in rows:
            print(f"{name:44} {ms:8.1f} {ms / BUDGET_MS:9.0%} {size:9,}")
        worst = max(ms for _, ms, _ in rows)
        verdict = "within" if worst < BUDGET_MS else "OVER"
        print(f"slowest {worst:.1f} ms: {verdict} the {BUDGET_MS:.0f} ms budget")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
