"""The cluster's pools on every other node that holds one of its members (issue 39).

A cluster with standbys has an entry on each node holding a member (``clusters.services.
entry_points``: HAProxy there). Its pools are served there too, by a PgBouncer of the cluster on
that node's pool port (``ClusterEntry.pooler_port``) with the same pools, users and trusted sources
as the cluster's own. It reaches the primary through that node's HAProxy (on loopback, over TLS,
SCRAM with the auth file's secrets, read from the member on that node), so it never needs to be
repointed: HAProxy follows the leader, and ``server_login_retry`` waits out a failover. What it
does not do: pause for a switchover (only the cluster's own PgBouncer is paused; here a
transaction in flight at that moment fails and its client reconnects).

The cluster's node asks each entry node's agent after a change of its pools or users
(``push``); each node's reconciler brings its own up to date every round (``reconcile_here``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings

from panel.clusters.face import dbconn, isolation
from panel.clusters.models import Cluster, ClusterEntry, ClusterStatus, Node
from panel.core import agent
from panel.core.agent import on_node
from panel.core.errors import N_, ServiceError
from panel.core.runas import EngineError
from panel.pools.engine import console, disk, supervisor
from panel.pools.engine.rendering import ADMIN_ROLE, fds_needed, render_config
from panel.pools.lib.pgbouncer_ini import ServerTarget, needs_restart
from panel.pools.models import Pooler

log = logging.getLogger(__name__)

CALL_TIMEOUT = 30.0
START_TIMEOUT = 10.0
# This node's HAProxy of the cluster, which the pools reach the members through (entry_points
# binds loopback as well as the node's addresses; HAProxy always lets loopback in).
LOOPBACK = "127.0.0.1"


def entry_files(cluster: Cluster, entry: ClusterEntry) -> disk.BouncerFiles:
    """Where the cluster's PgBouncer keeps its files on the entry's node (under that node's data
    directory, as the cluster's own does on its node), and its port there."""
    return disk.BouncerFiles(
        cluster.data_root / "pgbouncer", cluster.socket_dir, entry.pooler_port, cluster.os_user_name
    )


def serve_here(cluster: Cluster) -> str | None:
    """This node's PgBouncer of ``cluster`` as the rows say: its files written where they differ,
    then reloaded, or started; stopped when the cluster has no pool or does not serve. Returns a
    note when it acted."""
    node = Node.objects.filter(name=settings.PANEL_NODE_NAME).first()
    entry = ClusterEntry.objects.filter(cluster=cluster, node=node).first() if node else None
    if entry is None:
        return None
    files = entry_files(cluster, entry)
    running = supervisor.running_pid(files) is not None
    pools = list(cluster.pools.order_by("name"))
    pooler = Pooler.objects.filter(cluster=cluster).first()
    member = cluster.members.filter(node=node).order_by("name").first()
    if not pools or pooler is None or member is None or not cluster.is_serving:
        if running:
            supervisor.stop(files)
            return f"{cluster.name}: its pools on {entry.node.name} stopped"
        return None
    config = render_config(
        cluster, pools, pooler, files, target=ServerTarget(LOOPBACK, entry.port), secrets_port=member.port
    )
    current = (disk.read_text(files.ini), disk.read_text(files.auth), disk.read_text(files.hba))
    if running and current == (config.ini, config.auth, config.hba):
        return None
    disk.prepare_directory(files)
    # Clients see the cluster's own certificate (the member's copy of it, from the primary's data).
    disk.copy_private(files, Path(member.data_dir) / "server.crt", files.tls_cert)
    disk.copy_private(files, Path(member.data_dir) / "server.key", files.tls_key)
    restart = running and needs_restart(current[0], config.ini)
    disk.install(files, config.ini, config.auth, config.hba)
    if running and not restart:
        with console.connect(files.socket_dir, files.port, ADMIN_ROLE, pooler.admin_password) as conn:
            conn.execute("RELOAD")
        return f"{cluster.name}: its pools on {entry.node.name} reloaded"
    if restart:
        supervisor.stop(files)
    join = isolation.server_cgroup(cluster)
    supervisor.start(files, fds_needed=fds_needed(cluster), timeout=START_TIMEOUT, join=join)
    return f"{cluster.name}: its pools on {entry.node.name} started (port {entry.pooler_port})"


@on_node(timeout=CALL_TIMEOUT)
def serve_for_entry(entry: ClusterEntry) -> str | None:
    """``serve_here`` run by the agent of the entry's node (the caller names the queue)."""
    try:
        return serve_here(entry.cluster)
    except (
        EngineError,
        OSError,
        console.ConsoleError,
        supervisor.SupervisorError,
        dbconn.DatabaseError,
    ) as exc:
        log.warning("pools of %s on this node: %s", entry.cluster_id, exc)
        raise ServiceError(
            N_("The pools on node %(node)s did not take the change."),
            code="pool.entry_failed",
            params={"node": entry.node.name},
        ) from None


def push(cluster: Cluster) -> list[str]:
    """Every entry node's pools brought to what the rows say now (after the cluster's own
    PgBouncer took the change). A node that does not answer is said in the returned notes and
    catches up at its reconciler's next round; nothing is rolled back for it (its clients still
    reach the cluster through the other entries)."""
    notes = []
    for entry in ClusterEntry.objects.filter(cluster=cluster).select_related("node"):
        try:
            if entry.node.is_here:
                note = serve_here(cluster)
            else:
                note = agent.send(
                    f"{__name__}.serve_for_entry",
                    (entry,),
                    {},
                    timeout=CALL_TIMEOUT,
                    queue=entry.node.agent_queue,
                )
        except (ServiceError, EngineError, OSError) as exc:
            note = f"{cluster.name}: its pools on {entry.node.name} not updated: {exc}"
            log.warning("%s", note)
        if note:
            notes.append(note)
    return notes


def reconcile_here() -> list[str]:
    """This node's reconciler: the pools of every cluster with an entry here as the rows say."""
    notes = []
    entries = ClusterEntry.objects.filter(node__name=settings.PANEL_NODE_NAME).select_related("cluster")
    for entry in entries.exclude(cluster__status=ClusterStatus.DELETING):
        try:
            if note := serve_here(entry.cluster):
                notes.append(note)
        except (ServiceError, EngineError, OSError, console.ConsoleError, supervisor.SupervisorError) as exc:
            notes.append(f"{entry.cluster.name}: its pools here: {exc}")
        except dbconn.DatabaseError as exc:
            notes.append(f"{entry.cluster.name}: its pools here: the member's secrets unread: {exc}")
    return notes
