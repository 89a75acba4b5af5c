"""A node's ports: the range it gives clusters (``PANEL_PORT_RANGE`` on its own agent), the two
its etcd keeps, the pairs clusters and members hold, and the lowest free ones for a new server.
Placement counts the free pairs too, so a node out of ports is passed over with that reason."""

from __future__ import annotations

import logging
import socket
from collections.abc import Collection

from django.conf import settings

from panel.clusters.models import Cluster, ClusterEntry, ClusterKind, ClusterMember, Node
from panel.core.errors import N_, ServiceError

log = logging.getLogger(__name__)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_range(node: Node) -> tuple[int, int]:
    """The node's port range: on this process's own node its own PANEL_PORT_RANGE."""
    first, last = settings.PANEL_PORT_RANGE if node.is_here else (node.port_first, node.port_last)
    return int(first), int(last)


def etcd_ports(node: Node) -> tuple[int, int]:
    """The (client, peer) ports of the node's etcd: the last two of its range, never a cluster's."""
    _first, last = port_range(node)
    return last - 1, last


def _no_free_ports(node: Node, first: int, last: int) -> ServiceError:
    """The refusal a tenant reads (what the operator can change goes to the log)."""
    log.warning(
        "node %s: no free ports in %s-%s; widen PANEL_PORT_RANGE or add a node (manage.py node add --ports)",
        node.name,
        first,
        last,
    )
    return ServiceError(
        N_(
            "The panel has no room for another cluster on node “%(node)s” at the moment: delete a "
            "cluster you no longer need, or ask the panel's operator to make room."
        ),
        code="cluster.no_free_ports",
        params={"node": node.name},
    )


def _taken_ports(node: Node) -> set[int]:
    taken: set[int] = set(etcd_ports(node))
    for ports in Cluster.objects.filter(kind=ClusterKind.LOCAL, node=node).values_list(
        "port", "pooler_port", "standby_port"
    ):
        taken.update(p for p in ports if p)
    for port, rest in ClusterMember.objects.filter(node=node).values_list("port", "rest_port"):
        taken.update((port, rest))
    for ports in ClusterEntry.objects.filter(node=node).values_list("port", "standby_port", "pooler_port"):
        taken.update(ports)
    return taken


def allocate_ports(node: Node, members: int = 0) -> tuple[int, int, list[tuple[int, int]]]:
    """The lowest free (server, pooler) pair of the node's range, and a (port, REST port) pair for
    each of ``members`` members. On this process's own node the ports must be free to bind here
    too."""
    first, last = port_range(node)
    taken = _taken_ports(node)
    pairs: list[tuple[int, int]] = []
    for port in range(first, last, 2):
        pair = (port, port + 1)
        if pair[0] in taken or pair[1] in taken:
            continue
        if node.is_here and not (_port_free(pair[0]) and _port_free(pair[1])):
            continue
        pairs.append(pair)
        if len(pairs) == members + 1:
            return pairs[0][0], pairs[0][1], pairs[1:]
    raise _no_free_ports(node, first, last)


def allocate_standby_port(node: Node, also_taken: Collection[int] = ()) -> int:
    """The lowest free single port of the node's range for HAProxy's read-only (standby) port;
    ``also_taken``: ports allocated in the same transaction, not yet in a row."""
    first, last = port_range(node)
    taken = _taken_ports(node) | set(also_taken)
    for port in range(first, last + 1):
        if port not in taken and (not node.is_here or _port_free(port)):
            return port
    raise _no_free_ports(node, first, last)


def allocate_entry_ports(node: Node) -> tuple[int, int, int]:
    """A cluster's entry point on ``node`` (``ClusterEntry``): the three lowest free single ports
    of its range: read-write, read-only, the pools'."""
    port = allocate_standby_port(node)
    standby = allocate_standby_port(node, also_taken=(port,))
    return port, standby, allocate_standby_port(node, also_taken=(port, standby))


def free_pairs(node: Node) -> int:
    """How many (server, pooler) pairs of the node's range no cluster or member holds (without
    trying to bind them: this may run in the web, away from the node)."""
    first, last = port_range(node)
    taken = _taken_ports(node)
    return sum(1 for port in range(first, last, 2) if port not in taken and port + 1 not in taken)
