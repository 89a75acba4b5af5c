"""The load a tenant runs counts against its plan (issue 13, item 3): pgbench, started by the
runner for a cluster, runs in that cluster's cgroup, as the bench user."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from benchmarks import runner
from panel.clusters.engine import cgroups, isolation
from panel.clusters.models import Cluster

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are written by root")


@needs_root
@pytest.mark.integration
def test_the_load_a_tenant_runs_counts_against_its_plan(local_cluster: Cluster) -> None:
    """pgbench, started by the runner for this cluster, runs in the cluster's group."""
    if cgroups.version() is None:
        pytest.skip("no writable cgroup hierarchy on this machine")
    proc = runner.PgbenchProcess(
        ["sleep", "30"], runner.base_env(), join=isolation.server_cgroup(local_cluster)
    )
    try:
        # Once the wrapper has joined the group and become sleep (it joins before the exec).
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        controller = "memory" if cgroups.version() == 1 else ""
        assert cgroups.group_of(proc.pid, controller).endswith(f"/{cgroups.PARENT}/{local_cluster.pk}")
        assert Path(f"/proc/{proc.pid}/status").read_text().count(f"Uid:\t{runner.bench_user().uid}\t") == 1
    finally:
        proc.stop(grace_s=0.5)
