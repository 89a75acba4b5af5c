"""Anti-affinity: a cluster's standbys go on nodes other than the primary's (and each other's)
when those have room; members count against each node's capacity; with one node they share it.
(The members really running on two node agents: tests/test_remote_members_takeover.py.)"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterMember, Node
from panel.clusters.services import nodes, placement
from panel.clusters.tests.conftest import make_node
from panel.core.errors import ServiceError

pytestmark = pytest.mark.django_db
GB = 1024**3


@pytest.fixture(autouse=True)
def web(settings: object) -> None:
    """This process as the web: it runs no cluster, so only heartbeats say a node is alive."""
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    Node.objects.filter(clusters__isnull=True).delete()


def ha(owner: User, name: str, num_nodes: int, node: str | None = None) -> Cluster:
    return services.create_cluster(
        owner, name=name, plan_slug="db-s-1vcpu-2gb", num_nodes=num_nodes, node=node, enqueue=False
    )


def placed(cluster: Cluster) -> dict[str, str]:
    return {m.name: m.node.name for m in cluster.members.select_related("node")}


def test_each_standby_goes_on_a_node_of_its_own(owner: User) -> None:
    a, b, c = make_node("a", 40000), make_node("b", 40100), make_node("c", 40200)
    cluster = ha(owner, "spread", 3, node="a")
    assert placed(cluster) == {"member-1": "a", "member-2": "b", "member-3": "c"}
    # Each member's ports are of its own node's range, its data directory under that node's.
    for member, node in zip(cluster.members.order_by("name"), (a, b, c), strict=True):
        assert node.port_first <= member.port <= node.port_last
        assert node.port_first <= member.rest_port <= node.port_last
    member_2 = cluster.members.get(name="member-2")
    assert member_2.data_dir == f"/srv/b/clusters/{cluster.pk.hex}/members/member-2"
    # Every member counts against its node: the plan's RAM and vCPUs on b and c too.
    for node in (a, b, c):
        room = nodes.usage(node)
        assert (room.ram_bytes, room.vcpus) == (2 * GB, 1), node.name
    assert nodes.usage(b).clusters == 0  # the cluster itself lives on a
    event = cluster.events.get(kind="members")
    assert "on the nodes a, b, c" in str(event.message)


def test_with_two_nodes_the_third_member_shares_the_roomier_one(owner: User) -> None:
    make_node("a", 40000, ram_gb=8)
    make_node("b", 40100, ram_gb=16)
    cluster = ha(owner, "two", 3, node="a")
    assert placed(cluster) == {"member-1": "a", "member-2": "b", "member-3": "b"}
    assert nodes.usage(Node.objects.get(name="b")).ram_bytes == 4 * GB


def test_with_one_node_all_members_share_it_and_count_each(owner: User) -> None:
    only = make_node("only", 40000)
    cluster = ha(owner, "alone", 3)
    assert set(placed(cluster).values()) == {"only"}
    assert nodes.usage(only).ram_bytes == 6 * GB and nodes.usage(only).vcpus == 1
    assert "all on node only" in str(cluster.events.get(kind="members").message)


def test_a_silent_or_full_node_takes_no_standby(owner: User) -> None:
    make_node("a", 40000)
    make_node("full", 40100, ram_gb=1)
    silent = make_node("silent", 40200)
    Node.objects.filter(pk=silent.pk).update(last_heartbeat=None)
    cluster = ha(owner, "kept", 2, node="a")
    assert placed(cluster) == {"member-1": "a", "member-2": "a"}


def test_no_room_anywhere_is_refused_and_records_nothing(owner: User) -> None:
    make_node("tiny", 40000, ram_gb=4)
    with pytest.raises(ServiceError) as refused:
        ha(owner, "too-many", 3)
    assert refused.value.code == "node.full" and refused.value.field == "num_nodes"
    assert "Node “tiny” is full for plan db-s-1vcpu-2gb" in str(refused.value)
    assert not Cluster.objects.exists() and not ClusterMember.objects.exists()


def test_member_nodes_for_members_added_later_avoid_the_clusters_nodes(owner: User) -> None:
    make_node("a", 40000)
    make_node("b", 40100)
    cluster = ha(owner, "grow", 2, node="a")
    make_node("c", 40200)
    assert [n.name for n in placement.member_nodes(cluster, 1)] == ["c"]
    assert placement.member_nodes(cluster, 0) == []


def test_a_node_holding_a_standby_cannot_be_removed(owner: User) -> None:
    make_node("a", 40000)
    make_node("b", 40100)
    ha(owner, "kept", 2, node="a")
    with pytest.raises(ServiceError) as refused:
        nodes.remove_node("b")
    assert refused.value.code == "node.not_empty" and "still holds 1 cluster" in str(refused.value)
    assert Node.objects.filter(name="b").exists()


def test_members_added_to_a_one_server_cluster_are_placed_like_a_new_clusters(owner: User) -> None:
    # resize --num-nodes 1 → 3 (services/membership.add_rows): member 1 stays on the cluster's
    # node with its data directory, the standbys go on the other nodes.
    from django.db import transaction

    from panel.clusters.standbys.services import membership

    make_node("a", 40000), make_node("b", 40100), make_node("c", 40200)
    cluster = services.create_cluster(
        owner, name="grows", plan_slug="db-s-1vcpu-2gb", node="a", enqueue=False
    )
    assert not cluster.members.exists()
    with transaction.atomic():
        rows = membership.add_rows(cluster, 3)
    assert [r.name for r in rows] == ["member-1", "member-2", "member-3"]
    assert placed(cluster) == {"member-1": "a", "member-2": "b", "member-3": "c"}
    # Member 1 keeps the server's data directory (under node a's, as for a new cluster's member 1).
    assert cluster.members.get(name="member-1").data_dir == f"/srv/a/clusters/{cluster.pk.hex}/pgdata"
    # 3 → 2 → 3 again: the freed name comes back, on the node without a member.
    cluster.members.get(name="member-3").delete()
    with transaction.atomic():
        (again,) = membership.add_rows(cluster, 1)
    assert (again.name, again.node.name) == ("member-3", "c")
