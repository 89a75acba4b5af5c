"""Nodes: the machines that hold clusters, where a new cluster goes, and the agent's heartbeat.

A node's agent registers it (``register_this_node``, at the agent's start) and keeps its
``last_heartbeat`` fresh (``heartbeat``, every PANEL_NODE_HEARTBEAT_SECONDS); an operator adds,
drains, activates and removes nodes (``manage.py node …``, the staff Nodes page). Where a new
cluster goes, and why a node cannot take it, is ``placement``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import socket
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters.engine import postgres
from panel.clusters.lib.names import InvalidName, validate_node_name
from panel.clusters.lib.plans import Plan
from panel.clusters.models import Cluster, ClusterMember, ClusterStatus, EtcdMember, Node, NodeState
from panel.core.errors import N_, ServiceError

log = logging.getLogger(__name__)

GB = 1024**3
# vCPUs a node offers per core when nothing says otherwise: a plan's vCPUs are a CPU quota
# (panel/clusters/engine/cgroups.py), and quotas on one core share it.
VCPUS_PER_CORE = 2


# --- what a node is made of -----------------------------------------------------------------------


def machine_capacity() -> tuple[int, int]:
    """(RAM in bytes, vCPUs) of this machine, or what PANEL_NODE_RAM_GB / PANEL_NODE_VCPUS say."""
    ram = settings.PANEL_NODE_RAM_GB * GB or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    vcpus = settings.PANEL_NODE_VCPUS or VCPUS_PER_CORE * (os.cpu_count() or 1)
    return ram, vcpus


def _check_ports(first: int, last: int) -> None:
    if not 1024 <= first < last <= 65535:
        raise ServiceError(
            N_("The port range must be two ports within 1024–65535, the first below the last."),
            field="ports",
            code="node.port_range_invalid",
            params={},
        )


@dataclass(frozen=True)
class Usage:
    """What a node's clusters take of it (plans of the clusters not being deleted)."""

    node: Node
    clusters: int
    ram_bytes: int
    vcpus: int

    @property
    def free_ram_bytes(self) -> int:
        return self.node.ram_bytes - self.ram_bytes

    @property
    def free_vcpus(self) -> int:
        return self.node.vcpus - self.vcpus

    @property
    def ram_percent(self) -> int:
        return min(100, round(100 * self.ram_bytes / self.node.ram_bytes)) if self.node.ram_bytes else 100

    @property
    def vcpu_percent(self) -> int:
        return min(100, round(100 * self.vcpus / self.node.vcpus)) if self.node.vcpus else 100

    def fits(self, plan: Plan) -> bool:
        return self.free_ram_bytes >= plan.ram_bytes and self.free_vcpus >= plan.vcpus


def usage(node: Node) -> Usage:
    """What the clusters take of ``node``: each member on it is a server of its plan's RAM (a
    cluster without member rows yet, its primary); the CPU quota counts once per cluster present
    on the node (its members there share the plan's vCPUs when they share a node; a member on
    another node counts the plan's vCPUs there: it has a cgroup of the plan's limits there)."""
    live = ~Q(cluster__status=ClusterStatus.DELETING)
    members_here = Counter(ClusterMember.objects.filter(live, node=node).values_list("cluster_id", flat=True))
    ram = vcpus = count = 0
    clusters = Cluster.objects.filter(Q(node=node) | Q(pk__in=list(members_here))).exclude(
        status=ClusterStatus.DELETING
    )
    for cluster in clusters.only("plan_slug", "num_nodes", "node_id"):
        if cluster.node_id == node.pk:
            count += 1
        plan = cluster.plan
        if plan is not None:
            servers = members_here.get(cluster.pk, 0)
            if cluster.node_id == node.pk:
                servers = max(servers, 1)
            ram += plan.ram_bytes * servers
            vcpus += plan.vcpus
    return Usage(node=node, clusters=count, ram_bytes=ram, vcpus=vcpus)


def scaled(plan: Plan, members: int) -> Plan:
    """The room ``members`` servers of ``plan`` take on one node (see ``usage``)."""
    return dataclasses.replace(plan, ram_gb=plan.ram_gb * members) if members > 1 else plan


def all_usage() -> list[Usage]:
    return [usage(node) for node in Node.objects.all()]


def members_of_others(node: Node) -> list[Cluster]:
    """The clusters living on another node that have a member (a standby, or the primary after a
    failover) and so an entry on ``node``: while ``node`` does not answer they run without it."""
    ids = (
        ClusterMember.objects.filter(node=node)
        .exclude(cluster__node=node)
        .values_list("cluster_id", flat=True)
    )
    return list(Cluster.objects.filter(pk__in=set(ids)).select_related("owner", "node").order_by("name"))


# --- the agent's side -----------------------------------------------------------------------------


def register_this_node() -> Node:
    """The row of this machine's node (PANEL_NODE_NAME), as the agent starts. The first time it
    is created with the machine's capacity (or PANEL_NODE_RAM_GB / PANEL_NODE_VCPUS); its
    address, port range and data directory are this agent's settings from then on, since the
    agent is what binds those ports and holds those files (``node add`` values are placeholders
    until it starts; the capacity an operator gave stays)."""
    ram, vcpus = machine_capacity()
    first, last = settings.PANEL_PORT_RANGE
    own = {
        "address": settings.PANEL_PUBLIC_HOST,
        "port_first": first,
        "port_last": last,
        "data_dir": str(settings.PANEL_DATA_DIR),
    }
    node, created = Node.objects.get_or_create(
        name=settings.PANEL_NODE_NAME, defaults={**own, "ram_bytes": ram, "vcpus": vcpus}
    )
    if created:
        log.info("node %s registered: %s GB, %s vCPUs, ports %s–%s", node.name, ram // GB, vcpus, first, last)
    else:
        changed = {key: value for key, value in own.items() if getattr(node, key) != value}
        if changed:
            log.info("node %s: this agent's settings: %s", node.name, changed)
            Node.objects.filter(pk=node.pk).update(**changed)
    heartbeat()
    node.refresh_from_db()
    return node


def free_disk() -> int | None:
    """Free bytes of the filesystem this machine keeps its clusters' data on (PANEL_DATA_DIR, or
    the nearest directory above it that exists yet)."""
    path = Path(settings.PANEL_DATA_DIR)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def disk_free_bytes(node: Node) -> int | None:
    """The node's free disk: measured now on this process's own node, else as its agent reported."""
    return free_disk() if node.is_here else node.disk_free_bytes


def heartbeat(*, inventory: bool = True) -> bool:
    """The agent is alive: its node's ``last_heartbeat`` and, with ``inventory``, the PostgreSQL
    versions installed and its host (looking for the versions runs pg_config: the heartbeat
    thread does it every few minutes, not every beat). False when the node's row is gone
    (removed by an operator)."""
    fields: dict[str, object] = {"last_heartbeat": timezone.now()}
    if inventory:
        fields.update(
            versions=",".join(postgres.installed_versions()),
            agent_host=socket.gethostname(),
            disk_free_bytes=free_disk(),
        )
    return bool(Node.objects.filter(name=settings.PANEL_NODE_NAME).update(**fields))


# --- placement ------------------------------------------------------------------------------------


def this_node() -> Node:
    """The node of this process (role "all" or "agent"): created on first use, so a one-machine
    panel needs no `node add`."""
    try:
        return Node.objects.get(name=settings.PANEL_NODE_NAME)
    except Node.DoesNotExist:
        return register_this_node()


def node_choices() -> list[tuple[str, str]]:
    """(name, label) of the nodes a user may pick for a new cluster: active ones, with their room."""
    choices = []
    for room in all_usage():
        node = room.node
        if node.state != NodeState.ACTIVE:
            continue
        label = _("%(node)s — %(ram).0f GB RAM and %(cpu)d vCPUs free") % {
            "node": node.name,
            "ram": max(0, room.free_ram_bytes) / GB,
            "cpu": max(0, room.free_vcpus),
        }
        if not node.is_alive:
            label += " " + _("(not answering)")
        choices.append((node.name, label))
    return choices


def collects_attached() -> bool:
    """Attached servers are reached over the network, so one node collects them (and answers
    the web's calls on them): ``Node.for_attached``. True when that is this process's node."""
    return Node.for_attached() == settings.PANEL_NODE_NAME


def node_versions() -> list[str]:
    """The PostgreSQL versions the living, active nodes reported, newest first."""
    found: set[str] = set()
    for node in Node.objects.filter(state=NodeState.ACTIVE):
        if node.is_alive:
            found.update(node.version_list())
    return sorted(found, key=lambda v: [int(p) for p in v.split(".") if p.isdigit()], reverse=True)


# --- the operator's actions -----------------------------------------------------------------------


def add_node(
    name: str,
    *,
    address: str,
    ports: tuple[int, int],
    data_dir: str,
    ram_gb: int,
    vcpus: int,
    private_address: str = "",
) -> Node:
    try:
        validate_node_name(name)
    except InvalidName as exc:
        raise ServiceError.of(exc, "name") from None
    if not address.strip():
        raise ServiceError(
            N_("Give the address clients use to reach this node's clusters."),
            field="address",
            code="node.address_missing",
            params={},
        )
    _check_ports(*ports)
    if ram_gb < 1 or vcpus < 1:
        raise ServiceError(
            N_("A node has at least 1 GB of RAM and 1 vCPU."),
            field="ram_gb",
            code="node.capacity_invalid",
            params={},
        )
    if not data_dir.startswith("/"):
        raise ServiceError(
            N_("The data directory is an absolute path on the node."),
            field="data_dir",
            code="node.data_dir_invalid",
            params={},
        )
    overlapping = Node.objects.filter(address=address.strip()).filter(
        Q(port_first__lte=ports[1]) & Q(port_last__gte=ports[0])
    )
    if overlapping.exists():
        raise ServiceError(
            N_("Ports %(a)d–%(b)d overlap node “%(other)s” at the same address."),
            field="ports",
            code="node.ports_overlap",
            params={"a": ports[0], "b": ports[1], "other": cast(Node, overlapping.first()).name},
        )
    with transaction.atomic():
        if Node.objects.filter(name=name).exists():
            raise ServiceError(
                N_("There is already a node named “%(node)s”."),
                field="name",
                code="node.name_taken",
                params={"node": name},
            )
        return Node.objects.create(
            name=name,
            address=address.strip(),
            private_address=private_address.strip(),
            port_first=ports[0],
            port_last=ports[1],
            data_dir=data_dir,
            ram_bytes=ram_gb * GB,
            vcpus=vcpus,
        )


def get_node(name: str, *, for_update: bool = False, field: str | None = None) -> Node:
    """The node of that name (its row locked with ``for_update``); a ServiceError (on ``field``
    of the caller's form) when there is none."""
    try:
        return (Node.objects.select_for_update() if for_update else Node.objects).get(name=name)
    except Node.DoesNotExist:
        raise ServiceError(
            N_("There is no node named “%(node)s”."),
            field=field,
            code="node.not_found",
            params={"node": name},
        ) from None


def set_state(name: str, state: str) -> Node:
    """Drain a node (it keeps and runs its clusters, moves no data, takes no new ones) or make it
    active again."""
    node = get_node(name)
    Node.objects.filter(pk=node.pk).update(state=state)
    node.refresh_from_db()
    return node


def remove_node(name: str) -> None:
    """Forget a node that holds no cluster (its agent, if it still runs, stops finding its row)."""
    node = get_node(name)
    # A standby of a cluster of another node counts too (its member row protects the node's).
    count = Cluster.objects.filter(Q(node=node) | Q(members__node=node)).distinct().count()
    if count:
        raise ServiceError(
            N_("Node “%(node)s” still holds %(n)d cluster(s): delete them first (draining stops new ones)."),
            code="node.not_empty",
            params={"node": name, "n": count},
        )
    if EtcdMember.objects.filter(node=node).exists():
        # The agents' reconciler moves the member once the node is drained (standbys/services/etcd.py):
        # a node removed with it would take a vote of the panel's etcd (or the only copy) along.
        raise ServiceError(
            N_(
                "Node “%(node)s” holds a member of the panel's etcd: drain it first and wait until the "
                "member has moved to another node (manage.py node list shows where the members are)."
            ),
            code="node.holds_etcd",
            params={"node": name},
        )
    node.delete()
