"""Two node agents on one machine (issue 13): each scripts/node_agent.py, a pair of real Celery
workers with its own queues, data directory and port range (``two_nodes``, the pair the two-node
journeys share: tests/fixtures/agent_pair.py). This process is the
web (role "web"): it runs no cluster and reaches them only through the agents.

A cluster created on node B is provisioned by B's worker in B's data directory; a pool and a
benchmark on it run on B; stopping A's agent changes nothing for B's cluster and shows A's
clusters as unknown (the test's dead-after is 6 s: the default is 45 s, "within a minute");
draining A moves no data and refuses new clusters there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

from benchmarks import services as bench
from benchmarks.lib.pgbench_command import RunOptions
from benchmarks.models import RunStatus
from panel.clusters import services
from panel.clusters.models import Cluster, ClusterStatus, Node, NodeState
from panel.clusters.services import nodes, roles
from panel.clusters.tests.conftest import connect_as_client
from panel.core.errors import ServiceError
from panel.pools import services as pools
from tests.fixtures.agent_pair import DEAD_AFTER, Agent

pytestmark = pytest.mark.integration


def status(cluster: Cluster) -> str:
    cluster.refresh_from_db()
    return cluster.status


def test_clusters_pools_and_benchmarks_run_on_their_own_node(
    two_nodes: tuple[Agent, Agent], owner: User, owner_client: Client, wait_until: Callable[..., object]
) -> None:
    def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
        wait_until(predicate, timeout=timeout, message=what)

    a, b = two_nodes
    wait_for(
        lambda: all(Node.objects.get(pk=x.node.pk).is_alive for x in (a, b)), 60, "both agents' heartbeats"
    )

    on_b = services.create_cluster(owner, name="on-b", plan_slug="db-s-1vcpu-1gb", node=b.node.name)
    on_a = services.create_cluster(owner, name="on-a", plan_slug="db-s-1vcpu-1gb", node=a.node.name)
    wait_for(
        lambda: status(on_b) != ClusterStatus.CREATING and status(on_a) != ClusterStatus.CREATING,
        240,
        "both clusters",
    )
    assert (on_b.status, on_a.status) == (ClusterStatus.ONLINE, ClusterStatus.ONLINE), (
        on_b.error_message,
        on_a.error_message,
    )
    # Each was provisioned by its own node's worker, into its own node's data directory and ports.
    # (The task ends a little after the cluster is online: its backups stanza comes after.)
    wait_for(
        lambda: (
            b.served("panel.clusters.tasks.provision") == 1
            and a.served("panel.clusters.tasks.provision") == 1
        ),
        60,
        "each provisioning task finished on its own node",
    )
    assert (b.data_dir / "clusters" / on_b.pk.hex / "pgdata").is_dir()
    assert not (a.data_dir / "clusters" / on_b.pk.hex).exists()
    assert not (Path(django_settings.PANEL_DATA_DIR) / "clusters" / on_b.pk.hex).exists()
    assert b.node.port_first <= on_b.port <= b.node.port_last
    pgdata = b.data_dir / "clusters" / on_b.pk.hex / "pgdata"
    postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    assert Path(postmaster.cwd()) == pgdata
    with connect_as_client(on_b) as conn:
        assert conn.execute("SELECT current_setting('port')::int").fetchone() == (on_b.port,)

    # A pool on it: B's agent writes PgBouncer's configuration under B and starts it there.
    pool = pools.create_pool(on_b, "b-pool", "defaultdb", None, "transaction", 5)
    assert any((b.data_dir / "clusters" / on_b.pk.hex).rglob("pgbouncer.ini"))
    # (the answer reaches this process a moment before the worker logs the task's end)
    wait_for(lambda: b.served("panel.core.agent.call") >= 1, 10, "B's agent to log the call")
    assert a.served("panel.core.agent.call") == 0
    with connect_as_client(on_b, port=on_b.pooler_port, dbname=pool.name) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)

    # A benchmark on it: launched through B's agent, run by B's worker.
    bench.init_dataset(on_b, database="defaultdb", scale=1)
    wait_for(lambda: on_b.datasets.filter(status="succeeded").exists(), 120, "the data set on B")
    run = bench.launch_run(on_b, options=RunOptions(clients=2, threads=1, duration_s=3))
    wait_for(lambda: run.__class__.objects.get(pk=run.pk).status in RunStatus.TERMINAL, 120, "the run on B")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert run.tps and run.tps > 0
    assert run.worker_pid in b.pids() and run.worker_pid not in a.pids()
    wait_for(lambda: b.served("benchmarks.tasks.run_benchmark") == 1, 10, "B's worker to log the run")
    assert a.served("benchmarks.tasks.run_benchmark") == 0

    # A's agent stops: A's cluster shows as unknown within the dead-after, B's is untouched.
    with override_settings(PANEL_PROCESS_ROLE="all"):  # the test harness, not the web, stops it
        a.stop()
    stopped = time.monotonic()

    def a_unknown() -> bool:
        page = owner_client.get("/clusters/").content.decode()
        return 'data-status="unknown"' in page

    wait_for(a_unknown, DEAD_AFTER + 10, "A's cluster to show as unknown")
    assert time.monotonic() - stopped <= DEAD_AFTER + 10
    page = owner_client.get("/clusters/").content.decode()
    assert page.count('data-status="unknown"') == 1 and page.count('data-status="online"') == 1
    on_a.refresh_from_db()
    assert on_a.status_unknown and not Cluster.objects.get(pk=on_b.pk).status_unknown
    roles.add_database(on_b, "still-b")  # B's agent still answers
    with connect_as_client(on_b, dbname="still-b") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("still-b",)
    asked = time.monotonic()
    with pytest.raises(ServiceError, match="is not answering"):
        roles.add_database(on_a, "nobody-home")  # A's does not (nothing was done)
    assert time.monotonic() - asked < 5  # said at once, not after the call's timeout

    # Draining A moves nothing and refuses new clusters there; new ones go to B.
    nodes.set_state(a.node.name, NodeState.DRAINING)
    with pytest.raises(ServiceError, match="draining"):
        services.create_cluster(
            owner, name="not-on-a", plan_slug="db-s-1vcpu-1gb", node=a.node.name, enqueue=False
        )
    assert (a.data_dir / "clusters" / on_a.pk.hex / "pgdata").is_dir()
    elsewhere = services.create_cluster(owner, name="elsewhere", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    assert elsewhere.node == b.node
    elsewhere.delete()

    # Deleting B's cluster is B's work too.
    assert services.request_delete(on_b, confirm_name="on-b") is False
    wait_for(lambda: not Cluster.objects.filter(pk=on_b.pk).exists(), 120, "B's cluster to be deleted")
    assert not (b.data_dir / "clusters" / on_b.pk.hex).exists()
