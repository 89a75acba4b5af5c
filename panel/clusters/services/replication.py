"""What makes a read-only replica stream from its source: the source's replication role (the
panel's, reserved by the privilege guard) and one slot per replica, the replica's passfile and
copy of the source's CA, its ``standby.conf``, and how far behind the source it is.

The replica logs in to the source's TCP port (on loopback, or at the source's node address when
the replica is on another node) over TLS (``verify-full`` against the source's own CA), as ``settings.PANEL_REPLICATION_ROLE`` with a password kept encrypted on the
source's row and, in clear, only in a 0600 passfile of the replica's system user.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import gettext as _
from psycopg import sql

from panel import crypto
from panel.clusters.engine import dbconn, patroni
from panel.clusters.lib import patroni as patroni_lib
from panel.clusters.lib.pgconf import STANDBY_FILE, render_standby_conf, standby_conninfo
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services.create import new_password
from panel.core import runas
from panel.core.agent import on_node
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
    no member, no membership), with the password on the source's row; returns the password."""
    # Claimed once: two replicas made at the same time must not each set a password of their own.
    Cluster.objects.filter(pk=source.pk, replication_password_encrypted="").update(
        replication_password_encrypted=crypto.encrypt(new_password())
    )
    source.refresh_from_db(fields=["replication_password_encrypted"])
    password = crypto.decrypt(source.replication_password_encrypted)
    role = settings.PANEL_REPLICATION_ROLE
    ident = sql.Identifier(role)
    with dbconn.admin_connection(source) as conn, conn.transaction():
        # One at a time: concurrent ALTER ROLEs of one role fail ("tuple concurrently updated").
        conn.execute("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%s))", [role])
        exists = conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", [role]).fetchone()
        attributes = sql.SQL(
            "LOGIN REPLICATION NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD {}"
        ).format(sql.Literal(dbconn.scram_verifier(conn, role, password)))
        conn.execute(
            sql.SQL("{} ROLE {} WITH {}").format(sql.SQL("ALTER" if exists else "CREATE"), ident, attributes)
        )
        conn.execute(sql.SQL("ALTER ROLE {} RESET ALL").format(ident))
        related = conn.execute(
            "SELECT pg_catalog.pg_get_userbyid(roleid), pg_catalog.pg_get_userbyid(member) "
            "FROM pg_catalog.pg_auth_members WHERE member = %s::pg_catalog.regrole "
            "OR roleid = %s::pg_catalog.regrole",
            [role, role],
        ).fetchall()
        for granted, member in related:
            conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted), sql.Identifier(member)))
    return password


def source_host(replica: Cluster) -> str:
    """Where the replica reaches its source: loopback on the same node, else the source's node
    address (which the source's certificate names and its server listens on)."""
    source = replica.replica_of
    assert source is not None
    return "127.0.0.1" if source.node_id == replica.node_id else source.public_host


def conninfo(replica: Cluster) -> str:
    """How the replica reaches its source (libpq conninfo; the password is in the passfile)."""
    source = replica.replica_of
    assert source is not None
    return standby_conninfo(
        {
            "host": source_host(replica),
            "port": int(source.port or 0),
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
    user = replica.os_user()
    directory = replica.data_root / "replication"
    runas.make_private_dir(directory, user)
    # host:port:database:user:password; "replication" matches a streaming connection.
    line = f"{_pgpass(source_host(replica))}:{source.port}:replication:{settings.PANEL_REPLICATION_ROLE}:{_pgpass(password)}\n"
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
    user = replica.os_user()
    text = render_standby_conf(conninfo(replica), slot_name(replica))
    runas.write_private_file(replica.pgdata / STANDBY_FILE, text, owner=user)
    runas.write_private_file(replica.pgdata / STANDBY_SIGNAL, "", owner=user)
    return [STANDBY_FILE]


def drop_slot(source: Cluster, slot: str) -> bool:
    """Remove a replica's slot from its source, so the source keeps no WAL for it; True if one
    was there. A slot still in use (its walsender exiting) is retried by the caller's next call.
    With standbys the slot is one of Patroni's permanent slots: it leaves Patroni's configuration
    first (else Patroni would make it again), then every member that still has it."""
    if not source.is_ha:
        return _drop_on(source, slot, None)
    try:
        _patch_slots(source, patroni_lib.permanent_slots(remove=[slot]))
    except EngineError as exc:
        # As when the source's PostgreSQL does not answer: the caller's retry or warning.
        raise dbconn.DatabaseError(str(exc)) from None
    found = False
    for port in source.members.values_list("port", flat=True):
        try:
            found |= _drop_on(source, slot, int(port))
        except dbconn.DatabaseError:
            continue  # a member that is down: its Patroni drops the slot once it runs again
    return found


def _drop_on(source: Cluster, slot: str, port: int | None) -> bool:
    with dbconn.admin_connection(source, port=port) as conn:
        row = conn.execute(
            "SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots "
            "WHERE slot_name = %s AND NOT active",
            [slot],
        ).fetchone()
    return row is not None


def declare_slot(source: Cluster, slot: str, timeout: float) -> None:
    """A cluster with standbys: the replica's slot as a Patroni permanent physical slot, so that
    it exists on whichever member is primary and survives a failover (Patroni keeps copies on
    the standbys, advanced as the primary's moves); returns once the primary has it, reserving
    WAL. A one-member cluster's slot is ``reserve_slot``'s."""
    _patch_slots(source, patroni_lib.permanent_slots(declare=[slot]))

    def reserved() -> bool:
        try:
            with dbconn.admin_connection(source) as conn:
                row = conn.execute(
                    "SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = %s "
                    "AND slot_type = 'physical' AND restart_lsn IS NOT NULL AND NOT pg_catalog.pg_is_in_recovery()",
                    [slot],
                ).fetchone()
        except dbconn.DatabaseError:
            return False
        return row is not None

    if not wait_for(reserved, timeout, interval=0.2):
        raise EngineError(
            _("Patroni did not make the replication slot %(slot)s on the primary within %(s).0f s.")
            % {"slot": slot, "s": timeout}
        )


def reserve_slot(source: Cluster, slot: str) -> None:
    """A one-member source: the replica's physical slot made anew (a failed attempt's dropped),
    holding WAL from now on, before ``pg_basebackup`` starts its copy.

    A slot ``pg_basebackup --create-slot`` makes holds WAL only once its WAL stream has connected,
    after the copy started: a checkpoint in between (another replica's copy starting, two made at
    once) recycles the segment the copy starts from, and the copy fails with "requested WAL
    segment … has already been removed"."""
    drop_slot(source, slot)
    with dbconn.admin_connection(source) as conn:
        conn.execute("SELECT pg_catalog.pg_create_physical_replication_slot(%s, true)", [slot])


def declared_slots(source: Cluster) -> dict[str, object]:
    """Patroni's permanent slots of a cluster with standbys (its ``GET /config``: the member's
    view of etcd, a moment behind a ``PATCH``)."""
    for member in source.members.order_by("name"):
        status, text = patroni.rest("GET", member.rest_port, "/config", timeout=5, host=member.host)
        if status == 200:
            return dict(json.loads(text).get("slots") or {})
    raise EngineError(_("No member's Patroni answers."))


def members_with_slot(source: Cluster, slot: str) -> list[str]:
    """The members (by name) whose PostgreSQL has the slot now; a member that does not answer is
    left out."""
    holders = []
    for name, port in source.members.order_by("name").values_list("name", "port"):
        try:
            with dbconn.admin_connection(source, port=int(port)) as conn:
                row = conn.execute(
                    "SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = %s", [slot]
                ).fetchone()
        except dbconn.DatabaseError:
            continue
        if row is not None:
            holders.append(name)
    return holders


def keep_slots_declared(source: Cluster) -> list[str]:
    """The reconciler's part for a cluster with standbys: Patroni's permanent replica slots are
    its replicas' (one missing, etcd's data lost or a PATCH that failed, is declared again; one
    of a replica that is gone, deleted while no Patroni answered, is removed); other permanent
    slots are left alone. Returns what it did, for the reconciler's notes."""
    try:
        declared = {name for name in declared_slots(source) if name.startswith(SLOT_PREFIX)}
    except EngineError:
        return []  # no Patroni answers: supervise() starts them, the next pass does this
    wanted = {slot_name(replica) for replica in source.replicas.exclude(status=ClusterStatus.DELETING)}
    missing, extra = sorted(wanted - declared), sorted(declared - wanted)
    if not missing and not extra:
        return []
    try:
        _patch_slots(source, patroni_lib.permanent_slots(declare=missing, remove=extra))
    except EngineError as exc:
        return [f"{source.name}: replica slots not declared: {exc}"]
    return [f"{source.name}: replica slots declared {missing}, removed {extra}"]


def _patch_slots(source: Cluster, body: dict[str, object]) -> None:
    """``PATCH /config`` on the first member whose Patroni answers (it writes etcd for all)."""
    answer = ""
    for member in source.members.order_by("name"):
        status, answer = patroni.rest(
            "PATCH",
            member.rest_port,
            "/config",
            body,
            timeout=10,
            host=member.host,
            auth=source.rest_credentials,
        )
        if status == 200:
            return
    raise EngineError(
        _("Patroni did not take the replication slot: %(reason)s")
        % {"reason": answer.strip() or _("No member's Patroni answers.")}
    )


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
