"""The files of a cluster with standbys: where they are (its ``ha`` directory, each member's Patroni
configuration and log, HAProxy's) and what every member's Patroni configuration says
(``spec``). A member on another node than the cluster's has these files on its own node, written
by that node's agent (``remote_members``).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from django.conf import settings

from panel.clusters import hooks
from panel.clusters.engine import patroni, postgres
from panel.clusters.lib import patroni as patroni_lib
from panel.clusters.models import Cluster, ClusterMember
from panel.clusters.services import handover
from panel.clusters.services.create import allocate_standby_port, etcd_ports
from panel.core import runas
from panel.core.runas import OsUser

INCLUDE_LINE = "include_if_exists = 'panel.conf'"
CALLBACK = Path(patroni.__file__).with_name("patroni_callback.py")


def ha_dir(cluster: Cluster) -> Path:
    return cluster.data_root / "ha"


def member_config_path(cluster: Cluster, member: ClusterMember) -> Path:
    return ha_dir(cluster) / f"{member.name}.json"


def member_log_path(cluster: Cluster, member: ClusterMember) -> Path:
    return cluster.log_file.parent / f"patroni-{member.name}.log"


def haproxy_config_path(cluster: Cluster) -> Path:
    return ha_dir(cluster) / "haproxy.cfg"


def scope(cluster: Cluster) -> str:
    return f"cluster-{cluster.pk.hex}"


def etcd_data_dir() -> Path:
    return Path(settings.PANEL_DATA_DIR) / "etcd" / "data"


def members_of(cluster: Cluster) -> list[ClusterMember]:
    return list(cluster.members.order_by("name"))


def spec(cluster: Cluster) -> patroni_lib.HaCluster:
    """What every member's Patroni configuration shares, from the cluster's rows."""
    plan = cluster.plan
    assert plan is not None and cluster.node is not None
    client, _peer = etcd_ports(cluster.node)
    members = members_of(cluster)
    rest_username, rest_password = cluster.rest_credentials
    # Members on other nodes reach the cluster's node's etcd at its address (one consensus store
    # per cluster: the loss of that node needs it back before a failover; docs/high-availability.md).
    spread = len({m.node_id for m in members}) > 1
    etcd_host = cluster.node.address if spread else "127.0.0.1"
    return patroni_lib.HaCluster(
        scope=scope(cluster),
        etcd_hosts=(f"{etcd_host}:{client}",),
        bin_dir=str(postgres.bindir_for(cluster.version)),
        socket_dir=str(cluster.socket_dir),
        superuser=settings.PANEL_SUPERUSER,
        superuser_password=cluster.superuser_password,
        max_connections=plan.max_connections,
        members=tuple(_lib_member(m) for m in members),
        panel_conf=str(ha_dir(cluster) / "postgresql.base.conf"),
        hba_file=str(cluster.hba_path),
        ident_file=str(cluster.ident_path),
        haproxy_sources=str(ha_dir(cluster) / patroni_lib.HAPROXY_SOURCES),
        on_role_change=_callback_command(cluster),
        repository=hooks.replica_repository(cluster),
        rest_username=rest_username,
        rest_password=rest_password,
    )


def _callback_command(cluster: Cluster) -> str:
    """Patroni's on_role_change: repoint PgBouncer's files (where panel/pools/disk.py keeps them)."""
    bouncer = cluster.data_root / "pgbouncer"
    argv = [
        sys.executable,
        "-I",
        str(CALLBACK),
        str(bouncer / "pgbouncer.ini"),
        str(bouncer / "pgbouncer.pid"),
        str(cluster.socket_dir),
    ]
    # Patroni splits the command with shlex and appends action, role and scope; the member's port
    # is the callback's to know, so each member gets its own command (``write_configs``).
    return " ".join(argv)


# --- configuration -------------------------------------------------------------------------------


def write_configs(cluster: Cluster, user: OsUser, replicate_from: dict[str, str] | None = None) -> None:
    """Every member's Patroni configuration, the shared base configuration and HAProxy's (0600,
    the cluster's user: they hold the superuser's password)."""
    runas.make_private_dir(ha_dir(cluster), user)
    base = ha_dir(cluster) / "postgresql.base.conf"
    if not base.exists():
        # initdb's postgresql.conf (provisioning wrote it, before Patroni replaces it), including
        # member 1's panel.conf by its absolute path, so that every member loads the same one.
        text = (cluster.pgdata / "postgresql.conf").read_text()
        absolute = f"include_if_exists = '{cluster.pgdata / 'panel.conf'}'"
        runas.write_private_file(base, text.replace(INCLUDE_LINE, absolute), owner=user)
    shared = member_spec(cluster)
    for member in members_of(cluster):
        if not member.is_remote:  # a member on another node: its agent writes its own
            write_member_config(cluster, member, user, shared, replicate_from)
    binds = patroni_lib.haproxy_binds(settings.PANEL_LISTEN_ADDRESSES)
    pidfile = str(ha_dir(cluster) / "haproxy.pid")
    if cluster.standby_port is None:  # a cluster made before the read-only port existed
        cluster.standby_port = allocate_standby_port(cluster.node)
        cluster.save(update_fields=["standby_port"])
    text = patroni_lib.render_haproxy(binds, int(cluster.port or 0), shared, pidfile, cluster.standby_port)
    patroni.write_haproxy(haproxy_config_path(cluster), text, cluster.trusted_source_values(), user)


def member_spec(cluster: Cluster) -> patroni_lib.HaCluster:
    """``spec`` with the command Patroni runs before it stops a primary (the pools' handover)."""
    return dataclasses.replace(spec(cluster), before_stop=handover.before_stop_command(cluster))


def write_member_config(
    cluster: Cluster,
    member: ClusterMember,
    user: OsUser,
    shared: patroni_lib.HaCluster | None = None,
    replicate_from: dict[str, str] | None = None,
) -> None:
    """One member's Patroni configuration (0600: it holds the superuser's password);
    ``replicate_from``: a switchover's cascade (services/cascade.py)."""
    shared = shared or member_spec(cluster)
    own = patroni_lib.HaCluster(
        **{**shared.__dict__, "on_role_change": f"{shared.on_role_change} {member.port}"}
    )
    text = patroni_lib.render_member(
        own, _lib_member(member, replicate_from), str(ha_dir(cluster) / f"{member.name}.pgpass")
    )
    runas.write_private_file(member_config_path(cluster, member), text, owner=user)


def _lib_member(member: ClusterMember, replicate_from: dict[str, str] | None = None) -> patroni_lib.Member:
    upstream = (replicate_from or {}).get(member.name)  # a switchover's cascade (services/cascade.py)
    return patroni_lib.Member(
        member.name, member.port, member.rest_port, member.data_dir, host=member.host, replicate_from=upstream
    )
