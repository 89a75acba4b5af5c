"""Where a cluster's members go (anti-affinity): each standby on a node other than the primary's
and the other standbys' when an active, answering node has room for the plan, so that the loss of
a machine leaves a member to fail over to. With one node (or none other with room) members share
it, and the Members card says so.

``member_nodes`` is what every caller that adds members asks: creating a cluster with standbys
and adding members to a running one (``resize --num-nodes``). ``replica_node`` is where a new
read-only replica goes: on another node than its source's servers when one has room. ``place``
is where a new cluster's primary goes.

A refusal says why for each node considered (``shortfalls``): which of RAM, vCPUs, port pairs and
disk is short, how much the plan needs and how much is free, or that the node is draining or its agent
silent. It is one coded ServiceError: ``node.full`` (``node.draining``, ``node.not_answering`` for
the one node named; ``node.none_available`` when no node takes clusters at all).
"""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.db.models import Q

from panel.clusters.lib.plans import Plan
from panel.clusters.models import Cluster, Node, NodeState
from panel.clusters.services import nodes, ports
from panel.core.errors import N_, Message, ServiceError, When

GB = nodes.GB


def min_free_disk() -> int:
    """The bytes a new server needs free on its node (PANEL_NODE_MIN_FREE_DISK_GB). A plan's disk
    is a limit the cluster is held to (read-only when full), not reserved on the node."""
    return int(settings.PANEL_NODE_MIN_FREE_DISK_GB * GB)


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
        holding[cluster.node.pk] = 1  # the primary, before its member row exists
    candidates = [
        node
        for node in Node.objects.select_for_update().filter(Q(pk=cluster.node_id) | Q(state=NodeState.ACTIVE))
        if node.pk == cluster.node_id or node.is_alive
    ]
    rooms = {node.pk: nodes.usage(node) for node in candidates}
    pairs = {node.pk: ports.free_pairs(node) for node in candidates}
    taken_ram: Counter[int] = Counter()
    # Member 1's row (on the cluster's node) is made after this call and takes a pair there.
    taken_pairs: Counter[int] = Counter({cluster.node.pk: 0 if cluster.members.exists() else 1})
    chosen: list[Node] = []
    for _index in range(count):

        def short(node: Node) -> list[Message]:
            return shortfalls(
                rooms[node.pk],
                plan,
                taken_ram=taken_ram[node.pk],
                cpu_held=holding[node.pk] > 0,
                pairs=pairs[node.pk] - taken_pairs[node.pk],
                any_state=node.pk == cluster.node_id,
            )

        reasons = {node.pk: short(node) for node in candidates}
        fitting = [node for node in candidates if not reasons[node.pk]]
        if not fitting:
            lines = [_node_says(room.node, plan, reasons[room.node.pk]) for room in rooms.values()]
            others = Node.objects.exclude(pk__in=list(rooms)).order_by("name")
            lines += [_node_says(node, plan, shortfalls(nodes.usage(node), plan)) for node in others]
            head = Message(
                N_(
                    "%(n)d more member(s) of plan %(plan)s find no room. Choose a smaller plan or add a node."
                ),
                "node.full",
                n=count - len(chosen),
                plan=plan.slug,
            )
            raise ServiceError.joined([head, *lines], field="num_nodes", code="node.full")
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
        taken_pairs[best.pk] += 1
    return chosen


def replica_node(source: Cluster, plan: Plan, version: str) -> Node:
    """The node a new read-only replica of ``source`` goes to: an active, answering node with room
    for its plan that can run ``version``, one holding no server of the source first (its
    primary's node nor a member's), then the most free RAM; the source's own node when no other
    has room (the replica shares it, and its page says so). ``create_cluster`` checks the room
    again inside its transaction. Refused, with every node's reason, when none has room."""
    holding = {source.node_id, *source.members.values_list("node_id", flat=True)}
    fitting = []
    said: list[Message] = []
    # (exclude(pk=None), for a source on no node, excludes nothing; the stubs want a key)
    for node in Node.objects.exclude(pk=source.node_id):  # type: ignore[misc]
        room = nodes.usage(node)
        reasons = shortfalls(room, plan)
        if not reasons and version not in node.version_list() and not node.is_here:
            reasons = [Message(N_("missing PostgreSQL %(v)s"), "node.version_missing", v=version)]
        if reasons:
            said.append(_node_says(node, plan, reasons))
        else:
            fitting.append(room)
    if fitting:
        best = min(
            fitting, key=lambda u: (u.node.pk in holding, -u.free_ram_bytes, -u.free_vcpus, u.node.name)
        )
        return best.node
    assert source.node is not None
    reasons = shortfalls(nodes.usage(source.node), plan)
    if reasons and said:
        raise _refusal(plan, [_node_says(source.node, plan, reasons), *said], field="plan")
    return source.node


# --- a new cluster's node, and why a node cannot take it ------------------------------------------


def place(plan: Plan, *, node_name: str | None = None) -> Node:
    """The node a new cluster of ``plan`` goes to (called inside the creating transaction): the
    one named, or the active, answering node with room and the most free RAM."""
    if node_name:
        node = nodes.get_node(node_name, for_update=True, field="node")
        short = shortfalls(nodes.usage(node), plan)
        if short:
            # With one node only the plan is what the user can change.
            raise _one_node(node, plan, short, field="node" if Node.objects.count() > 1 else "plan")
        return node
    if not Node.objects.exists() and settings.PANEL_PROCESS_ROLE != "web":
        nodes.this_node()
    rooms = [nodes.usage(node) for node in Node.objects.select_for_update().order_by("name")]
    if not rooms:
        raise ServiceError(
            N_(
                "No node has registered yet: start the node agent (make run starts one) or add a node with manage.py node add."
            ),
            code="node.none_registered",
            params={},
        )
    reasons = {room.node.pk: shortfalls(room, plan) for room in rooms}
    fitting = [room for room in rooms if not reasons[room.node.pk]]
    if fitting:
        return max(fitting, key=lambda u: (u.free_ram_bytes, u.free_vcpus)).node
    if len(rooms) == 1:
        raise _one_node(rooms[0].node, plan, reasons[rooms[0].node.pk], field="plan")
    raise _refusal(plan, [_node_says(room.node, plan, reasons[room.node.pk]) for room in rooms], field="plan")


def shortfalls(
    room: nodes.Usage,
    plan: Plan,
    *,
    taken_ram: int = 0,
    cpu_held: bool = False,
    pairs: int | None = None,
    any_state: bool = False,
) -> list[Message]:
    """Why ``room``'s node cannot take one more server of ``plan`` (nothing: it can): it is
    draining, its agent is silent, or RAM, vCPUs, port pairs or disk are short (``taken_ram`` and
    ``pairs``: after what this placement chose already; ``cpu_held``: the cluster has a server
    there, whose vCPUs it shares; ``any_state``: the cluster's own node, which takes its members
    while draining or silent too)."""
    node = room.node
    if not any_state:
        refused = _not_taking(node)
        if refused is not None:
            return [refused]
    reasons = []
    free_ram = room.free_ram_bytes - taken_ram
    if free_ram < plan.ram_bytes:
        reasons.append(
            Message(
                N_("RAM: the plan needs %(need)d GB, %(free).1f GB of %(total).1f GB are free"),
                "node.full",
                need=plan.ram_gb,
                free=max(0, free_ram) / GB,
                total=node.ram_bytes / GB,
            )
        )
    if not cpu_held and room.free_vcpus < plan.vcpus:
        reasons.append(
            Message(
                N_("vCPUs: the plan needs %(need)d, %(free)d of %(total)d are free"),
                "node.full",
                need=plan.vcpus,
                free=max(0, room.free_vcpus),
                total=node.vcpus,
            )
        )
    disk = nodes.disk_free_bytes(node)
    need_disk = min_free_disk()
    if disk is not None and disk < need_disk:
        reasons.append(
            Message(
                N_(
                    "disk: a new server needs %(need).1f GB free in its data directory, %(free).1f GB are free"
                ),
                "node.full",
                need=need_disk / GB,
                free=disk / GB,
            )
        )
    if (ports.free_pairs(node) if pairs is None else pairs) < 1:
        first, last = ports.port_range(node)
        reasons.append(
            Message(N_("ports: no free pair left in %(first)d–%(last)d"), "node.full", first=first, last=last)
        )
    return reasons


def _not_taking(node: Node) -> Message | None:
    """Why ``node`` takes no new server whatever its room: draining, or its agent silent."""
    if node.state != NodeState.ACTIVE:
        return Message(N_("draining: it keeps its clusters but takes no new ones"), "node.draining")
    if node.is_alive:
        return None
    if node.last_heartbeat is None:
        return Message(N_("not answering: its agent has sent no heartbeat"), "node.not_answering")
    return Message(
        N_("not answering: its agent's last heartbeat was at %(when)s UTC"),
        "node.not_answering",
        when=When.of(node.last_heartbeat),
    )


def _joined(messages: list[Message], sep: str) -> Message:
    """Several sentences (or parts of one) as one Message, each rendered in the reader's language."""
    template = sep.join(f"%(p{index})s" for index in range(len(messages)))
    return Message(template, messages[0].code, **{f"p{i}": m for i, m in enumerate(messages)})


def _node_says(node: Node, plan: Plan, reasons: list[Message]) -> Message:
    """One node's reasons as a sentence: draining or silent, else full with what is short."""
    if reasons[0].code in ("node.draining", "node.not_answering", "node.version_missing"):
        return Message(N_("Node “%(node)s” is %(why)s."), reasons[0].code, node=node.name, why=reasons[0])
    return Message(
        N_("Node “%(node)s” is full for plan %(plan)s: %(short)s."),
        "node.full",
        node=node.name,
        plan=plan.slug,
        short=_joined(reasons, "; "),
    )


def _one_node(node: Node, plan: Plan, reasons: list[Message], field: str) -> ServiceError:
    said = _node_says(node, plan, reasons)
    advice = Message(N_("Choose a smaller plan or another node, or add a node."), said.code)
    if said.code in ("node.draining", "node.not_answering"):
        return ServiceError.joined([said], field="node", code=said.code)
    return ServiceError.joined([said, advice], field=field, code=said.code)


def _refusal(plan: Plan, said: list[Message], field: str) -> ServiceError:
    """No node considered can take a server of ``plan``: each node's reason, after one line."""
    if any(m.code == "node.full" for m in said):
        head = Message(
            N_(
                "No node has room for plan %(plan)s (%(ram)d GB of RAM and %(cpu)d vCPUs). Choose a "
                "smaller plan or add a node."
            ),
            "node.full",
            plan=plan.slug,
            ram=plan.ram_gb,
            cpu=plan.vcpus,
        )
    else:
        head = Message(
            N_("No node takes new clusters now: every node is draining or its agent is not answering."),
            "node.none_available",
        )
    return ServiceError.joined([head, *said], field=field, code=head.code)
