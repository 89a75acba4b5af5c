"""Where a cluster's members go (anti-affinity): each standby on a node other than the primary's
and the other standbys' when an active, answering node has room for the plan, so that the loss of
a machine leaves a member to fail over to. With one node (or none other with room) members share
it, and the Members card says so.

``member_nodes`` is what every caller that adds members asks: creating a cluster with standbys
and adding members to a running one (``resize --num-nodes``). ``replica_node`` is where a new
read-only replica goes: on another node than its source's servers when one has room.
"""

from __future__ import annotations

from collections import Counter

from django.db.models import Q

from panel.clusters.lib.plans import Plan
from panel.clusters.models import Cluster, Node, NodeState
from panel.clusters.services import nodes
from panel.core.errors import N_, ServiceError


def member_nodes(cluster: Cluster, count: int) -> list[Node]:
    """The nodes for ``count`` new members of ``cluster`` (called inside the transaction that
    records them: the nodes' rows are locked). A node that holds none of the cluster's members
    is preferred, then the one with the most free RAM; each member takes the plan's RAM of its
    node, and the plan's vCPUs of a node where the cluster has no server yet (see
    ``nodes.usage``). The cluster's own node always counts as a candidate (it holds the
    primary); other nodes only while active and answering. Refused when no node has room."""
    plan = cluster.plan
    assert plan is not None and cluster.node is not None
    if count <= 0:
        return []
    holding = Counter(cluster.members.values_list("node_id", flat=True))
    if not holding:
        holding[cluster.node_id] = 1  # the primary, before its member row exists
    candidates = [
        node
        for node in Node.objects.select_for_update().filter(Q(pk=cluster.node_id) | Q(state=NodeState.ACTIVE))
        if node.pk == cluster.node_id or node.is_alive
    ]
    rooms = {node.pk: nodes.usage(node) for node in candidates}
    taken_ram: Counter[int] = Counter()
    chosen: list[Node] = []
    for _index in range(count):

        def fits(node: Node) -> bool:
            room = rooms[node.pk]
            ram = room.free_ram_bytes - taken_ram[node.pk] >= plan.ram_bytes
            cpu = holding[node.pk] > 0 or room.free_vcpus >= plan.vcpus
            return ram and cpu

        fitting = [node for node in candidates if fits(node)]
        if not fitting:
            raise _full(cluster, count - len(chosen), rooms[cluster.node_id], taken_ram[cluster.node_id])
        best = min(
            fitting,
            key=lambda n: (
                holding[n.pk],
                -(rooms[n.pk].free_ram_bytes - taken_ram[n.pk]),
                -rooms[n.pk].free_vcpus,
                n.name,
            ),
        )
        chosen.append(best)
        holding[best.pk] += 1
        taken_ram[best.pk] += plan.ram_bytes
    return chosen


def _full(cluster: Cluster, left: int, room: nodes.Usage, taken: int) -> ServiceError:
    """The cluster's node cannot take the members no other node has room for."""
    plan = cluster.plan
    assert plan is not None
    return ServiceError(
        N_(
            "Node “%(node)s” is full for plan %(plan)s: it has %(ram).1f GB of RAM and %(cpu)d vCPUs free, "
            "the plan needs %(need_ram)d GB and %(need_cpu)d vCPUs. Choose a smaller plan or another node, "
            "or add a node."
        ),
        field="num_nodes",
        code="node.full",
        params={
            "node": room.node.name,
            "plan": plan.slug,
            "ram": max(0, room.free_ram_bytes - taken) / nodes.GB,
            "cpu": max(0, room.free_vcpus),
            "need_ram": plan.ram_gb * left,
            "need_cpu": plan.vcpus,
        },
    )


def replica_node(source: Cluster, plan: Plan, version: str) -> Node:
    """The node a new read-only replica of ``source`` goes to: an active, answering node with room
    for its plan that can run ``version``, one holding no server of the source first (its
    primary's node nor a member's), then the most free RAM; the source's own node when no other
    has room (the replica shares it, and its page says so). ``create_cluster`` checks the room
    again inside its transaction."""
    holding = {source.node_id, *source.members.values_list("node_id", flat=True)}
    fitting = []
    for node in Node.objects.filter(state=NodeState.ACTIVE).exclude(pk=source.node_id):
        if not node.is_alive or (version not in node.version_list() and not node.is_here):
            continue
        room = nodes.usage(node)
        if room.fits(plan):
            fitting.append(room)
    if fitting:
        best = min(
            fitting, key=lambda u: (u.node.pk in holding, -u.free_ram_bytes, -u.free_vcpus, u.node.name)
        )
        return best.node
    assert source.node is not None
    return source.node
