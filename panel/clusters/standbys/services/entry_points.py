"""A cluster's entry point on every node that holds one of its members (issue 39).

The cluster's own node runs HAProxy on the cluster's ports (``ha.start_haproxy``). Each other node
holding a member runs an HAProxy of the same cluster too, on ports of its own range
(``ClusterEntry``), with the same servers and health checks: whichever member answers
``GET /primary`` gets the writes, ``GET /replica`` the reads. So when the cluster's node is lost
and a member elsewhere takes the leader key, clients given every entry (the multi-host connection
details: ``host=a,b port=p,q target_session_attrs=read-write``) still reach it.

Each entry applies the cluster's trusted sources itself (HAProxy alone sees a client's address).
A change of the sources is pushed to every entry node and refused when one of them does not take
it (``push``), so that a source taken away is let in nowhere; the node's reconciler brings an entry
back to what the rows say every round (``supervise_here``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from panel.clusters.engine import isolation
from panel.clusters.lib import firewall
from panel.clusters.models import Cluster, ClusterEntry, ClusterMember, ClusterStatus, Node
from panel.clusters.models.firewall import trusted_source_values
from panel.clusters.services.ports import allocate_entry_ports
from panel.clusters.standbys.engine import haproxy
from panel.clusters.standbys.lib import haproxy as haproxy_lib
from panel.clusters.standbys.services import ha_files
from panel.core import agent, runas
from panel.core.agent import on_node
from panel.core.errors import ServiceError
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

CALL_TIMEOUT = 30.0
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Entry:
    """Where clients of a cluster come in on one node: its address, the read-write port and the
    read-only port."""

    node: str
    host: str
    port: int
    standby_port: int | None


def entries(cluster: Cluster, *, private: bool = False) -> list[Entry]:
    """Every entry of the cluster, its own node's first (``Cluster.port``), then the other member
    nodes' by name. A cluster without standbys, or whose members share its node, has one."""
    if cluster.node is None or cluster.port is None:
        return []
    own = Entry(
        cluster.node.name,
        cluster.private_host if private else cluster.public_host,
        int(cluster.port),
        cluster.standby_port,
    )
    found = [own]
    if cluster.is_ha:
        # (all(): the rows a list of clusters prefetched, ``entries__node``)
        for row in sorted(cluster.entries.all(), key=lambda row: row.node.name):
            host = (row.node.private_address or row.node.address) if private else row.node.address
            found.append(Entry(row.node.name, host, row.port, row.standby_port))
    return found


def member_nodes_besides(cluster: Cluster) -> list[Node]:
    """The nodes other than the cluster's that hold one of its members."""
    ids = set(cluster.members.values_list("node_id", flat=True)) - {cluster.node_id}
    return list(Node.objects.filter(pk__in=ids).order_by("name"))


def _entry_here(cluster: Cluster, node: Node) -> ClusterEntry:
    """This node's entry row of the cluster, made with three free ports of this node the first time."""
    found = ClusterEntry.objects.filter(cluster=cluster, node=node).first()
    if found is not None:
        return found
    port, standby_port, pooler_port = allocate_entry_ports(node)
    try:
        with transaction.atomic():
            return ClusterEntry.objects.create(
                cluster=cluster, node=node, port=port, standby_port=standby_port, pooler_port=pooler_port
            )
    except IntegrityError:  # a concurrent call made it (or took one of the ports): read it again
        return ClusterEntry.objects.get(cluster=cluster, node=node)


def haproxy_text_here(cluster: Cluster, entry: ClusterEntry) -> str:
    """HAProxy's configuration of this node's entry: the cluster's servers (every member, at its
    node's address) behind this node's listen addresses and the entry's ports."""
    binds = haproxy_lib.haproxy_binds(settings.PANEL_LISTEN_ADDRESSES)
    if not {"0.0.0.0", LOOPBACK} & set(binds):
        binds.append(LOOPBACK)  # the pools on this node come in here (pools/services/entries.py)
    pidfile = str(ha_files.ha_dir(cluster) / "haproxy.pid")
    return haproxy_lib.render_haproxy(
        binds,
        entry.port,
        ha_files.spec(cluster),
        pidfile,
        entry.standby_port,
        ha_files.floating_bind(cluster),
    )


def ensure_here(cluster: Cluster, sources: list[str] | None = None) -> str | None:
    """This node's entry of ``cluster`` as the rows say: its files written where they differ,
    HAProxy started or reloaded (checked first); open sessions from sources no longer trusted
    ended. ``sources``: the trusted sources as the caller's transaction has them (not committed
    yet, so not in the rows this node reads). Returns a note when something was done."""
    node = Node.objects.get(name=settings.PANEL_NODE_NAME)
    if cluster.node_id == node.pk or not cluster.members.filter(node=node).exists():
        return None
    entry = _entry_here(cluster, node)
    user = isolation.os_user(cluster)
    config = ha_files.haproxy_config_path(cluster)
    runas.make_private_dir(ha_files.ha_dir(cluster), user)
    runas.make_private_dir(cluster.socket_dir, user)
    sources = trusted_source_values(cluster) if sources is None else sources
    text = haproxy_text_here(cluster, entry)
    sources_file = config.with_name(haproxy_lib.HAPROXY_SOURCES)
    try:
        same = config.read_text() == text and sources_file.read_text() == firewall.render_haproxy_sources(
            sources
        )
    except FileNotFoundError:
        same = False
    running = haproxy.pid(config) is not None
    if same and running:
        return None
    haproxy.write(config, text, sources, user)
    join = isolation.server_cgroup(cluster)
    timeout = settings.PANEL_COMMAND_TIMEOUT
    pidfile = ha_files.ha_dir(cluster) / "haproxy.pid"
    if running:
        admin = cluster.socket_dir / haproxy_lib.HAPROXY_SOCKET
        haproxy.reload(config, pidfile, admin, user, join, timeout=timeout)
        if sources:
            haproxy.cut_clients(
                [entry.port, entry.standby_port], lambda address: firewall.allows(sources, address)
            )
        return f"{cluster.name}: its entry on {node.name} brought up to date"
    haproxy.start(config, pidfile, user, join, timeout=timeout)
    return f"{cluster.name}: its entry on {node.name} started (ports {entry.port}, {entry.standby_port})"


def stop_here(cluster: Cluster, *, forget: bool = False) -> None:
    """This node's entry of ``cluster`` stopped; ``forget``: its row (its ports) goes too (the
    last member of the cluster here is gone)."""
    haproxy.stop(ha_files.haproxy_config_path(cluster), timeout=5)
    if forget:
        ClusterEntry.objects.filter(cluster=cluster, node__name=settings.PANEL_NODE_NAME).delete()


@on_node(timeout=CALL_TIMEOUT)
def ensure_for_member(member: ClusterMember, sources: list[str]) -> str | None:
    """``ensure_here`` run by the agent of ``member``'s node (the caller names the queue)."""
    return ensure_here(member.cluster, sources)


def push(cluster: Cluster) -> None:
    """Every other member node's entry brought to what the rows say now, through its agent (a
    change of the trusted sources or of the members). EngineError when one does not answer or
    refuses: the caller then restores the rows as they were and pushes again."""
    if not cluster.is_ha:
        return
    sources = trusted_source_values(cluster)  # (this transaction's: the rows may not be committed)
    for node in member_nodes_besides(cluster):
        member = cluster.members.filter(node=node).order_by("name").first()
        if member is None:
            continue
        name = f"{__name__}.ensure_for_member"
        try:
            if node.is_here:
                ensure_here(cluster, sources)
            else:
                agent.send(name, (member, sources), {}, timeout=CALL_TIMEOUT, queue=node.agent_queue)
        except ServiceError as exc:
            raise EngineError(
                f"the entry on node {node.name} did not take the change: {exc.message}"
            ) from None


def supervise_here() -> list[str]:
    """This node's reconciler: every cluster living on another node with a member here that serves
    has its entry here running as the rows say; a cluster that no longer has one here loses it."""
    notes: list[str] = []
    node = Node.objects.filter(name=settings.PANEL_NODE_NAME).first()
    if node is None:
        return notes
    members = ClusterMember.objects.filter(node=node, cluster__status__in=ClusterStatus.SERVING).exclude(
        cluster__node=node
    )
    clusters = {m.cluster_id: m.cluster for m in members.select_related("cluster")}
    for cluster in clusters.values():
        try:
            if note := ensure_here(cluster):
                notes.append(note)
        except (EngineError, OSError) as exc:
            notes.append(f"{cluster.name}: its entry on {node.name}: {exc}")
    for entry in ClusterEntry.objects.filter(node=node).exclude(cluster_id__in=list(clusters)):
        if entry.cluster.status in ClusterStatus.SERVING and entry.cluster.members.filter(node=node).exists():
            continue
        stop_here(entry.cluster, forget=not entry.cluster.members.filter(node=node).exists())
        notes.append(f"{entry.cluster.name}: its entry on {node.name} stopped")
    return notes
