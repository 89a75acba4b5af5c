"""What the benchmark perf scripts share: a throw-away cluster with pgbench's tables, and pgbench by hand.

Imported by ``benchmarks.py`` and ``watched_run.py`` (run as scripts, so this directory is on
``sys.path``). Django is set up on the test settings (a private data directory and ports) by
``bench_cluster``; model imports happen inside the functions.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "panel.test_settings"


@dataclass
class BenchCluster:
    owner: Any  # django.contrib.auth.models.User
    cluster: Any  # panel.clusters.models.Cluster
    target: Any  # benchmarks.services.ResolvedTarget: defaultdb, directly


@contextlib.contextmanager
def bench_cluster(name: str, scale: int, plan: str = "db-s-1vcpu-1gb") -> Iterator[BenchCluster]:
    """Migrate the test database, provision cluster ``name`` and initialise pgbench at ``scale``;
    delete the cluster and the test data directory afterwards."""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from benchmarks import services
    from panel.clusters import services as cluster_services

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
    cluster = cluster_services.create_cluster(owner, name=name, plan_slug=plan, enqueue=False)
    cluster = cluster_services.provision_cluster(cluster.pk)
    try:
        if cluster.status != "online":
            sys.exit(f"provisioning failed: {cluster.error_message}")
        dataset = services.execute_init(services.init_dataset(cluster, "defaultdb", scale, enqueue=False).pk)
        print(f"cluster {cluster.name} on port {cluster.port}; data set scale {scale}: {dataset.status}")
        target = services.resolve_target(cluster, pool=None, database="defaultdb", user=None)
        yield BenchCluster(owner=owner, cluster=cluster, target=target)
    finally:
        cluster.refresh_from_db()
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
        data_dir = Path(settings.PANEL_DATA_DIR)
        if data_dir.name.startswith("pgpanel-test-"):
            shutil.rmtree(data_dir, ignore_errors=True)


def hand_command(bench: BenchCluster, options: Any, target: Any = None) -> tuple[list[str], dict[str, str]]:
    """The pgbench command a user would type from the cluster's (or the pool's) Connection details:
    the advertised host and port and the same sslmode (TLS over TCP, as the panel's runs), the same
    options as the runner builds them. ``target``: a ResolvedTarget (default: direct)."""
    from benchmarks.engine import runner
    from benchmarks.lib.pgbench_command import ConnectionTarget, build_env, build_run_args
    from panel.clusters.services.overview import connection_details
    from panel.pools.services.figures import pool_connection_details

    target = target or bench.target
    if target.pool is not None:
        details = pool_connection_details(target.pool, target.connection.user)
    else:
        details = connection_details(
            bench.cluster, user=target.connection.user, database=target.connection.dbname
        )
    where = ConnectionTarget(details.host, details.port, details.user, details.database, details.sslmode)
    command = build_run_args(runner.pgbench_path(bench.cluster.version), where, options)
    return command, build_env(details.password, details.sslmode, base=runner.base_env())


def by_hand(bench: BenchCluster, options: Any, target: Any = None) -> float:
    """The same pgbench run as a plain subprocess outside every cgroup of the panel (in the
    script's own group, as on a user's own machine), from the connection details: its TPS."""
    from benchmarks.lib.pgbench_output import parse_summary

    command, env = hand_command(bench, options, target)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=options.duration_s + 60)
    summary = parse_summary(done.stdout)
    if done.returncode != 0 or summary is None or summary.tps is None:
        sys.exit(f"pgbench by hand failed: {done.stderr[-1000:]}")
    return summary.tps


def execute_in_background(run: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Start executing a launched run on a thread of its own, as a Celery worker would, so that the
    caller measures meanwhile; ``outcome["run"]`` is the finished run once the thread is joined."""
    from django.db import connection

    from benchmarks import services

    outcome: dict[str, Any] = {}

    def execute() -> None:
        try:
            outcome["run"] = services.execute_run(run.pk, wait_turn_s=30)
        finally:
            connection.close()  # the thread's own

    worker = threading.Thread(target=execute)
    worker.start()
    return worker, outcome


def start_web_server(port: int) -> subprocess.Popen[bytes]:
    """The panel's web server as in production, a process of its own reading the same (test)
    database, returned once it accepts connections; the caller terminates it."""
    import socket
    import time

    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", "--insecure", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env={**os.environ, "PANEL_TEST_WORKER": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    return server
