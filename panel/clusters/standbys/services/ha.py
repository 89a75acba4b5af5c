"""Clusters with standbys (``num_nodes`` 2-3): Patroni runs every member, the panel's etcd (one
etcd cluster over the nodes: standbys/services/etcd.py) holds the leader key, HAProxy keeps the
cluster's port on the primary, and PgBouncer follows the primary (Patroni's ``on_role_change``
callback at once, ``refresh_members`` afterwards).

Member 1's data directory is the cluster's ``pgdata``: provisioning makes it as for a one-member
cluster (initdb, TLS, the panel's configuration), then Patroni takes it over as the primary and
makes the standbys from it (pg_basebackup). Every member reads the panel's configuration from
there (an absolute include), and its pg_hba.conf and pg_ident.conf.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from panel.clusters import hooks
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import (
    Cluster,
    ClusterMember,
    ClusterStatus,
    EventLevel,
    MemberRole,
    Node,
    credentials,
)
from panel.clusters.services import transitions
from panel.clusters.standbys.engine import haproxy, member_tls, patroni
from panel.clusters.standbys.lib import haproxy as haproxy_lib
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.services import (
    entry_points,
    etcd,
    etcd_auth,
    etcd_membership,
    ha_roles,
    remote_members,
)
from panel.clusters.standbys.services.ha_files import (
    etcd_data_dir as etcd_data_dir,
)
from panel.clusters.standbys.services.ha_files import (
    follow_etcd,
    ha_dir,
    haproxy_config_path,
    member_log_path,
    members_of,
    scope,
)
from panel.clusters.standbys.services.ha_files import (
    member_config_path as member_config_path,
)
from panel.clusters.standbys.services.ha_files import (
    spec as spec,
)
from panel.clusters.standbys.services.ha_files import (
    write_configs as write_configs,
)
from panel.core import runas
from panel.core.errors import N_, Message, Term
from panel.core.runas import EngineError, OsUser

log = logging.getLogger(__name__)
Statuses = list[patroni_lib.MemberStatus]

# --- processes -----------------------------------------------------------------------------------


def ensure_etcd(node: Node, timeout: float) -> None:
    """The panel's etcd before a cluster of ``node`` (this process's) starts: this node's member
    running when it holds one (the seed when there is none yet: standbys/services/etcd.py), and a voting
    member answering."""
    etcd.ensure_here(node, timeout, claim=True)
    if not etcd.wait_answering(timeout):
        raise EngineError(f"No member of the panel's etcd answered within {timeout:.0f} s.")
    etcd_auth.enable_when_ready(node, timeout)


def start_members(cluster: Cluster, user: OsUser, timeout: float) -> None:
    """etcd, then every member's Patroni (member 1 first: it holds the data and becomes the
    primary; the others are copied from it), then HAProxy."""
    patroni.check_installed(user)
    assert cluster.node is not None  # a standby cluster's members run on nodes
    ensure_etcd(cluster.node, timeout)
    write_configs(cluster, user)
    runas.make_private_dir(cluster.socket_dir, user)
    runas.make_private_dir(cluster.log_file.parent, user)
    members = members_of(cluster)
    for index, member in enumerate(members):
        if member.is_remote:
            remote_members.start(member)  # by its node's agent, copied from the primary
            continue
        if index > 0:
            runas.make_private_dir(Path(member.data_dir).parent, user)
        patroni.start_member(
            member_config_path(cluster, member),
            member_log_path(cluster, member),
            user,
            isolation.member_cgroup(cluster, member.name),
            data_dir=member.data_dir,
        )
        if index == 0:
            _take_over(cluster, member, timeout)
    start_haproxy(cluster, user, timeout)


def _take_over(cluster: Cluster, member: ClusterMember, timeout: float) -> None:
    """Member 1 becomes the primary; PostgreSQL first starts with initdb's max_connections (what
    pg_control says), so a restart applies the plan's (Patroni's "pending restart")."""
    if not _wait_primary(cluster, timeout):
        raise EngineError(
            f"No member became the primary within {timeout:.0f} s; see {member_log_path(cluster, member)}."
        )
    # Before any standby starts: they are copied from the primary, and stream, as this role.
    ha_roles.ensure_member_role(cluster)
    if not patroni.pending_restart(member.rest_port, member.host):
        return
    # Refused while Patroni still finishes the promotion, hence asked again.
    status, text = patroni.restart(
        member.rest_port, host=member.host, auth=credentials.rest_credentials(cluster), timeout=timeout
    )
    if status != 200 or not _wait_primary(cluster, timeout):
        raise EngineError(f"Restarting {member.name} with the plan's settings failed: {text}")


def start_haproxy(cluster: Cluster, user: OsUser, timeout: float) -> None:
    haproxy.start(
        haproxy_config_path(cluster),
        ha_dir(cluster) / "haproxy.pid",
        user,
        isolation.server_cgroup(cluster),
        timeout=timeout,
    )


def reload_haproxy(cluster: Cluster, user: OsUser, timeout: float) -> None:
    """HAProxy's configuration loaded again without cutting a session (checked first), here and
    at the cluster's entry on every other member node (``entry_points.push``)."""
    haproxy.reload(
        haproxy_config_path(cluster),
        ha_dir(cluster) / "haproxy.pid",
        cluster.socket_dir / haproxy_lib.HAPROXY_SOCKET,
        user,
        isolation.server_cgroup(cluster),
        timeout=timeout,
    )
    entry_points.push(cluster)


def stop_members(cluster: Cluster) -> None:
    """HAProxy, then the standbys, then the primary (no failover on the way down)."""
    haproxy.stop(haproxy_config_path(cluster))
    members = members_of(cluster)
    members.sort(key=lambda m: m.role == MemberRole.PRIMARY)
    for member in members:
        if member.is_remote:
            remote_members.stop(member)
        else:
            patroni.stop_member(member_config_path(cluster, member))


def kill_members(cluster: Cluster) -> None:
    """A cluster being deleted: HAProxy, every Patroni and postmaster killed, no shutdown."""
    haproxy.stop(haproxy_config_path(cluster), timeout=2)
    for member in members_of(cluster):
        if member.is_remote:
            remote_members.remove(member)
        else:
            patroni.kill_member(member_config_path(cluster, member), postgres.postmaster_pid(member.pgdata))


def forget(cluster: Cluster) -> None:
    """A deleted cluster's keys out of the panel's etcd (which runs on for the others)."""
    if cluster.node is None:
        return
    etcd.delete_prefix(f"{patroni_lib.NAMESPACE}{scope(cluster)}/")
    try:
        etcd_auth.forget_scope(scope(cluster))
    except EngineError as exc:
        log.warning("etcd: the user of %s not deleted: %s", scope(cluster), exc)


def _wait_primary(cluster: Cluster, timeout: float) -> bool:
    return bool(
        refresh_until(
            cluster, lambda statuses: any(s.is_primary and s.state == "running" for s in statuses), timeout
        )
    )


def wait_healthy(cluster: Cluster, timeout: float) -> bool:
    """Until one member is the running primary and every other one streams from it, one of them
    synchronously."""

    def healthy(statuses: list[patroni_lib.MemberStatus]) -> bool:
        primaries = [s for s in statuses if s.is_primary and s.state == "running"]
        streaming = [s for s in statuses if not s.is_primary and s.state == "streaming"]
        # Patroni fails over only to a synchronous standby: until one is named, it would restart
        # a crashed primary in place instead.
        synchronous = any(s.sync for s in streaming)
        return len(primaries) == 1 and len(streaming) == cluster.num_nodes - 1 and synchronous

    return bool(refresh_until(cluster, healthy, timeout))


def refresh_until(
    cluster: Cluster, condition: Callable[[list[patroni_lib.MemberStatus]], bool], timeout: float
) -> list[patroni_lib.MemberStatus] | None:
    """Patroni asked every half second until ``condition`` holds of the members (then recorded);
    None after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        statuses = read_statuses(cluster)
        if statuses and condition(statuses):
            record_statuses(cluster, statuses)
            return statuses
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)


# --- what Patroni says ---------------------------------------------------------------------------


def read_statuses(cluster: Cluster) -> list[patroni_lib.MemberStatus]:
    """The members as the first Patroni that answers describes them (none: no answer)."""
    for member in members_of(cluster):
        status, text = patroni.rest("GET", member.rest_port, "/cluster", timeout=1.5, host=member.host)
        if status == 200:
            try:
                return patroni_lib.parse_cluster(text)
            except ValueError:
                continue
    return []


HEALTHY_STATES = frozenset({"running", "streaming"})
SWITCHING: set[object] = set()  # clusters this process switches over (only it records them)


def replay_lag(cluster: Cluster, standby: ClusterMember) -> int | None:
    """Bytes of WAL the primary wrote that ``standby`` has not replayed yet (0: its replay is past
    the primary's position read just before), asked of both servers now (Patroni's is as old as its
    loop); None: no answer. One on another node is asked at its node's address (pg_hba's line)."""
    remote: dict[str, Any] | None = (
        {"host": standby.host, "port": standby.port, **member_tls.panel_client_params(cluster)}
        if standby.is_remote
        else None
    )
    try:
        with dbconn.admin_connection(cluster) as conn:
            row = conn.execute("SELECT pg_catalog.pg_current_wal_lsn()").fetchone()
        standby_conn = (
            dbconn.connect(
                quiet_log=True,
                user=settings.PANEL_SUPERUSER,
                password=credentials.superuser_password(cluster),
                dbname=dbconn.MAINTENANCE_DATABASE,
                **remote,
            )
            if remote
            else dbconn.admin_connection(cluster, port=standby.port)
        )
        with standby_conn as conn:
            lag = conn.execute(
                "SELECT pg_catalog.pg_wal_lsn_diff(%s, pg_catalog.pg_last_wal_replay_lsn())",
                [row[0] if row else None],
            ).fetchone()
    except dbconn.DatabaseError:
        return None
    return max(0, int(lag[0])) if lag and lag[0] is not None else None


def record_statuses(cluster: Cluster, statuses: list[patroni_lib.MemberStatus]) -> None:
    """Write what Patroni says into the member rows. While no member is the primary (a failover
    under way) the last primary keeps its role with its state: a look in that gap must not lose
    which member led, or the promotion after it would be taken in without its event and repoint."""
    by_name = {s.name: s for s in statuses}
    now = timezone.now()
    leaderless = not any(s.is_primary for s in statuses)
    for member in members_of(cluster):
        status = by_name.get(member.name)
        member.pid = postgres.postmaster_pid(Path(member.data_dir))
        kept = leaderless and member.role == MemberRole.PRIMARY
        if status is None:
            member.state, member.lag_bytes = "stopped", None
            member.role = MemberRole.PRIMARY if kept else MemberRole.UNKNOWN
        else:
            member.role = MemberRole.PRIMARY if status.is_primary or kept else MemberRole.STANDBY
            member.state, member.lag_bytes, member.timeline = status.state, status.lag_bytes, status.timeline
            if status.state in HEALTHY_STATES and (member.pid is not None or member.is_remote):
                member.healthy_at = now
        member.updated_at = now
        member.save(
            update_fields=["role", "state", "lag_bytes", "timeline", "pid", "healthy_at", "updated_at"]
        )


def refresh_members(cluster: Cluster, *, cause: str = "failover", seen: Statuses | None = None) -> str | None:
    """Read the members' states from Patroni (or take those ``seen``) into their rows. When the primary
    changed since the last look: PgBouncer repointed (the pools' configuration rendered again), an event
    with how long the cluster had no primary, and the owner told. Returns the new primary's name then."""
    statuses = seen or (
        read_statuses(cluster) if cause == "switchover" or cluster.pk not in SWITCHING else []
    )
    if not statuses:
        return None
    before = cluster.members.filter(role=MemberRole.PRIMARY).first()
    record_statuses(cluster, statuses)
    now_primary = next((s for s in statuses if s.is_primary and s.state == "running"), None)
    if now_primary is None or before is None or before.name == now_primary.name:
        return None
    since = before.healthy_at or before.updated_at
    seconds = max(0.0, (timezone.now() - since).total_seconds())
    message = Message(
        N_("%(cause)s: %(new)s is the primary now (was %(old)s); writes resumed within %(s).1f s."),
        cause=Term(CAUSE_WORDS.get(cause, cause)),
        new=now_primary.name,
        old=before.name,
        s=seconds,
    )
    transitions.log_event(
        cluster, cause, message, EventLevel.WARNING if cause == "failover" else EventLevel.INFO
    )
    if not cluster.node_silent:  # else its node is lost: its pools are rendered when it returns
        try:
            hooks.pooler.reapply_config(cluster)
        except Exception:  # the callback repointed it already; the next look tries again
            log.exception("repointing PgBouncer of %s", cluster.pk)
    hooks.role_changed(cluster, message)
    return now_primary.name


CAUSE_WORDS = {"failover": N_("Failover"), "switchover": N_("Switchover")}


def supervise(cluster: Cluster) -> list[str]:
    """The reconciler's part for a cluster with standbys: every member's Patroni running and
    pointed at the panel's etcd as it is now (``supervise_etcd`` ran first), and HAProxy (Patroni
    itself restarts, rewinds or rebuilds its PostgreSQL)."""
    notes = []
    user = isolation.os_user(cluster)
    timeout = settings.PANEL_COMMAND_TIMEOUT
    for member in members_of(cluster):
        config = member_config_path(cluster, member)
        if not member.is_remote and (note := follow_etcd(cluster, member)):
            notes.append(note)
        if not member.is_remote and patroni.member_pid(config) is None:  # (its node's reconciler)
            join = isolation.member_cgroup(cluster, member.name)
            patroni.start_member(
                config, member_log_path(cluster, member), user, join, data_dir=member.data_dir
            )
            transitions.log_event(
                cluster,
                "member-restarted",
                Message(N_("Patroni of %(member)s was not running; started it again."), member=member.name),
                EventLevel.WARNING,
            )
            notes.append(f"{cluster.name}: started Patroni of {member.name}")
    if haproxy.pid(haproxy_config_path(cluster)) is None:
        start_haproxy(cluster, user, timeout)
        notes.append(f"{cluster.name}: started HAProxy")
    refresh_members(cluster)
    return notes


def supervise_etcd() -> list[str]:
    """The reconciler's part for the panel's etcd on this node: its member as the rows say (the
    seed claimed when a cluster here needs one and none exists), then one membership step."""
    node = Node.objects.filter(name=settings.PANEL_NODE_NAME).first()
    if node is None:
        return []
    needed = Cluster.objects.here().filter(num_nodes__gt=1, status__in=ClusterStatus.SERVING).exists()
    try:
        note = etcd.ensure_here(node, settings.PANEL_COMMAND_TIMEOUT, claim=needed)
        notes = ([note] if note else []) + etcd_membership.rebalance()
        # Once every cluster's Patroni here and elsewhere logs in (``supervise`` gives them their
        # users first): a later round of whichever agent sees them all.
        if auth := etcd_auth.enable_when_ready(node, settings.PANEL_COMMAND_TIMEOUT):
            notes.append(auth)
        return notes
    except EngineError as exc:
        return [f"etcd: {exc}"]


def supervise_all() -> list[str]:
    notes: list[str] = supervise_etcd()
    for cluster in Cluster.objects.here().filter(num_nodes__gt=1, status__in=ClusterStatus.SERVING):
        try:
            notes += supervise(cluster)
        except EngineError as exc:
            notes.append(f"{cluster.name}: {exc}")
    return notes + remote_members.supervise_here() + ha_roles.upgrade_members_here()
