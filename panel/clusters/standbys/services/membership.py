"""Members added to and removed from a running cluster (``member_count`` decides which and when).

- **One server → Patroni.** The postmaster the reconciler ran on the cluster's port stops; the
  server's files are written for a cluster with members (pg_hba outside the data directory); then
  everything goes as at creation (``ha.start_members``): member 1's Patroni takes the data
  directory over as the primary on a port of its own, the standbys are made, HAProxy takes the
  cluster's port.
- **A standby more.** Its row (ports of its own), every member's Patroni configuration written
  again, Patroni's dynamic settings patched (strict synchronous mode follows the count), its
  Patroni started on an empty data directory (restored from the repository, else copied from the
  primary), HAProxy reloaded with it.
- **A standby less.** Its Patroni stopped (its PostgreSQL with it), its key out of etcd, its data
  directory, files and row (its ports) removed.
- **Patroni → one server.** Member 1, the primary by then, stops with its Patroni; its
  ``postgresql.conf`` is initdb's again (Patroni's own is dropped), the cluster's keys leave etcd,
  and the postmaster starts on the cluster's port as before Patroni, supervised by the reconciler.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from psycopg import sql

from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import Cluster, ClusterMember, credentials
from panel.clusters.services import placement
from panel.clusters.services.create import add_member
from panel.clusters.services.provision import INCLUDE_LINE, write_server_config
from panel.clusters.standbys.engine import haproxy, patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.services import etcd, ha, remote_members
from panel.core import runas
from panel.core.runas import EngineError, OsUser

FIRST = "member-1"


def timeout() -> float:
    return float(settings.PANEL_COMMAND_TIMEOUT)


def add_rows(cluster: Cluster, count: int) -> list[ClusterMember]:
    """Rows for ``count`` new members, each with the lowest free name and a free (port, REST port)
    pair on its node: member 1 (the one server becoming the primary) on the cluster's node, the
    standbys where ``placement`` puts them (other nodes first). The caller holds the transaction."""
    assert cluster.node is not None
    taken = set(cluster.members.values_list("name", flat=True))
    names = [n for n in (f"member-{i}" for i in range(1, 10)) if n not in taken][:count]
    standbys = [n for n in names if n != FIRST]
    nodes = placement.member_nodes(cluster, len(standbys))  # before member 1's row: it counts it
    rows = [add_member(cluster, FIRST, cluster.node)] if FIRST in names else []
    rows += [add_member(cluster, name, node) for name, node in zip(standbys, nodes, strict=True)]
    return rows


def take_over(cluster: Cluster, user: OsUser) -> bool:
    """A cluster just given members (``num_nodes`` > 1 and rows saved) whose one postmaster still
    runs on the cluster's port: stopped, its files written for members, started as at creation.
    Returns whether the privilege guard was loaded for the first time."""
    postgres.stop(cluster.version, cluster.pgdata, user=user, timeout=timeout())
    # A cluster that had members before: Patroni's files of then are not this one's.
    shutil.rmtree(ha.ha_dir(cluster), ignore_errors=True)
    guard_added = write_server_config(cluster)
    for member in ha.members_of(cluster):
        make_data_dir(member, user)
    ha.start_members(cluster, user, timeout())
    return guard_added


def make_data_dir(member: ClusterMember, user: OsUser) -> None:
    """A standby's empty data directory: pgBackRest restores only into one that exists
    (pg_basebackup takes it as it is)."""
    if member.name != FIRST:
        runas.make_private_dir(Path(member.data_dir).parent, user)
        runas.make_private_dir(Path(member.data_dir), user)


def start_new(cluster: Cluster, new: list[ClusterMember], user: OsUser) -> None:
    """Standbys added to a cluster run by Patroni: configurations, dynamic settings, their
    Patroni, HAProxy reloaded with them."""
    ha.write_configs(cluster, user)
    refresh_member_lines(cluster, exclude=new)
    patch_dynamic(cluster)
    for member in new:
        if member.is_remote:
            remote_members.start(member)  # by its node's agent, copied from the primary
            continue
        make_data_dir(member, user)
        patroni.start_member(
            ha.member_config_path(cluster, member),
            ha.member_log_path(cluster, member),
            user,
            isolation.member_cgroup(cluster, member.name),
            data_dir=member.data_dir,
        )
    ha.reload_haproxy(cluster, user, timeout())


def refresh_member_lines(cluster: Cluster, *, exclude: list[ClusterMember] | None = None) -> None:
    """pg_hba.conf's member lines follow the rows: the node of a member added is let in (to
    stream and rewind) before it starts, that of one removed no longer. The cluster's node writes
    and reloads its members' copy; members on other nodes take it through their agent (a new one
    writes its own at start: ``exclude``)."""
    isolation.refresh_server_auth(cluster)
    remote_members.push_auth(cluster, exclude=exclude or [])


def patch_dynamic(cluster: Cluster, *, strict: bool | None = None) -> None:
    """Patroni's settings in etcd for the members the rows hold now (strict synchronous mode
    only with three, or as ``strict`` says)."""
    statuses = ha.read_statuses(cluster)
    primary = next((s for s in statuses if s.is_primary), None)
    if primary is None:
        raise EngineError("The cluster has no primary to take the new settings.")
    member = cluster.members.get(name=primary.name)
    body = patroni_lib.dynamic_config(ha.spec(cluster))
    if strict is not None:
        body["synchronous_mode_strict"] = strict
    auth = credentials.rest_credentials(cluster)
    status, text = patroni.rest(
        "PATCH", member.rest_port, "/config", body, timeout=10, host=member.host, auth=auth
    )
    if status != 200:
        raise EngineError(f"Patroni did not take the new settings: {text.strip() or status}")


def remove(cluster: Cluster, member: ClusterMember) -> None:
    """A standby gone for good: Patroni and PostgreSQL stopped, its key out of etcd, its data
    directory and files removed, its row (and so its ports) deleted."""
    if member.name == FIRST:
        raise EngineError("Member 1 holds the cluster's own data directory and is never removed.")
    if member.is_remote:  # its node's agent stops it and removes its files there
        remote_members.stop(member)
        _forget_key(cluster, member.name)
        remote_members.retire(member)
        member.delete()
        refresh_member_lines(cluster)
        return
    config = ha.member_config_path(cluster, member)
    patroni.stop_member(config)
    postgres.kill(member.pgdata)  # Patroni stops it; this only makes sure
    _forget_key(cluster, member.name)
    postgres.remove_data(member.pgdata)
    isolation.remove_member_cgroup(cluster, member.name)
    for path in (config, ha.ha_dir(cluster) / f"{member.name}.pgpass"):
        path.unlink(missing_ok=True)
    member.delete()


def _forget_key(cluster: Cluster, name: str) -> None:
    # Member names are member-1 … member-3: no name is the prefix of another.
    etcd.delete_prefix(f"{patroni_lib.NAMESPACE}{ha.scope(cluster)}/members/{name}")


def hand_back(cluster: Cluster, user: OsUser) -> bool:
    """The last member (member 1, the primary) leaves Patroni and runs as the cluster's one
    postmaster on its port. The caller has set ``num_nodes`` to 1; the member rows go here.
    Returns whether the privilege guard was loaded for the first time."""
    haproxy.stop(ha.haproxy_config_path(cluster))
    for member in ha.members_of(cluster):
        patroni.stop_member(ha.member_config_path(cluster, member))
    postgres.kill(cluster.pgdata)  # stopped by its Patroni; this only makes sure
    base = ha.ha_dir(cluster) / "postgresql.base.conf"
    if base.is_file():
        absolute = f"include_if_exists = '{cluster.pgdata / 'panel.conf'}'"
        text = base.read_text().replace(absolute, INCLUDE_LINE)
        runas.write_private_file(cluster.pgdata / "postgresql.conf", text, owner=user)
    for name in ("standby.signal", "recovery.signal"):
        (cluster.pgdata / name).unlink(missing_ok=True)
    ha.forget(cluster)  # its keys out of etcd, etcd stopped when no other cluster needs it
    cluster.members.all().delete()
    cluster.standby_port = None  # HAProxy's read-only port: freed with HAProxy
    cluster.save(update_fields=["standby_port", "updated_at"])
    shutil.rmtree(ha.ha_dir(cluster), ignore_errors=True)  # Patroni's files held the superuser's password
    shutil.rmtree(cluster.data_root / "auth", ignore_errors=True)
    guard_added = write_server_config(cluster)
    isolation.start_server(cluster, user, timeout())
    drop_member_slots(cluster)
    return guard_added


def drop_member_slots(cluster: Cluster) -> list[str]:
    """The replication slots Patroni kept on the primary for standbys that are gone (named after
    the members: member_2 …): left behind, they would hold WAL back for ever."""
    dropped = []
    with dbconn.admin_connection(cluster) as conn:
        rows = conn.execute(
            "SELECT slot_name FROM pg_catalog.pg_replication_slots "
            "WHERE slot_type = 'physical' AND NOT active AND slot_name ~ '^member_[0-9]+$'"
        ).fetchall()
        for (name,) in rows:
            conn.execute(sql.SQL("SELECT pg_catalog.pg_drop_replication_slot({})").format(sql.Literal(name)))
            dropped.append(name)
    return dropped
