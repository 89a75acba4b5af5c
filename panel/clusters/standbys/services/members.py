"""The members of a cluster with standbys as the user sees them: the list (command line, API,
Overview). Moving the primary to another member is ``switchover``."""

from __future__ import annotations

from panel.clusters.models import Cluster
from panel.clusters.standbys.lib.patroni import MemberInfo
from panel.clusters.standbys.services import ha, remote_members
from panel.core.agent import on_node


@on_node(timeout=15)
def list_members(cluster: Cluster) -> list[MemberInfo]:
    """Every member with its role, node, port, postmaster pid, state, lag and timeline, as
    Patroni says now (the rows as last recorded when no Patroni answers)."""
    if not cluster.is_ha:
        return []
    # The rows as Patroni says now; a change of primary seen here first is an event all the same.
    ha.refresh_members(cluster)
    return [
        MemberInfo(
            name=m.name,
            role=m.role,
            node=m.node.name,
            port=m.port,
            pid=remote_members.postmaster_pid(m) if m.is_remote else m.pid,
            state=m.state,
            lag_bytes=m.lag_bytes,
            timeline=m.timeline,
        )
        for m in cluster.members.select_related("node").order_by("name")
    ]
