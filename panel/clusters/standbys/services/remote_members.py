"""Members on another node than their cluster's (anti-affinity, ``placement``). That node's agent
holds the member: the cluster's system user, the privilege guard built there, the member's Patroni
configuration and pg_hba.conf written from the rows on its own disk, its Patroni started in the
member's own cgroup (Patroni copies the data directory from the primary with pg_basebackup over
TLS), and that node's reconciler keeps it running. The cluster's node asks it through the agent's
route, on the member node's queue.

The member's server configuration is the primary's ``panel.conf`` (copied with the data
directory) followed by ``node.conf``: the settings of it that name a path of the cluster's node,
with that node's data directory replaced by this one's (logs, the guard's library).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from panel.clusters.engine import dbconn, guard, isolation, postgres
from panel.clusters.models import Cluster, ClusterMember, ClusterStatus
from panel.clusters.services import failures
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.services import entry_points, ha_files
from panel.core import agent, runas
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError

log = logging.getLogger(__name__)

START_TIMEOUT = 300.0
STOP_TIMEOUT = 90.0
CONFIG_TIMEOUT = 20.0
PID_TIMEOUT = 5.0
NODE_CONF = "node.conf"
# provision.SETTINGS_FILE (not imported: provision imports ha, which imports this module)
SETTINGS_FILE = "settings.conf"


@dataclass(frozen=True)
class MemberFiles:
    """What the cluster's node sends to a member's node: its Patroni base configuration and the
    panel's server configuration (no secret in either), and where they were written."""

    base_conf: str
    panel_conf: str
    panel_conf_path: str
    source_data_dir: str


def files_of(cluster: Cluster) -> MemberFiles:
    """Read on the cluster's node, once ``ha_files.write_configs`` wrote the base configuration."""
    panel_conf = cluster.pgdata / "panel.conf"
    return MemberFiles(
        base_conf=(ha_files.ha_dir(cluster) / "postgresql.base.conf").read_text(),
        panel_conf=panel_conf.read_text(),
        panel_conf_path=str(panel_conf),
        source_data_dir=str(settings.PANEL_DATA_DIR),
    )


def ask(name: str, member: ClusterMember, *args: object, timeout: float) -> object:
    """Run ``name`` (one of this module's ``@on_node`` functions) on the member's node: in place
    when that is this process's node, else through its agent."""
    if member.node.is_here:
        return agent.lookup(name)(member, *args)
    return agent.send(name, (member, *args), {}, timeout=timeout, queue=member.node.agent_queue)


def start(member: ClusterMember) -> None:
    ask(f"{__name__}.start_here", member, files_of(member.cluster), timeout=START_TIMEOUT)


def stop(member: ClusterMember) -> None:
    ask(f"{__name__}.stop_here", member, timeout=STOP_TIMEOUT)


def retire(member: ClusterMember) -> None:
    """One standby on another node gone for good (``resize --num-nodes``): stopped, its data
    directory, files and cgroup removed there; the cluster's user and files stay while another of
    its members lives on that node."""
    ask(f"{__name__}.retire_here", member, timeout=STOP_TIMEOUT)


def remove(member: ClusterMember) -> None:
    """A cluster being deleted: its member on another node killed and its files removed there. A
    node that does not answer keeps them (said in the log): nothing else waits for it."""
    try:
        ask(f"{__name__}.remove_here", member, timeout=STOP_TIMEOUT)
    except ServiceError as exc:
        log.warning("member %s on node %s not removed: %s", member, member.node.name, exc.message)


@dataclass(frozen=True)
class ServerConfig:
    """The server configuration of the cluster's node as a member's node writes it: panel.conf and
    settings.conf's texts (no secret in either; pg_hba.conf and pg_ident.conf each node renders
    from the rows)."""

    panel_conf: str
    settings_conf: str
    source_data_dir: str


def server_config_of(cluster: Cluster) -> ServerConfig:
    """Read on the cluster's node, once the change is written there."""
    settings_conf = cluster.pgdata / SETTINGS_FILE
    return ServerConfig(
        panel_conf=(cluster.pgdata / "panel.conf").read_text(),
        settings_conf=settings_conf.read_text() if settings_conf.exists() else "",
        source_data_dir=str(settings.PANEL_DATA_DIR),
    )


def push_config(cluster: Cluster) -> None:
    """Every member on another node takes the server configuration just written on the cluster's
    node (panel.conf, settings.conf, pg_hba.conf, pg_ident.conf) and reloads. Fail closed: when one
    member's agent does not answer or its server refuses, the members that took it get their
    previous files back and an EngineError says which (the caller restores its own node's files, so
    the change is nowhere)."""
    _push(cluster, "apply_config_here", server_config_of)


@dataclass(frozen=True)
class AuthFiles:
    """pg_hba.conf and pg_ident.conf's texts as the cluster's node wrote them (inside the change's
    transaction: another node's agent would render them from the rows as they were before)."""

    hba: str
    ident: str


def push_auth(cluster: Cluster, *, exclude: Collection[ClusterMember] = ()) -> None:
    """``push_config`` for pg_hba.conf and pg_ident.conf alone (trusted sources, roles, members
    added or removed; ``exclude``: members not started yet, whose agent writes their own)."""
    _push(cluster, "apply_auth_here", _auth_files, exclude)


def _auth_files(cluster: Cluster) -> AuthFiles:
    return AuthFiles(cluster.hba_path.read_text(), cluster.ident_path.read_text())


def silent_member(cluster: Cluster) -> ClusterMember | None:
    """A member on another node whose agent's heartbeats stopped (a change would not reach it)."""
    return next((m for m in ha_files.members_of(cluster) if m.is_remote and not m.node.is_alive), None)


def _push(
    cluster: Cluster, step: str, read: Callable[[Cluster], object], exclude: Collection[ClusterMember] = ()
) -> None:
    skipped = {member.pk for member in exclude}
    remote = [m for m in ha_files.members_of(cluster) if m.is_remote and m.pk not in skipped]
    if not remote:
        return
    silent = [member for member in remote if not member.node.is_alive]
    if silent:  # its heartbeats stopped: no need to wait for the call's timeout to know
        raise _not_taken(silent[0], Message(N_("its agent is not answering.")))
    wanted = read(cluster)
    taken: list[tuple[ClusterMember, object]] = []
    for member in remote:
        try:
            previous = ask(f"{__name__}.{step}", member, wanted, timeout=CONFIG_TIMEOUT)
        except ServiceError as exc:
            for done, before in reversed(taken):
                try:
                    ask(f"{__name__}.{step}", done, before, timeout=CONFIG_TIMEOUT)
                except ServiceError as again:
                    log.warning("member %s: previous configuration not restored: %s", done, again.message)
            raise _not_taken(member, exc.as_message()) from None
        taken.append((member, previous))


def _not_taken(member: ClusterMember, reason: Message | str) -> runas.EngineError:
    words = Message(
        N_("The member %(member)s on node %(node)s did not take the change: %(reason)s"),
        member=member.name, node=member.node.name, reason=reason,
    )  # fmt: skip
    return runas.EngineError(str(words), words=words)


def postmaster_pid(member: ClusterMember) -> int | None:
    """The member's postmaster pid as its own node reads it (postmaster.pid in its data directory):
    here for a member on the cluster's node, else asked of its node's agent; None when the agent
    does not answer (a pid read from this node's disk would be another machine's process)."""
    if not member.is_remote:
        return postgres.postmaster_pid(Path(member.data_dir))
    if not member.node.is_alive:
        return None
    try:
        pid = ask(f"{__name__}.postmaster_pid_here", member, timeout=PID_TIMEOUT)
    except ServiceError as exc:
        log.info("member %s: no pid from node %s: %s", member, member.node.name, exc.message)
        return None
    return pid if isinstance(pid, int) else None


# --- on the member's node --------------------------------------------------------------------------


def node_conf(files: MemberFiles | ServerConfig) -> str:
    """The settings of the primary's panel.conf that name a path under the cluster's node's data
    directory, naming this node's instead (a later setting wins in postgresql.conf)."""
    source, here = f"'{files.source_data_dir}/", f"'{settings.PANEL_DATA_DIR}/"
    lines = [line for line in files.panel_conf.splitlines() if source in line and "=" in line]
    header = "# Written by the control panel: this node's paths for the settings of panel.conf."
    return "\n".join([header, *(line.replace(source, here) for line in lines)]) + "\n"


@on_node(timeout=START_TIMEOUT)
def start_here(member: ClusterMember, files: MemberFiles) -> None:
    """Make the member's files on this node and start its Patroni (which builds the data
    directory from the primary when it is empty)."""
    cluster = member.cluster
    user = isolation.ensure_cluster_user(cluster)
    patroni.check_installed(user)
    guard.ensure_built(cluster.version)  # panel.conf preloads it: node.conf names this node's build
    root = cluster.data_root
    for directory in (
        root,
        cluster.pgdata,
        cluster.socket_dir,
        cluster.log_file.parent,
        Path(member.data_dir).parent,
    ):
        runas.make_private_dir(directory, user)
    runas.make_private_dir(ha_files.ha_dir(cluster), user)
    runas.write_private_file(cluster.pgdata / NODE_CONF, node_conf(files), owner=user)
    own_includes = (
        f"include_if_exists = '{Path(member.data_dir) / 'panel.conf'}'\n"
        f"include_if_exists = '{cluster.pgdata / NODE_CONF}'"
    )
    base = files.base_conf.replace(f"include_if_exists = '{files.panel_conf_path}'", own_includes)
    runas.write_private_file(ha_files.ha_dir(cluster) / "postgresql.base.conf", base, owner=user)
    isolation.write_auth_config(cluster, user)
    ha_files.write_member_config(cluster, member, user)
    _start_patroni(cluster, member)
    _serve_entry(cluster)


def _serve_entry(cluster: Cluster) -> None:
    """The cluster's entry point on this node (``entry_points``); one that does not start is the
    reconciler's to try again, the member runs meanwhile."""
    try:
        entry_points.ensure_here(cluster)
    except (runas.EngineError, OSError, ServiceError) as exc:
        log.warning("%s: its entry on this node not started: %s", cluster.pk, exc)


@on_node(timeout=CONFIG_TIMEOUT)
def apply_config_here(member: ClusterMember, wanted: ServerConfig) -> ServerConfig:
    """The member's copies of the server configuration rewritten (each atomically), then its
    postmaster reloaded and seen to have loaded them; returns what was there before."""
    cluster = member.cluster
    user = isolation.os_user(cluster)
    data_dir = Path(member.data_dir)
    settings_conf = data_dir / SETTINGS_FILE
    previous = ServerConfig(
        panel_conf=(data_dir / "panel.conf").read_text(),
        settings_conf=settings_conf.read_text() if settings_conf.exists() else "",
        source_data_dir=wanted.source_data_dir,
    )
    try:
        runas.write_private_file(data_dir / SETTINGS_FILE, wanted.settings_conf, owner=user)
        runas.write_private_file(data_dir / "panel.conf", wanted.panel_conf, owner=user)
        runas.write_private_file(cluster.pgdata / NODE_CONF, node_conf(wanted), owner=user)
        isolation.write_auth_config(cluster, user)
        isolation.member_cgroup(cluster, member.name)  # a resize: the plan's limits here too
        errors = isolation.hba_errors(cluster, member.port)
        if errors:
            raise runas.EngineError("; ".join(errors))
        isolation.reload_member(cluster, member.port)
    except (runas.EngineError, dbconn.DatabaseError, OSError) as exc:
        raise _not_applied(cluster, member.name, exc) from None
    ha_files.ensure_rest_auth(cluster, member, user)
    return previous


@on_node(timeout=CONFIG_TIMEOUT)
def apply_auth_here(member: ClusterMember, wanted: AuthFiles) -> AuthFiles:
    """The member's pg_hba.conf and pg_ident.conf rewritten (each atomically), read back by its
    server, then loaded; returns what was there before (back in force when the server refuses)."""
    cluster = member.cluster
    user = isolation.os_user(cluster)
    previous = AuthFiles(cluster.hba_path.read_text(), cluster.ident_path.read_text())
    try:
        runas.write_private_file(cluster.hba_path, wanted.hba, owner=user)
        runas.write_private_file(cluster.ident_path, wanted.ident, owner=user)
        errors = isolation.hba_errors(cluster, member.port)
        if errors:
            runas.write_private_file(cluster.hba_path, previous.hba, owner=user)
            runas.write_private_file(cluster.ident_path, previous.ident, owner=user)
            raise runas.EngineError("; ".join(errors))
        isolation.reload_member(cluster, member.port)
    except (runas.EngineError, dbconn.DatabaseError, OSError) as exc:
        raise _not_applied(cluster, member.name, exc) from None
    return previous


def _not_applied(cluster: Cluster, member: str, exc: BaseException) -> ServiceError:
    log.warning("member %s of %s did not take its configuration: %s", member, cluster.pk, exc)  # paths
    words = N_("The member's server did not take the configuration: %(reason)s")
    return ServiceError(words, code="member.config_not_applied", params={"reason": failures.reason(exc)})


@on_node(timeout=PID_TIMEOUT)
def postmaster_pid_here(member: ClusterMember) -> int | None:
    return postgres.postmaster_pid(Path(member.data_dir))


def _start_patroni(cluster: Cluster, member: ClusterMember) -> None:
    patroni.start_member(
        ha_files.member_config_path(cluster, member),
        ha_files.member_log_path(cluster, member),
        isolation.os_user(cluster),
        isolation.member_cgroup(cluster, member.name),
        data_dir=member.data_dir,
    )


@on_node(timeout=STOP_TIMEOUT)
def stop_here(member: ClusterMember) -> None:
    entry_points.stop_here(member.cluster)
    patroni.stop_member(ha_files.member_config_path(member.cluster, member))


@on_node(timeout=STOP_TIMEOUT)
def remove_here(member: ClusterMember) -> None:
    cluster = member.cluster
    patroni.kill_member(ha_files.member_config_path(cluster, member), postgres.postmaster_pid(member.pgdata))
    isolation.remove_member_cgroup(cluster, member.name)
    _remove_cluster_here(member)


def _remove_cluster_here(member: ClusterMember) -> None:
    """The cluster's user, processes and files on this node (no member of it left here)."""
    cluster = member.cluster
    entry_points.stop_here(cluster, forget=True)
    isolation.kill_leftover_processes(cluster)
    postgres.remove_data(cluster.data_root)
    try:
        isolation.remove_cluster_user(cluster)
    except runas.EngineError as exc:
        log.warning("member %s: %s", member, exc)


@on_node(timeout=STOP_TIMEOUT)
def retire_here(member: ClusterMember) -> None:
    cluster = member.cluster
    config = ha_files.member_config_path(cluster, member)
    patroni.kill_member(config, postgres.postmaster_pid(member.pgdata))
    isolation.remove_member_cgroup(cluster, member.name)
    postgres.remove_data(member.pgdata)
    config.unlink(missing_ok=True)
    others = ClusterMember.objects.filter(cluster=cluster, node=member.node).exclude(pk=member.pk)
    if not others.exists():
        _remove_cluster_here(member)


def supervise_here() -> list[str]:
    """This node's reconciler: the Patroni of every member here whose cluster lives on another
    node runs (Patroni itself restarts, rewinds or rebuilds its PostgreSQL)."""
    notes = []
    here = ClusterMember.objects.filter(
        node__name=settings.PANEL_NODE_NAME, cluster__status__in=ClusterStatus.SERVING
    ).exclude(cluster__node__name=settings.PANEL_NODE_NAME)
    for member in here.select_related("cluster", "node"):
        config = ha_files.member_config_path(member.cluster, member)
        try:  # the panel's etcd members as they are now (standbys/services/etcd.py)
            if config.exists() and (note := ha_files.follow_etcd(member.cluster, member)):
                notes.append(note)
        except runas.EngineError as exc:
            notes.append(f"{member}: {exc}")
        if not config.exists() or patroni.member_pid(config) is not None:
            continue
        try:
            _start_patroni(member.cluster, member)
        except runas.EngineError as exc:
            notes.append(f"{member}: {exc}")
            continue
        notes.append(f"{member}: started its Patroni again")
    return notes
