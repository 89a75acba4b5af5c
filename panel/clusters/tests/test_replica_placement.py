"""Where a new read-only replica goes (``placement.replica_node``): another active, answering node
with room than its source's servers, counted against it; its source's node when no other has
room; and the source's pg_hba.conf admits the replication role from the replica's node only.
(A replica really built and run on a second node agent: tests/test_remote_replicas.py.)"""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from panel.clusters import services
from panel.clusters.engine import isolation
from panel.clusters.lib.pgconf import hba_address, render_hba
from panel.clusters.lib.plans import get_plan
from panel.clusters.models import Cluster, ClusterStatus, Node, NodeState
from panel.clusters.replicas.services import replicas
from panel.clusters.services import nodes, placement
from panel.clusters.tests.conftest import make_node

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def web(settings: object) -> None:
    """This process as the web: only heartbeats say a node is alive."""
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    Node.objects.filter(clusters__isnull=True).delete()


def source_on(owner: User, node: str, *, num_nodes: int = 1, plan: str = "db-s-1vcpu-2gb") -> Cluster:
    return services.create_cluster(
        owner, name=f"src-{node}", plan_slug=plan, num_nodes=num_nodes, node=node, enqueue=False
    )


def replica_of(owner: User, source: Cluster, node: Node, name: str = "ro") -> Cluster:
    replica = services.create_cluster(
        owner, name=name, plan_slug=source.plan_slug, node=node.name, enqueue=False
    )
    Cluster.objects.filter(pk=replica.pk).update(replica_of=source)
    return Cluster.objects.get(pk=replica.pk)


def test_it_goes_on_a_node_holding_no_server_of_its_source(owner: User) -> None:
    make_node("a", 40000), make_node("b", 40100, ram_gb=16), make_node("c", 40200, ram_gb=32)
    source = source_on(owner, "a", num_nodes=2)  # its standby goes on c (the most free RAM)
    assert {m.node.name for m in source.members.select_related("node")} == {"a", "c"}
    # c has more room, but holds a member of the source: b it is.
    assert placement.replica_node(source, get_plan("db-s-1vcpu-2gb"), "15").name == "b"


def test_it_prefers_the_most_free_ram_and_counts_against_the_node(owner: User) -> None:
    make_node("a", 40000), make_node("b", 40100, ram_gb=4), make_node("c", 40200, ram_gb=6)
    source = source_on(owner, "a")
    plan = get_plan("db-s-1vcpu-2gb")
    chosen = placement.replica_node(source, plan, "15")
    assert chosen.name == "c"
    replica_of(owner, source, chosen, "ro-1")  # c now has 4 GB free, b 4 GB: by name
    assert nodes.usage(chosen).ram_bytes == plan.ram_bytes
    assert placement.replica_node(source, plan, "15").name == "b"


def test_it_shares_the_source_node_when_no_other_has_room_or_answers(owner: User) -> None:
    make_node("a", 40000), make_node("b", 40100, ram_gb=1), make_node("c", 40200)
    make_node("d", 40300), make_node("e", 40400)
    Node.objects.filter(name="c").update(last_heartbeat=timezone.now() - dt.timedelta(hours=1))
    Node.objects.filter(name="d").update(state=NodeState.DRAINING)
    Node.objects.filter(name="e").update(versions="16")  # cannot run the source's PostgreSQL 15
    source = source_on(owner, "a")
    assert placement.replica_node(source, get_plan("db-s-1vcpu-2gb"), "15").name == "a"


def test_the_source_admits_its_replicas_nodes_for_replication_only(owner: User) -> None:
    a, b = make_node("a", 40000), make_node("b", 40100)
    source = source_on(owner, "a")
    assert isolation.replica_addresses(source) == []
    replica_of(owner, source, a, "ro-here")  # on the source's node: loopback, as before
    assert isolation.replica_addresses(source) == []
    there = replica_of(owner, source, b, "ro-there")
    assert isolation.replica_addresses(source) == ["b.example.net"]
    Cluster.objects.filter(pk=there.pk).update(status=ClusterStatus.DELETING)  # its line goes
    assert isolation.replica_addresses(source) == []
    hba = render_hba("su", "mon", (), "repl", replicas_from=["10.0.0.7", "127.0.0.1"])
    replication_lines = [line.split() for line in hba.splitlines() if " repl " in f" {line} "]
    assert replication_lines == [
        ["hostssl", "replication", "repl", "127.0.0.1/32", "scram-sha-256"],
        ["hostssl", "replication", "repl", "::1/128", "scram-sha-256"],
        ["hostssl", "replication", "repl", "10.0.0.7/32", "scram-sha-256"],
        ["host", "all", "repl", "all", "reject"],
    ]
    for bad in ("all", "samenet", "a b", "10.0.0.0/8 trust"):
        with pytest.raises(ValueError):
            hba_address(bad)


def test_a_node_filled_meanwhile_leaves_the_replica_on_its_source_node(
    owner: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = make_node("a", 40000), make_node("b", 40100, ram_gb=1)
    source = source_on(owner, "a")
    Cluster.objects.filter(pk=source.pk).update(status=ClusterStatus.ONLINE)
    # As if b had room when placement looked and another cluster took it before the row was made.
    monkeypatch.setattr(placement, "replica_node", lambda *_args: b)
    replica = replicas.create_replica(Cluster.objects.get(pk=source.pk), name="src-ro", enqueue=False)
    assert replica.node == a and replica.replica_of_id == source.pk
