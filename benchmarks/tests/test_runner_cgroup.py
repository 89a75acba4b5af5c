"""The client off the server's plan (issue 30): a run's pgbench, executed by a real Celery worker,
runs in the node's clients' cgroup (its own memory limit, no CPU quota, a CPU weight below the
panel's processes), not in the cluster's cgroup, as the bench user; the run records where it ran
and its CPU time."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings

from benchmarks import services
from benchmarks.engine import runner
from benchmarks.lib.pgbench_command import RunOptions
from benchmarks.models import JobStatus, RunStatus
from panel.clusters.engine import cgroups
from panel.clusters.models import Cluster

pytestmark = pytest.mark.integration


def test_a_runs_pgbench_is_in_the_clients_group_not_the_servers(
    local_cluster: Cluster, celery_worker: None, wait_until: Callable[..., object]
) -> None:
    # The tests run as root on a machine with cgroups (v1 or v2): the limits are enforced here.
    assert os.geteuid() == 0 and cgroups.version() is not None
    dataset = services.execute_init(services.init_dataset(local_cluster, "defaultdb", 1, enqueue=False).pk)
    assert dataset.status == JobStatus.SUCCEEDED, dataset.error_message
    run = services.launch_run(local_cluster, options=RunOptions(clients=2, threads=1, duration_s=4))

    def started() -> bool:
        run.refresh_from_db()
        return bool(run.pgbench_pid) and run.samples.exists()

    wait_until(started, timeout=40, message="pgbench running")
    pid = run.pgbench_pid
    assert pid is not None and runner.is_pgbench(pid)
    assert run.worker_pid != os.getpid()  # executed by the worker, not by this process
    controller = "memory" if cgroups.version() == 1 else ""
    group_path = cgroups.group_of(pid, controller)
    assert group_path.endswith(f"/{cgroups.CLIENTS}")
    assert str(local_cluster.pk) not in group_path
    assert cgroups.PARENT not in cgroups.group_of(pid, "cpu" if controller else "")
    assert Path(f"/proc/{pid}/status").read_text().count(f"Uid:\t{runner.bench_user().uid}\t") == 1

    group = cgroups.find_clients()
    assert group is not None
    assert cgroups.memory_limit(group) == settings.PANEL_BENCH_MEMORY_MB * 1024**2
    assert not cgroups.has_cpu_quota(group)
    panel_weight = 1024 if group.version == 1 else 100
    server = cgroups.find(str(local_cluster.pk))
    assert server is not None and cgroups.has_cpu_quota(server)  # the server keeps its plan's quota
    assert 0 < cgroups.cpu_weight(group) < panel_weight

    def finished() -> bool:
        run.refresh_from_db()
        return run.is_terminal

    wait_until(finished, timeout=40, message="run finished")
    assert run.status == RunStatus.SUCCEEDED, (run.error_message, run.first_error)
    assert run.client["cgroup"].endswith(f"/{cgroups.CLIENTS}")
    assert run.client["memory_bytes"] == settings.PANEL_BENCH_MEMORY_MB * 1024**2
    assert run.client["cpu_s"] > 0 and run.client["wall_s"] >= 4
    assert run.client_cores is not None and 0 < run.client_cores < 1.5
