"""What makes a read-only replica stream from its source: the source's replication role (the
panel's, reserved by the privilege guard) and one slot per replica, the replica's passfile and
copy of the source's CA, its ``standby.conf``, and how far behind the source it is.

The replica logs in to the source's TCP port (on loopback, or at the source's node address when
the replica is on another node; with standbys, to the members' own ports, never through HAProxy)
over TLS (``verify-full`` against the source's own CA), as ``settings.PANEL_REPLICATION_ROLE`` with a password kept encrypted on the
source's row and, in clear, only in a 0600 passfile of the replica's system user.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from django.conf import settings
from psycopg import sql

from panel import crypto
from panel.clusters.engine import dbconn, isolation, panel_roles
from panel.clusters.lib.pgconf import STANDBY_FILE, render_standby_conf, standby_conninfo
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services.create import new_password
from panel.core import runas
from panel.core.agent import on_node
from panel.core.errors import N_, ServiceError
from panel.core.polling import wait_for
from panel.core.runas import EngineError

PASSFILE = "replication.pgpass"
SOURCE_CA = "source-ca.crt"
STANDBY_SIGNAL = "standby.signal"


SLOT_PREFIX = "pgpanel_replica_"


def slot_name(replica: Cluster) -> str:
    """The source's replication slot of this replica (also its ``application_name`` there)."""
    return f"{SLOT_PREFIX}{replica.id.hex}"


def replication_dir(replica: Cluster) -> str:
    return str(replica.data_root / "replication")


def ensure_replication_role(source: Cluster) -> str:
    """The source's replication role, created or repaired (LOGIN REPLICATION and nothing else,
    no member, no membership), with the password on the source's row; returns the password.
    A role of that name the panel did not make is refused, not repaired (``panel_roles``)."""
    # Claimed once: two replicas made at the same time must not each set a password of their own.
    Cluster.objects.filter(pk=source.pk, replication_password_encrypted="").update(
        replication_password_encrypted=crypto.encrypt(new_password())
    )
    source.refresh_from_db(fields=["replication_password_encrypted"])
    password = crypto.decrypt(source.replication_password_encrypted)
    role = settings.PANEL_REPLICATION_ROLE
    with dbconn.admin_connection(source) as conn, conn.transaction():
        attributes = sql.SQL(
            "LOGIN REPLICATION NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD {}"
        ).format(sql.Literal(dbconn.scram_verifier(conn, role, password)))
        try:
            if source.users.filter(name=role).exists():
                # Made for the tenant by the API before the name was refused, and perhaps taken
                # over by a build then (its password the panel's): the tenant's all the same.
                raise panel_roles.NotPanelRole(role)
            panel_roles.ensure(conn, role, attributes, known_password=lambda: password)
        except panel_roles.NotPanelRole:
            # Somebody else's role of that name (a tenant's, made before the name was reserved)
            # would become the role every replica logs in as, with its password: left as it is.
            raise ServiceError(
                N_(
                    "This cluster has a role named “%(role)s” that the panel did not make; the panel "
                    "streams replicas with a role of that name and does not take over somebody "
                    "else's. Ask an administrator to remove or rename that role, then try again."
                ),
                code="replica.role_not_panels",
                params={"role": role},
            ) from None
    return password


def source_host(replica: Cluster) -> str:
    """Where the replica reaches its source: loopback on the same node, else the source's node
    address (which the source's certificate names and its server listens on)."""
    source = replica.replica_of
    assert source is not None
    return "127.0.0.1" if source.node_id == replica.node_id else source.public_host


def _member_targets(replica: Cluster, source: Cluster) -> dict[str, str | int]:
    """A source with standbys: every member's own port, the primary chosen by libpq
    (``target_session_attrs``), again after each failover. Not HAProxy's port: what comes through
    it reaches the members from an address whose pg_hba.conf lines let no panel role in
    (``firewall.HAPROXY_SOURCE``). A member on another node is reached at its node's address, its
    certificate checked for the source's host name as before (``hostaddr`` when the address is
    numeric)."""
    hosts, addresses, ports = [], [], []
    for member in source.members.select_related("node", "cluster").order_by("name"):
        if member.node is None or member.node_id == replica.node_id:
            address = member.host
        else:
            address = member.node.address
        if address == "127.0.0.1" or not _numeric(address):
            hosts.append(address)
            addresses.append("")
        else:
            hosts.append(source.public_host)
            addresses.append(address)
        ports.append(str(member.port))
    targets: dict[str, str | int] = {"host": ",".join(hosts), "port": ",".join(ports)}
    if any(addresses):
        targets["hostaddr"] = ",".join(addresses)  # an empty entry: that host's name is looked up
    return {**targets, "target_session_attrs": "primary"}


def _numeric(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


def conninfo(replica: Cluster) -> str:
    """How the replica reaches its source (libpq conninfo; the password is in the passfile)."""
    source = replica.replica_of
    assert source is not None
    if source.is_ha:
        targets = _member_targets(replica, source)
    else:
        targets = {"host": source_host(replica), "port": int(source.port or 0)}
    return standby_conninfo(
        {
            **targets,
            "user": settings.PANEL_REPLICATION_ROLE,
            "passfile": f"{replication_dir(replica)}/{PASSFILE}",
            "sslmode": "verify-full",
            "sslrootcert": f"{replication_dir(replica)}/{SOURCE_CA}",
            "application_name": slot_name(replica),
            "connect_timeout": 5,
        }
    )


def write_login_files(replica: Cluster, password: str) -> None:
    """The passfile and the source's CA, the replica's user's own (0700 directory, 0600 files)."""
    source = replica.replica_of
    assert source is not None
    user = isolation.os_user(replica)
    directory = replica.data_root / "replication"
    runas.make_private_dir(directory, user)
    # host:port:database:user:password; "replication" matches a streaming connection, to any of
    # a source's members (the file serves this one login alone).
    line = f"*:*:replication:{settings.PANEL_REPLICATION_ROLE}:{_pgpass(password)}\n"
    runas.write_private_file(directory / PASSFILE, line, owner=user)
    runas.write_private_file(directory / SOURCE_CA, source.ca_certificate, owner=user)


def _pgpass(value: str) -> str:
    return value.replace("\\", "\\\\").replace(":", "\\:")


def standby_files(replica: Cluster) -> list[str]:
    """``write_server_config``'s part for a replica: ``standby.conf`` (included by panel.conf)
    and ``standby.signal``; none for any other cluster (a promoted one loses its file)."""
    if not replica.is_replica:
        (replica.pgdata / STANDBY_FILE).unlink(missing_ok=True)
        return []
    user = isolation.os_user(replica)
    text = render_standby_conf(conninfo(replica), slot_name(replica))
    runas.write_private_file(replica.pgdata / STANDBY_FILE, text, owner=user)
    runas.write_private_file(replica.pgdata / STANDBY_SIGNAL, "", owner=user)
    return [STANDBY_FILE]


def refresh_standbys() -> list[str]:
    """The reconciler's part: a serving replica on this node whose ``standby.conf`` is not what
    it should be (a source's members changed; or written when replicas of a cluster with standbys
    streamed through HAProxy, which no longer lets the replication role in) gets its login files
    and ``standby.conf`` written again, then a reload (the WAL receiver reconnects with them)."""
    notes = []
    replicas = Cluster.objects.here().filter(status__in=ClusterStatus.SERVING, replica_of__isnull=False)
    for replica in replicas.select_related("replica_of"):
        source = replica.replica_of
        assert source is not None
        try:
            text = render_standby_conf(conninfo(replica), slot_name(replica))
            if (replica.pgdata / STANDBY_FILE).read_text() == text:
                continue
            if not source.replication_password_encrypted:
                continue
            write_login_files(replica, crypto.decrypt(source.replication_password_encrypted))
            standby_files(replica)
            with dbconn.admin_connection(replica) as conn:
                conn.execute("SELECT pg_catalog.pg_reload_conf()")
        except (OSError, EngineError, dbconn.DatabaseError) as exc:
            notes.append(f"{replica.name}: its standby.conf: {exc}")
            continue
        notes.append(f"{replica.name}: standby.conf written again (how it reaches its source)")
    return notes


@dataclass(frozen=True)
class Lag:
    """How far a replica is behind its source, as the source's walsender sees it."""

    state: str  # streaming, catchup, …; "" when the replica is not connected
    lag_bytes: int | None
    replay_lag_seconds: float | None


@on_node()
def replica_lag(source: Cluster) -> dict[str, Lag]:
    """Every connected replica of ``source``: its slot name → its lag (pg_stat_replication)."""
    with dbconn.admin_connection(source) as conn:
        rows = conn.execute(
            "SELECT application_name, state, "
            "pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), replay_lsn)::bigint, "
            "extract(epoch FROM replay_lag)::float8 FROM pg_catalog.pg_stat_replication "
            "WHERE application_name LIKE 'pgpanel_replica_%'"
        ).fetchall()
    return {name: Lag(state or "", lag, seconds) for name, state, lag, seconds in rows}


def wait_replayed(replica: Cluster, timeout: float = 5.0, *, target: str | None = None) -> bool:
    """Until the replica has replayed everything its source has written so far (a role or a
    password just changed there), or up to ``target`` (read on the source's node when the
    replica is on another one); False if it has not within ``timeout``."""
    source = replica.replica_of
    assert source is not None
    if target is None:
        with dbconn.admin_connection(source) as conn:
            row = conn.execute("SELECT pg_catalog.pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        target = row[0]

    def replayed() -> bool:
        with dbconn.admin_connection(replica) as conn:
            done = conn.execute(
                "SELECT pg_catalog.pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]
            ).fetchone()
        return bool(done and done[0])

    return wait_for(replayed, timeout, interval=0.05)
