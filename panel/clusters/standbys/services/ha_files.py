"""The files of a cluster with standbys: where they are (its ``ha`` directory, each member's Patroni
configuration and log, HAProxy's) and what every member's Patroni configuration says
(``spec``). A member on another node than the cluster's has these files on its own node, written
by that node's agent (``remote_members``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from pathlib import Path

from django.conf import settings

from panel import crypto
from panel.clusters import hooks
from panel.clusters.engine import isolation, postgres
from panel.clusters.models import Cluster, ClusterMember, credentials
from panel.clusters.models.firewall import trusted_source_values
from panel.clusters.services.ports import allocate_standby_port
from panel.clusters.standbys.engine import haproxy, member_tls, patroni
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.lib import haproxy as haproxy_lib
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.lib import vip as vip_lib
from panel.clusters.standbys.services import etcd, etcd_auth, handover
from panel.core import runas
from panel.core.runas import EngineError, OsUser

log = logging.getLogger(__name__)

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
    return etcd.data_dir()


def etcd_tls(cluster: Cluster) -> etcd_lib.TlsPaths:
    """The cluster's own copy of its node's etcd client certificate (Patroni runs as the
    cluster's user, which must not read another cluster's files), and its scope's etcd user."""
    d = ha_dir(cluster)
    files = etcd_lib.TlsPaths(str(d / "etcd-ca.crt"), str(d / "etcd-client.crt"), str(d / "etcd-client.key"))
    return etcd_auth.scope_tls(files, scope(cluster))


def write_etcd_tls(cluster: Cluster, user: OsUser) -> None:
    """This node's etcd client certificate and the panel's etcd CA into the cluster's ``ha``
    directory (0600, the cluster's user), rewritten when they differ."""
    source, target = etcd.client_files(), etcd_tls(cluster)
    for src, dst in ((source.ca, target.ca), (source.cert, target.cert), (source.key, target.key)):
        text = Path(src).read_text()
        if not Path(dst).exists() or Path(dst).read_text() != text:
            runas.write_private_file(Path(dst), text, owner=user)


def members_of(cluster: Cluster) -> list[ClusterMember]:
    return list(cluster.members.order_by("name"))


def spec(cluster: Cluster) -> patroni_lib.HaCluster:
    """What every member's Patroni configuration shares, from the cluster's rows."""
    plan = cluster.plan
    assert plan is not None and cluster.node is not None
    members = members_of(cluster)
    rest_username, rest_password = credentials.rest_credentials(cluster)
    return patroni_lib.HaCluster(
        scope=scope(cluster),
        # Every member of the panel's etcd (standbys/services/etcd.py), over TLS.
        etcd_hosts=etcd.patroni_hosts(cluster.node),
        etcd_tls=etcd_tls(cluster),
        bin_dir=str(postgres.bindir_for(cluster.version)),
        socket_dir=str(cluster.socket_dir),
        superuser=settings.PANEL_SUPERUSER,
        replication_user=settings.PANEL_MEMBER_ROLE,
        replication_password=member_password(cluster),
        max_connections=plan.max_connections,
        members=tuple(_lib_member(m) for m in members),
        panel_conf=str(ha_dir(cluster) / "postgresql.base.conf"),
        hba_file=str(cluster.hba_path),
        ident_file=str(cluster.ident_path),
        haproxy_sources=str(ha_dir(cluster) / haproxy_lib.HAPROXY_SOURCES),
        on_role_change=_callback_command(cluster),
        repository=hooks.replica_repository(cluster),
        rest_username=rest_username,
        rest_password=rest_password,
        member_sslcert=str(member_tls.client_paths(ha_dir(cluster))[0]),
        member_sslkey=str(member_tls.client_paths(ha_dir(cluster))[1]),
        member_ssl_ca=str(member_tls.ssl_ca_path(ha_dir(cluster))),
    )


def member_password(cluster: Cluster) -> str:
    """The members' replication and rewind role's password (``settings.PANEL_MEMBER_ROLE``): the
    same on every node (a member's agent writes its own configuration), stored nowhere."""
    return crypto.derived_secret(f"member-role:{cluster.pk}")


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
    the cluster's user: they hold the members' role's password and Patroni's REST password)."""
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
    if cluster.standby_port is None:  # a cluster made before the read-only port existed
        assert cluster.node is not None  # a standby cluster's members run on nodes
        cluster.standby_port = allocate_standby_port(cluster.node)
        cluster.save(update_fields=["standby_port"])
    text = haproxy_text(cluster, shared)
    haproxy.write(haproxy_config_path(cluster), text, trusted_source_values(cluster), user)


def haproxy_text(cluster: Cluster, shared: patroni_lib.HaCluster | None = None) -> str:
    """HAProxy's configuration as the cluster's rows and this panel's version call for."""
    binds = haproxy_lib.haproxy_binds(settings.PANEL_LISTEN_ADDRESSES)
    pidfile = str(ha_dir(cluster) / "haproxy.pid")
    shared = shared or member_spec(cluster)
    return haproxy_lib.render_haproxy(
        binds, int(cluster.port or 0), shared, pidfile, cluster.standby_port, floating_bind(cluster)
    )


def floating_bind(cluster: Cluster) -> tuple[str, int, int | None] | None:
    """The cluster's floating address with the cluster's two ports, which every node's HAProxy
    of it binds too (``render_haproxy``): the address goes to whichever node leads, and clients
    of it use the ports the Overview shows. None: it has none."""
    if not cluster.floating_address or not cluster.port:
        return None
    address = vip_lib.parse_address(cluster.floating_address).ip
    return address, int(cluster.port), cluster.standby_port


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
    """One member's Patroni configuration (0600: it holds the members' role's password);
    ``replicate_from``: a switchover's cascade (standbys/services/cascade.py)."""
    shared = shared or member_spec(cluster)
    runas.make_private_dir(ha_dir(cluster), user)
    write_etcd_tls(cluster, user)
    member_tls.write_client_files(cluster, ha_dir(cluster), settings.PANEL_MEMBER_ROLE, user)
    member_tls.write_ssl_ca(cluster, member_tls.ssl_ca_path(ha_dir(cluster)), user)
    ensure_etcd_user(scope(cluster))  # before its Patroni logs in with it
    own = patroni_lib.HaCluster(
        **{**shared.__dict__, "on_role_change": f"{shared.on_role_change} {member.port}"}
    )
    text = patroni_lib.render_member(
        own, _lib_member(member, replicate_from), str(ha_dir(cluster) / f"{member.name}.pgpass")
    )
    runas.write_private_file(member_config_path(cluster, member), text, owner=user)


def ensure_rest_auth(cluster: Cluster, member: ClusterMember, user: runas.OsUser) -> None:
    """A member whose Patroni configuration was written before its REST API asked for the
    cluster's credentials gets them with the next configuration push: written again (its cascade
    tag kept), then Patroni reloads it (it takes a request without them until then)."""
    path = member_config_path(cluster, member)
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("member %s: Patroni's configuration not read: %s", member, exc)
        return
    username, password = credentials.rest_credentials(cluster)
    if current.get("restapi", {}).get("authentication") == {"username": username, "password": password}:
        return
    upstream = current.get("tags", {}).get("replicatefrom")
    write_member_config(cluster, member, user, replicate_from={member.name: upstream} if upstream else None)
    auth = credentials.rest_credentials(cluster)
    status, text = patroni.rest(
        "POST", member.rest_port, "/reload", {}, timeout=5, host=member.host, auth=auth
    )
    if status not in (200, 202):
        log.warning("member %s: Patroni not reloaded with its REST credentials: %s %s", member, status, text)


def ensure_etcd_user(name: str) -> None:
    """The scope's etcd user and role (``etcd_auth``); when no member of the panel's etcd
    answers, the reconciler's next round (``follow_etcd``) makes them."""
    try:
        etcd_auth.ensure_scope(name)
    except EngineError as exc:
        log.warning("etcd: the user of %s not checked: %s", name, exc)


def _lib_member(member: ClusterMember, replicate_from: dict[str, str] | None = None) -> patroni_lib.Member:
    # A switchover's cascade (standbys/services/cascade.py).
    upstream = (replicate_from or {}).get(member.name)
    return patroni_lib.Member(
        member.name, member.port, member.rest_port, member.data_dir, host=member.host, replicate_from=upstream
    )


def follow_etcd(cluster: Cluster, member: ClusterMember) -> str | None:
    """A member of this node whose Patroni configuration names other etcd members (or other
    certificates) than the panel's etcd has now, or lacks the REST API's credentials: rewritten, and its Patroni reloaded (SIGHUP).
    Patroni 4.1.5 does not rebuild its etcd client on a reload (``AbstractEtcdClientWithFailover``
    keeps the hosts it started with and learns the rest from etcd's member list), so a Patroni
    from before TLS (plain HTTP, ``protocol`` absent) is started again instead. A note then."""
    path = member_config_path(cluster, member)
    try:
        written = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    current = written.get("etcd3", {})
    user = isolation.os_user(cluster)
    shared = spec(cluster)
    wanted = patroni_lib.etcd3_section(shared)
    # A member configured before the REST API asked for credentials gets them the same way:
    # Patroni's reload (``RestApiServer.reload_config``) takes the new ``authentication``.
    auth = patroni_lib.rest_authentication(shared)["authentication"]
    auth_now = written.get("restapi", {}).get("authentication")
    if current == wanted and auth_now == auth:
        write_etcd_tls(cluster, user)  # a renewed certificate: Patroni reads the files anew
        ensure_etcd_user(shared.scope)  # (an etcd that lost its data, users and all)
        return None
    write_member_config(cluster, member, user)
    if current.get("protocol") != "https" and patroni.member_pid(path) is not None:
        patroni.stop_member(path)
        join = isolation.member_cgroup(cluster, member.name)
        patroni.start_member(path, member_log_path(cluster, member), user, join, data_dir=member.data_dir)
        return f"{cluster.name}: Patroni of {member.name} started again on the panel's etcd over TLS"
    patroni.reload_member(path)
    if current == wanted:
        return f"{cluster.name}: Patroni of {member.name} asks its REST API's credentials now"
    return f"{cluster.name}: Patroni of {member.name} follows the etcd members {', '.join(wanted['hosts'])}"
