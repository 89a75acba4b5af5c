"""Where the panel and PgBouncer reach a cluster's server: its own socket and port, or with
standbys the primary member's (on another node: over TCP)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from panel.clusters.models.clusters import Cluster


def server_port(cluster: Cluster) -> int:
    """The port of the server the panel and PgBouncer reach over the socket: the cluster's own,
    or with standbys the primary member's (the first member's before any is known)."""
    if not cluster.is_ha:
        return int(cluster.port or 0)
    members = cluster.members.order_by("-role", "name")  # "primary" before "standby"/"unknown"
    primary = members.filter(role="primary").values_list("port", flat=True).first()
    return int(primary or members.values_list("port", flat=True).first() or cluster.port or 0)


def server_host(cluster: Cluster) -> str:
    """Where the panel and PgBouncer reach that server: the cluster's socket directory, or over
    TCP the address of a primary member on another node than the cluster's."""
    if cluster.is_ha:
        primary = cluster.members.filter(role="primary").select_related("node").first()
        if primary is not None and primary.is_remote:
            return primary.host
    return str(cluster.socket_dir)
