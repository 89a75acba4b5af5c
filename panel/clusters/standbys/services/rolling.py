"""Rolling restarts of a cluster with standbys (restart, resize, installing updates): one member
at a time, so that the cluster keeps serving.

1. The settings Patroni keeps in etcd (``max_connections`` and the WAL settings, which Patroni
   passes on PostgreSQL's command line) are changed with ``PATCH /config``; the panel's own
   configuration (``shared_buffers`` …) is already written; the cluster's cgroup takes the plan's
   limits.
2. Each standby restarts (Patroni's ``POST /restart``), and the next waits until it streams again.
3. A switchover (the pools paused meanwhile) makes a restarted standby the primary; the old
   primary comes back as a standby on the new settings, restarted once more if Patroni still says
   a restart is pending. A restart the user asked for (``keep_primary``) moves nothing instead:
   the primary restarts in place, its Patroni holding the leader key, the pools paused meanwhile,
   so that it stays on the member it was on (it used to land on whichever standby was synchronous).

A cluster of one member never comes here: it restarts as it always did.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings

from panel.clusters import hooks
from panel.clusters.engine import isolation
from panel.clusters.models import Cluster, ClusterMember, credentials
from panel.clusters.services import transitions
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.services import ha, switchover
from panel.core.errors import N_
from panel.core.runas import EngineError

log = logging.getLogger(__name__)


def rolling_restart(cluster: Cluster, *, keep_primary: bool = False) -> str:
    """Every member restarted onto the cluster's current plan and configuration, standbys first,
    the primary after a switchover, or in place with ``keep_primary``. Returns the member that
    was the primary when it began; raises EngineError when a member does not come back."""
    timeout = float(settings.PANEL_COMMAND_TIMEOUT)
    isolation.server_cgroup(cluster)  # the plan's limits on the cluster's cgroup (HAProxy)
    for member in cluster.members.all():  # and on each member's own (elsewhere: its agent's)
        if not member.is_remote:
            isolation.member_cgroup(cluster, member.name)
    ha.write_configs(cluster, isolation.os_user(cluster))
    if not ha.wait_healthy(cluster, timeout):
        raise EngineError("The cluster's members are not all healthy; nothing was restarted.")
    patch_config(cluster)
    statuses = ha.read_statuses(cluster)
    primary = next(s.name for s in statuses if s.is_primary)
    transitions.set_progress(cluster, 20, N_("Restarting the standbys, one at a time"))
    for status in statuses:
        if not status.is_primary:
            restart_member(cluster, cluster.members.get(name=status.name), timeout)
    # Patroni names a synchronous standby again a loop or more after the last one streams (later
    # on a loaded machine), and the switchover takes only a synchronous one.
    if not ha.wait_healthy(cluster, timeout):
        raise EngineError("The standbys do not all stream again, one synchronously, after their restart.")
    old = cluster.members.get(name=primary)
    if keep_primary:
        transitions.set_progress(
            cluster, 60, N_("Restarting the primary in place; the pools' clients wait meanwhile")
        )
        restart_primary(cluster, old, timeout)
        if not ha.wait_healthy(cluster, timeout):
            raise EngineError("The standbys do not all stream again after the primary's restart.")
        ha.refresh_members(cluster)
        return primary
    transitions.set_progress(cluster, 60, N_("Switching over to a restarted standby"))
    switchover.switch(cluster, None)
    if not _wait_streaming(cluster, old.name, timeout):
        raise EngineError(f"{old.name} did not stream again after the switchover.")
    if patroni.pending_restart(old.rest_port, old.host):
        restart_member(cluster, old, timeout)
    ha.refresh_members(cluster, cause="switchover")
    return primary


def patch_config(cluster: Cluster) -> None:
    """The cluster-wide settings in etcd as the plan has them now (Patroni marks each member
    "pending restart" where a setting needs one)."""
    primary = next(s for s in ha.read_statuses(cluster) if s.is_primary)
    leader = cluster.members.get(name=primary.name)
    body = patroni_lib.dynamic_config(ha.spec(cluster))
    auth = credentials.rest_credentials(cluster)
    status, text = patroni.rest(
        "PATCH", leader.rest_port, "/config", body, timeout=10, host=leader.host, auth=auth
    )
    if status != 200:
        raise EngineError(f"Patroni did not take the new settings: {text.strip() or status}")


def restart_member(cluster: Cluster, member: ClusterMember, timeout: float) -> None:
    """One standby's PostgreSQL restarted by its Patroni; returns once it streams again."""
    deadline = time.monotonic() + timeout
    _ask_restart(cluster, member, timeout)
    if not _wait_streaming(cluster, member.name, max(1.0, deadline - time.monotonic())):
        raise EngineError(f"{member.name} did not stream again within {timeout:.0f} s after its restart.")


def restart_primary(cluster: Cluster, member: ClusterMember, timeout: float) -> None:
    """The primary's PostgreSQL restarted by its own Patroni, which keeps the leader key
    meanwhile (no standby takes over). The pools are paused from before the shutdown until it
    accepts writes again: their clients wait instead of failing on a server going away."""
    deadline = time.monotonic() + timeout
    with hooks.pooler.paused(cluster):
        _ask_restart(cluster, member, timeout)
        if not _wait_primary(cluster, member.name, max(1.0, deadline - time.monotonic())):
            raise EngineError(f"{member.name} did not run again as the primary within {timeout:.0f} s.")


def _ask_restart(cluster: Cluster, member: ClusterMember, timeout: float) -> None:
    status, text = patroni.restart(
        member.rest_port, host=member.host, auth=credentials.rest_credentials(cluster), timeout=timeout
    )
    if status != 200:
        raise EngineError(f"Restarting {member.name} failed: {text.strip() or status}")


def _wait_primary(cluster: Cluster, name: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for status in ha.read_statuses(cluster):
            if status.name == name and status.is_primary and status.state == "running":
                return True
        time.sleep(0.2)
    return False


def _wait_streaming(cluster: Cluster, name: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for status in ha.read_statuses(cluster):
            if status.name == name and not status.is_primary and status.state == "streaming":
                return True
        time.sleep(0.2)
    return False
