"""What a test sees of a cluster whose members run on the namespace nodes
(tests/fixtures/nsnodes.py): each member's server over its own node's socket, the primary's
replication as it sees it, the panel's etcd (its client files as a node keeps them, its
members, leader and term), a write through the entry point, a reconciler round on every node.
Observations, not what a client does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings

from panel import crypto
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster, ClusterMember, EtcdMember, Node
from panel.clusters.standbys.engine import etcd as etcd_engine
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.core import taskqueue
from panel.core.polling import wait_for
from tests.fixtures.nsnodes import NsAgent, NsNodes

RECONCILE = "panel.clusters.tasks.reconcile"


def socket_dir(agent: NsAgent, cluster: Cluster) -> Path:
    """The cluster's socket directory on ``agent``'s node (its data directory, not this process's)."""
    return agent.data_dir / cluster.socket_dir.relative_to(cluster.data_root.parent.parent)  # (its clusters/)


def as_superuser(
    agent: NsAgent, cluster: Cluster, member: ClusterMember, dbname: str = "postgres"
) -> psycopg.Connection:
    """The panel's superuser on ``member``'s server, over its node's socket (peer authentication):
    what the test observes, not what a client does."""
    return psycopg.connect(
        host=str(socket_dir(agent, cluster)),
        port=member.port,
        user=settings.PANEL_SUPERUSER,
        dbname=dbname,
        autocommit=True,
        connect_timeout=5,
    )


def replication(nsnodes: NsNodes, cluster: Cluster) -> tuple[ClusterMember, list[tuple[str, str]]] | None:
    """The member in charge and (client_addr, state) of the standbys streaming from it, or None
    while no member says it is the primary."""
    for member in cluster.members.select_related("node"):
        agent = nsnodes.agent_on(member.node.name)
        try:
            with as_superuser(agent, cluster, member) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                if row is None or row[0]:
                    continue
                rows = conn.execute("SELECT host(client_addr), state FROM pg_stat_replication").fetchall()
        except psycopg.Error:
            continue
        return member, [(str(addr), str(state)) for addr, state in rows]
    return None


def reconcile_everywhere(nsnodes: NsNodes, *, but: str | None = None) -> None:
    """One reconciler round sent to every node's tasks queue (beat's fan-out, by hand); ``but``:
    a node left out (a lost one, which would run the rounds queued for it on its return)."""
    for agent in nsnodes.agents:
        if agent.name != but:
            taskqueue.send(RECONCILE, [], queue=Node.objects.get(name=agent.name).tasks_queue)


def panel_etcd_tls(agent: NsAgent) -> etcd_lib.TlsPaths:
    """The panel's etcd client files as ``agent``'s node keeps them (its CA, its client pair,
    etcd's root with the panel's derived password)."""
    tls = agent.data_dir / "etcd" / "tls"
    password = crypto.derived_secret(f"etcd user {etcd_lib.ROOT}")
    return etcd_lib.TlsPaths(
        str(tls / "ca.crt"), str(tls / "client.crt"), str(tls / "client.key"), etcd_lib.ROOT, password
    )


def write_through(details: ConnectionDetails, note: str) -> str | None:
    """One row written through the entry point; the address of the server that took it, None
    when refused or cut."""
    try:
        with psycopg.connect(details.uri(), connect_timeout=3, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '3s'")
            conn.execute("INSERT INTO spread VALUES (%s)", [note])
            row = conn.execute("SELECT host(inet_server_addr())").fetchone()
    except psycopg.Error:
        return None
    return str(row[0]) if row else None


def etcd_view(nsnodes: NsNodes) -> tuple[list[str], Any, dict[str, str]]:
    """The panel's etcd as a node's client sees it: URLs, TLS files, member id → node name."""
    urls = [f"https://{r.host}:{r.client_port}" for r in EtcdMember.objects.all()]
    tls = panel_etcd_tls(nsnodes.agents[0])
    return urls, tls, {m.id: m.name for m in etcd_engine.members(urls, tls)}


def etcd_term(nsnodes: NsNodes) -> int:
    """The panel's etcd's Raft term: one more for each election held."""
    urls, tls, _names = etcd_view(nsnodes)
    return int(etcd_engine.call(urls, "/v3/maintenance/status", {}, tls)["raftTerm"])


def etcd_leader_to(nsnodes: NsNodes, node_name: str) -> str:
    """The panel's etcd leadership moved to ``node_name``'s member (etcd's transfer, asked of the
    leader); the name of the node whose member leads afterwards."""
    urls, tls, names = etcd_view(nsnodes)
    leader = etcd_engine.leader(urls, tls)
    target = next(i for i, name in names.items() if name == node_name)
    if leader != target:
        leader_url = next(
            u
            for u, r in zip(urls, EtcdMember.objects.all(), strict=True)
            if r.node and r.node.name == names[leader]
        )
        etcd_engine.call(
            [leader_url], "/v3/maintenance/transfer-leadership", {"targetID": str(int(target, 16))}, tls
        )
        wait_for(lambda: etcd_engine.leader(urls, tls) == target, 15, interval=0.2)
    return names[etcd_engine.leader(urls, tls)]
