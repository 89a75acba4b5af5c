"""Plan limits enforced by the kernel (issue 13, item 3): a cluster's server runs in a cgroup of
its own with the plan's RAM as memory limit and its vCPUs as CPU quota; a process of that cluster
that allocates past the limit is stopped there, and the server beside it keeps serving."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from panel.clusters.engine import cgroups, isolation, postgres
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import connect_as_client
from panel.core.runas import run_as

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are written by root")
DEBIAN_PYTHON = "/usr/bin/python3"  # one the cluster's user can run (not under /root)
GiB = 1024**3


def allocate(cluster: Cluster, mebibytes: int) -> int:
    """Exit code of a program of the cluster (its user, its cgroup) that touches ``mebibytes``."""
    code = f"block = b'x' * ({mebibytes} * 1024 * 1024); print(len(block))"
    result = run_as(
        isolation.os_user(cluster),
        [DEBIAN_PYTHON, "-c", code],
        timeout=120,
        join=isolation.server_cgroup(cluster),
    )
    return result.returncode


@needs_root
@pytest.mark.integration
def test_a_1gb_cluster_is_held_to_1gb_and_one_core_by_the_kernel(local_cluster: Cluster) -> None:
    if cgroups.version() is None:
        pytest.skip("no writable cgroup hierarchy on this machine")
    pid = postgres.postmaster_pid(local_cluster.pgdata)
    assert pid is not None
    controller = "memory" if cgroups.version() == 1 else ""
    assert cgroups.group_of(pid, controller).endswith(f"/{cgroups.PARENT}/{local_cluster.pk}")
    group = cgroups.find(str(local_cluster.pk))
    assert group is not None
    assert cgroups.memory_limit(group) == 1 * GiB  # db-s-1vcpu-1gb
    assert cgroups.cpu_quota(group) == 1.0

    # Past the limit: the kernel stops that program (SIGKILL from the group's OOM killer)...
    assert allocate(local_cluster, 1536) == -9
    # ...and only it: the server, in the same group, still serves, from the same postmaster.
    assert postgres.postmaster_pid(local_cluster.pgdata) == pid
    with connect_as_client(local_cluster) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    # Within the limit, the same program runs to its end.
    assert allocate(local_cluster, 256) == 0


@needs_root
@pytest.mark.integration
def test_deleting_a_cluster_removes_its_cgroup(local_cluster: Cluster) -> None:
    if cgroups.version() is None:
        pytest.skip("no writable cgroup hierarchy on this machine")
    name = str(local_cluster.pk)
    assert cgroups.find(name) is not None
    from panel.clusters import services

    services.delete_cluster(local_cluster, confirm_name=local_cluster.name)
    assert cgroups.find(name) is None


def test_without_cgroups_clusters_start_and_the_panel_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)  # no hierarchy mounted there
    monkeypatch.setattr(cgroups, "_warned", False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with caplog.at_level(logging.WARNING, logger="panel.clusters.engine.cgroups"):
        assert cgroups.ensure("a", cgroups.Limits(GiB, 1.0)) is None
        assert cgroups.ensure("b", cgroups.Limits(GiB, 1.0)) is None
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "Plan limits are not enforced on this node" in said[0]
    assert "no cgroup hierarchy is mounted" in said[0]


@needs_root
@pytest.mark.integration
def test_a_cluster_started_before_limits_is_moved_into_its_cgroup_by_the_reconciler(
    local_cluster: Cluster,
) -> None:
    if cgroups.version() is None:
        pytest.skip("no writable cgroup hierarchy on this machine")
    from django.conf import settings

    from panel.clusters.services import reconciler

    cluster = local_cluster
    user = isolation.os_user(cluster)
    postgres.stop(cluster.version, cluster.pgdata, user=user, timeout=30)
    # As every cluster was started before this change: no cgroup.
    postgres.start(
        cluster.version, cluster.pgdata, cluster.log_file, user=user, timeout=settings.PANEL_COMMAND_TIMEOUT
    )
    pid = postgres.postmaster_pid(cluster.pgdata)
    assert pid is not None
    controller = "memory" if cgroups.version() == 1 else ""
    assert not cgroups.group_of(pid, controller).endswith(f"/{cluster.pk}")

    notes = reconciler.reconcile()
    assert f"{cluster.name}: placed in its cgroup" in notes
    assert cgroups.group_of(pid, controller).endswith(f"/{cgroups.PARENT}/{cluster.pk}")
    with connect_as_client(cluster) as conn:  # the backends it starts from now on are in it too
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert cgroups.group_of(backend, controller).endswith(f"/{cluster.pk}")
    assert cluster.events.filter(kind="limits").exists()
    assert f"{cluster.name}: placed in its cgroup" not in reconciler.reconcile()  # once


@needs_root
@pytest.mark.integration
def test_the_clusters_pgbouncer_runs_in_its_cgroup(local_cluster: Cluster) -> None:
    if cgroups.version() is None:
        pytest.skip("no writable cgroup hierarchy on this machine")
    from panel.pools import services as pools
    from panel.pools.engine import supervisor
    from panel.pools.engine.disk import bouncer_files

    pools.create_pool(local_cluster, "limited-pool", "defaultdb", None, "transaction", 5)
    pid = supervisor.running_pid(bouncer_files(local_cluster))
    assert pid is not None
    controller = "memory" if cgroups.version() == 1 else ""
    assert cgroups.group_of(pid, controller).endswith(f"/{cgroups.PARENT}/{local_cluster.pk}")
