"""What keeps a local cluster apart from the others on this machine.

When the panel runs as root, each cluster's PostgreSQL and PgBouncer run as a system user of the
cluster's own (``Cluster.os_user_name``), which owns its data root (0700 directories, 0600 files),
so code running in one cluster cannot read another's data, keys or pooler files.

PgBouncer holds no role's password: it reaches the server over the cluster's Unix socket (0700,
the cluster's user), where ``pg_hba.conf`` authenticates it by ``peer`` through the ``pg_ident.conf``
map that lets the cluster's user log in as the cluster's roles. The map is rewritten, and the
server reloaded, whenever the roles change.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import psutil
from django.conf import settings

from panel.clusters.engine import cgroups, dbconn, postgres
from panel.clusters.lib import firewall
from panel.clusters.lib.pgconf import hba_address, ident_token_ok, render_hba, render_ident
from panel.clusters.models import MAX_NUM_NODES, Cluster, ClusterStatus, Node
from panel.clusters.models.firewall import trusted_source_values
from panel.clusters.models.servers import server_port
from panel.core import osusers, runas
from panel.core.polling import wait_ended, wait_for
from panel.core.runas import EngineError, OsUser

log = logging.getLogger(__name__)


RELOAD_TIMEOUT = 10.0
# Roles that never log in through PgBouncer: the panel's own, and PgBouncer's admin console role.
NOT_MAPPED = frozenset({"pgbouncer"})


def os_user(cluster: Cluster) -> OsUser:
    """Who runs this cluster's processes and owns its files (EngineError if that user is gone)."""
    return runas.os_user_named(cluster.os_user_name)


def ensure_cluster_user(cluster: Cluster) -> OsUser:
    """The cluster's own system user, created (and recorded on the cluster) when we are root;
    ourselves otherwise."""
    if os.geteuid() != 0:
        return runas.os_user()
    user = osusers.ensure_system_user(cluster.own_os_user_name)
    if cluster.os_user_name != user.name:
        cluster.os_user_name = user.name
        cluster.save(update_fields=["os_user_name", "updated_at"])
    return user


def remove_cluster_user(cluster: Cluster) -> None:
    """Remove the cluster's system user once its processes stopped and its files are gone.

    Only a user the panel made for this cluster is removed, never the global runner."""
    name = cluster.os_user_name
    if not name or name != cluster.own_os_user_name or os.geteuid() != 0:
        return
    try:
        osusers.remove_system_user(name)
        return
    except EngineError as exc:
        log.warning("removing %s: %s; stopping what still runs as it", name, exc)
    kill_leftover_processes(cluster)
    osusers.remove_system_user(name)


def kill_leftover_processes(cluster: Cluster) -> None:
    """SIGKILL whatever still runs as the cluster's own system user (a logger or PgBouncer that
    outlived its stop and may still write into the data root, or make userdel refuse). Everything
    of that user belongs to this cluster, which is being deleted; nothing is done for a cluster
    without a user of its own (it shares the global runner with others)."""
    name = cluster.os_user_name
    if not name or name != cluster.own_os_user_name or os.geteuid() != 0:
        return
    uid = _uid(name)
    if uid is None:
        return
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            continue
    wait_ended(procs, 10)  # a zombie has ended: its reaping (init's, in a container) is not awaited


def _uid(name: str) -> int | None:
    try:
        return runas.os_user_named(name).uid
    except EngineError:
        return None


def mapped_roles(cluster: Cluster) -> list[str]:
    """The roles PgBouncer may log in as: the cluster's users the panel knows."""
    panel_roles = {*settings.PANEL_ROLES, *NOT_MAPPED}
    names = [name for name in cluster.users.values_list("name", flat=True) if name not in panel_roles]
    # A row kept from before names were matched whole (issue 29: "name\n") cannot be written
    # to pg_ident.conf; leaving it out keeps every other role's change working.
    unwritable = [name for name in names if not ident_token_ok(name)]
    if unwritable:
        log.warning("roles of %s left out of pg_ident.conf: %r", cluster.pk, unwritable)
    return sorted(name for name in names if name not in unwritable)


def _addresses(node: Node | None) -> list[str]:
    # Both: members reach each other at Node.address (ClusterMember.host), a private network may
    # route them from the private one.
    return [node.address, node.private_address] if node is not None else []


def member_addresses(cluster: Cluster) -> list[str]:
    """The addresses of the nodes holding this cluster's members (pg_hba.conf's member lines)."""
    return [a for m in cluster.members.select_related("node").order_by("name") for a in _addresses(m.node)]


def _client_addresses(cluster: Cluster) -> list[str]:
    """Where a member's TCP clients come from: the cluster's node (PgBouncer, the panel) and the
    cluster's entry on every member node (its HAProxy reaches the members from there)."""
    return list(dict.fromkeys(a for a in [*_addresses(cluster.node), *member_addresses(cluster)] if a))


def replica_addresses(cluster: Cluster) -> list[str]:
    """The addresses of the other nodes its read-only replicas run on (they stream from there);
    a replica being deleted no longer counts."""
    rows = (
        cluster.replicas.exclude(node=cluster.node_id)
        .exclude(node__isnull=True)
        .exclude(status=ClusterStatus.DELETING)
    )
    addresses = []
    for address in sorted(set(rows.values_list("node__address", flat=True))):
        try:
            hba_address(address)
        except ValueError:
            log.warning("replicas of %s: node address %r left out of pg_hba.conf", cluster.pk, address)
            continue
        addresses.append(address)
    return addresses


def _wanted_auth(cluster: Cluster, user: OsUser) -> dict[Path, str]:
    """pg_hba.conf and pg_ident.conf's paths and the texts they should hold."""
    return {
        cluster.hba_path: render_hba(
            settings.PANEL_SUPERUSER,
            settings.PANEL_MONITOR_ROLE,
            trusted_source_values(cluster),
            settings.PANEL_REPLICATION_ROLE,
            members_from=member_addresses(cluster) if cluster.is_ha else None,
            clients_from=firewall.proxy_networks(_client_addresses(cluster)) if cluster.is_ha else (),
            replicas_from=replica_addresses(cluster),
            panel_roles=(settings.PANEL_MIGRATION_ROLE,),
            backup_role=settings.PANEL_BACKUP_ROLE,
            member_role=settings.PANEL_MEMBER_ROLE if cluster.is_ha else "",
        ),
        cluster.ident_path: render_ident(
            user.name,
            mapped_roles(cluster),
            settings.PANEL_BACKUP_ROLE,
            settings.PANEL_SUPERUSER,
            [user.name, runas.current_user().name] if cluster.is_ha else (),
        ),
    }


def auth_config_current(cluster: Cluster, user: OsUser | None = None) -> bool:
    """Whether pg_hba.conf and pg_ident.conf hold what ``write_auth_config`` would write (read
    only: nothing written, nothing reloaded)."""
    for path, content in _wanted_auth(cluster, user or os_user(cluster)).items():
        try:
            if path.read_text() != content:
                return False
        except FileNotFoundError:
            return False
    return True


def write_auth_config(cluster: Cluster, user: OsUser | None = None) -> bool:
    """Write pg_hba.conf and pg_ident.conf (atomically, 0600, the cluster's user) where they differ
    from what they should be; True if one changed."""
    user = user or os_user(cluster)
    wanted = _wanted_auth(cluster, user)
    changed = False
    if cluster.is_ha:
        runas.make_private_dir(cluster.hba_path.parent, user)
    for path, content in wanted.items():
        try:
            if path.read_text() == content:
                continue
        except FileNotFoundError:
            pass
        runas.write_private_file(path, content, owner=user)
        changed = True
    return changed


def hba_errors(cluster: Cluster, port: int | None = None) -> list[str]:
    """What PostgreSQL cannot read in the pg_hba.conf on disk (``pg_hba_file_rules`` parses the
    file as it is now, not as loaded): checked before a reload, which would otherwise keep the old
    file in force with only a line in the server's log to say so. ``port``: one member's."""
    with dbconn.admin_connection(cluster, port=port) as conn:
        rows = conn.execute(
            "SELECT line_number, error FROM pg_catalog.pg_hba_file_rules WHERE error IS NOT NULL"
        ).fetchall()
    return [f"line {line}: {error}" for line, error in rows]


def reload_server_config(cluster: Cluster, *, timeout: float = RELOAD_TIMEOUT) -> None:
    """``pg_reload_conf()`` and wait until the postmaster has loaded the files.

    The reload is a signal; a session started after the postmaster reloaded sees a newer
    ``pg_conf_load_time()``, so new sessions are polled until one does."""
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()
        conn.execute("SELECT pg_catalog.pg_reload_conf()")
    before = row[0] if row else None
    # Standbys read the same pg_hba.conf and pg_ident.conf: they load them too (one that is not
    # running reads them when Patroni starts it).
    for port in cluster.members.exclude(port=server_port(cluster)).values_list("port", flat=True):
        try:
            with dbconn.admin_connection(cluster, port=port) as conn:
                conn.execute("SELECT pg_catalog.pg_reload_conf()")
        except dbconn.DatabaseError as exc:
            log.info("reloading member on port %s of %s: %s", port, cluster.pk, exc)

    def reloaded() -> bool:
        with dbconn.admin_connection(cluster) as conn:
            now = conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()
        return bool(now and before is not None and now[0] > before)

    if not wait_for(reloaded, timeout):
        raise EngineError(f"PostgreSQL did not reload its configuration within {timeout:.0f} s.")


def reload_member(cluster: Cluster, port: int, *, timeout: float = RELOAD_TIMEOUT) -> None:
    """One member's postmaster (on this node, through its socket) reloads; returns once a new
    session sees that it has (``reload_server_config``'s wait, for that member alone)."""
    with dbconn.admin_connection(cluster, port=port) as conn:
        row = conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()
        conn.execute("SELECT pg_catalog.pg_reload_conf()")
    before = row[0] if row else None

    def reloaded() -> bool:
        with dbconn.admin_connection(cluster, port=port) as conn:
            now = conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()
        return bool(now and before is not None and now[0] > before)

    if not wait_for(reloaded, timeout):
        raise EngineError(f"PostgreSQL did not reload its configuration within {timeout:.0f} s.")


def refresh_server_auth(cluster: Cluster) -> bool:
    """Bring pg_hba.conf and pg_ident.conf up to date with the cluster's roles and trusted sources
    and make a running server load them, once it has read the new pg_hba.conf without an error;
    True if something changed. Raises EngineError, DatabaseError or OSError."""
    if not cluster.is_local or not cluster.pgdata.is_dir():
        return False
    if not write_auth_config(cluster):
        return False
    # With standbys member 1 (PGDATA) may be the one down; the primary reads the files too.
    if cluster.is_ha or postgres.postmaster_pid(cluster.pgdata) is not None:
        problems = hba_errors(cluster)
        if problems:
            raise EngineError(f"PostgreSQL cannot read the new pg_hba.conf: {'; '.join(problems)}")
        reload_server_config(cluster)
    return True


def _plan_limits(cluster: Cluster) -> cgroups.Limits | None:
    plan = cluster.plan
    return cgroups.Limits(plan.ram_gb * 1024**3, float(plan.vcpus)) if plan is not None else None


def server_cgroup(cluster: Cluster) -> list[Path]:
    """The ``cgroup.procs`` files of the cluster's cgroup, made or updated with its plan's RAM as
    the memory limit and its vCPUs as the CPU quota (panel/clusters/engine/cgroups.py); none for a
    cluster without a plan, or where cgroups cannot be written (said once in the log)."""
    limits = _plan_limits(cluster)
    group = cgroups.ensure(str(cluster.pk), limits) if limits is not None else None
    return group.procs_files if group is not None else []


def member_cgroup_name(cluster: Cluster, member: str) -> str:
    return f"{cluster.pk}-{member}"


def member_cgroup(cluster: Cluster, member: str) -> list[Path]:
    """A member's own cgroup (its Patroni and PostgreSQL) with the plan's limits: the plan
    applies to each member of a cluster with standbys, as on the managed service, whether the
    members share a node or not. Made or updated; none as ``server_cgroup``."""
    limits = _plan_limits(cluster)
    group = cgroups.ensure(member_cgroup_name(cluster, member), limits) if limits is not None else None
    return group.procs_files if group is not None else []


def remove_member_cgroup(cluster: Cluster, member: str) -> None:
    cgroups.remove(member_cgroup_name(cluster, member))


def remove_server_cgroup(cluster: Cluster) -> None:
    """The cluster's group and its members' (those on this node: the others are gone already or
    their node's to remove)."""
    cgroups.remove(str(cluster.pk))
    names = {f"member-{index}" for index in range(1, MAX_NUM_NODES + 1)}
    names.update(cluster.members.values_list("name", flat=True))
    for name in sorted(names):
        remove_member_cgroup(cluster, name)


def place_in_server_cgroup(cluster: Cluster, postmaster: int) -> bool:
    """Move a server started before its cgroup existed (a cluster from before plan limits) into
    it, postmaster and every backend; True when it moved anything."""
    procs = server_cgroup(cluster)
    if not procs or cgroups.contains(procs[0].parent, postmaster):
        return False
    try:
        tree = [postmaster, *(child.pid for child in psutil.Process(postmaster).children(recursive=True))]
    except psutil.Error:
        return False
    cgroups.add_processes(procs, tree)
    return True


def start_server(cluster: Cluster, user: OsUser, timeout: float) -> None:
    """Start the cluster's PostgreSQL, in its cgroup (its plan's limits)."""
    postgres.start(
        cluster.version,
        cluster.pgdata,
        cluster.log_file,
        user=user,
        timeout=timeout,
        join=server_cgroup(cluster),
    )
