"""Issue 29, item 3: no tenant can hold the node's shared work.

A node agent of its own (scripts/node_agent.py: its control worker, its work worker and its calls
worker, real Celery processes) serves a node with two tenants. Tenant A's ``doadmin`` holds
``ACCESS EXCLUSIVE`` on a table of its own in two databases for the whole test and asks for a
data set in each: on the old code the panel's size query after ``pgbench -i`` waited on that lock
with no timeout, in the worker that also carries provisioning, collection and quota cycles, until
both of its processes were held. Here tenant B's cluster is created, collected and quota-checked
while the lock is still held, and A's data sets end too (their size unknown), on the work queue.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User

from benchmarks import services as bench
from benchmarks.models import DataSet
from conftest import remove_clusters_in
from panel.clusters import services
from panel.clusters.models import Cluster, ClusterStatus, Node
from panel.clusters.services import nodes, roles
from panel.clusters.tests.conftest import connect_as_client
from panel.core import agent as agent_route
from panel.core import taskqueue
from panel.insights.models import MetricPoint
from panel.quotas.models import Storage
from tests.fixtures.agent_pair import Agent, start_agent

pytestmark = pytest.mark.integration
HOLD_DATABASES = ("defaultdb", "second")


def wait_ready(agent: Agent, wait_until: Callable[..., object]) -> None:
    names = tuple(f"{kind}-{agent.node.name}@" for kind in ("worker", "work", "backups", "agent"))

    def ready() -> bool:
        lines = agent.log.read_text(errors="replace").splitlines()
        assert agent.proc is not None and agent.proc.poll() is None, "\n".join(lines[-40:])
        return all(any(name in line and " ready." in line for line in lines) for name in names)

    wait_until(ready, timeout=90, message="the node agent's four workers")


@pytest.fixture
def node_agent(
    redis_server: str, transactional_db: None, settings: object, wait_until: Callable[..., object]
) -> Iterator[Agent]:
    root = Path(django_settings.PANEL_DATA_DIR) / "n"  # short: sockets under it stay < 100 bytes
    root.mkdir(exist_ok=True)
    root.chmod(0o711)
    suffix = secrets.token_hex(2)
    data_dir = root / f"h{suffix}"
    data_dir.mkdir(mode=0o711)
    data_dir.chmod(0o711)
    _first, last = django_settings.PANEL_PORT_RANGE
    low = last - 60  # below the two-node test's ports
    node = nodes.add_node(
        f"hold{suffix}", address="127.0.0.1", ports=(low, low + 15), data_dir=str(data_dir), ram_gb=4, vcpus=4
    )
    agent = start_agent(node, data_dir, redis_server)
    try:
        wait_ready(agent, wait_until)
        settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
        settings.PANEL_NODE_NAME = f"web{suffix}"  # type: ignore[attr-defined]
        agent_route.forbid_processes_in_web()
        yield agent
    finally:
        settings.PANEL_PROCESS_ROLE = "all"  # type: ignore[attr-defined]
        agent.stop()
        remove_clusters_in(data_dir / "clusters")


def served_by(agent: Agent, worker: str, task: str) -> int:
    """How many ``task`` messages the node agent's ``worker`` child says it finished."""
    lines = agent.log.read_text(errors="replace").splitlines()
    return sum(
        1 for line in lines if line.startswith(f"{worker} ") and f"{task}[" in line and "succeeded" in line
    )


def status(cluster: Cluster) -> str:
    cluster.refresh_from_db()
    return cluster.status


def test_a_tenant_holding_a_lock_holds_up_no_other_tenant(
    node_agent: Agent, wait_until: Callable[..., object]
) -> None:
    agent = node_agent
    wait_until(lambda: Node.objects.get(pk=agent.node.pk).is_alive, timeout=60, message="the heartbeat")
    owner_a = User.objects.create_user("holder", "holder@example.com", "holder-password-1")
    owner_b = User.objects.create_user("neighbour", "neighbour@example.com", "neighbour-password-1")
    a = services.create_cluster(owner_a, name="holder", plan_slug="db-s-1vcpu-1gb", node=agent.node.name)
    wait_until(lambda: status(a) != ClusterStatus.CREATING, timeout=120, message="A provisioned")
    assert a.status == ClusterStatus.ONLINE, a.error_message
    roles.add_database(a, "second")

    held: list[psycopg.Connection] = []
    try:
        for database in HOLD_DATABASES:
            conn = connect_as_client(a, dbname=database)
            conn.execute("CREATE TABLE pgbench_hold (x int)")
            conn.commit()
            conn.execute("LOCK TABLE pgbench_hold IN ACCESS EXCLUSIVE MODE")  # until the test ends
            held.append(conn)
        datasets = [bench.init_dataset(a, database=database, scale=1) for database in HOLD_DATABASES]

        b = services.create_cluster(
            owner_b, name="neighbour", plan_slug="db-s-1vcpu-1gb", node=agent.node.name
        )
        wait_until(lambda: status(b) != ClusterStatus.CREATING, timeout=120, message="B provisioned")
        assert b.status == ClusterStatus.ONLINE, b.error_message
        # Beat's periodic work, as its fan-out sends it to the node's control queue.
        taskqueue.send("panel.insights.tasks.collect", [], queue=agent.node.tasks_queue)
        taskqueue.send("panel.quotas.tasks.measure", [], queue=agent.node.tasks_queue)
        wait_until(lambda: MetricPoint.objects.filter(cluster=b).exists(), timeout=60, message="B collected")
        wait_until(
            lambda: Storage.objects.filter(cluster=b, measured_at__isnull=False).exists(),
            timeout=60,
            message="B's quotas measured",
        )
        # Still held: B did not wait for A's lock to go.
        assert all(not conn.closed for conn in held)
        assert held[0].execute(
            "SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' "
            "AND relation = 'pgbench_hold'::regclass"
        ).fetchone() == (1,)

        # A's own work ended too, on the work queue: the size it could not read is left unknown.
        def a_done() -> bool:
            return all(DataSet.objects.get(pk=d.pk).status == "succeeded" for d in datasets)

        wait_until(a_done, timeout=60, message="A's data sets")
        # Celery writes its "succeeded" line after the task body returned (and set the status).
        wait_until(
            lambda: served_by(agent, "work", "benchmarks.tasks.init_dataset") == 2,
            timeout=30,
            message="the work worker's lines for both data sets",
        )
        assert served_by(agent, "worker", "benchmarks.tasks.init_dataset") == 0
        assert served_by(agent, "worker", "panel.clusters.tasks.provision") == 2
    finally:
        for conn in held:
            conn.close()
