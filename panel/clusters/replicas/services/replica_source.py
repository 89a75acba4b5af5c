"""What a read-only replica needs done on its source, run on the source's node.

A replica may live on another node than its source (``placement.replica_node``): its node's agent
builds, runs and heals it, but the source's server is reached over its Unix socket, its files and
Patroni's REST port only on the source's node. Each step here is one call: in place when the
source's node is this process's, else through that node's agent (the agent route, on
``node.<source's node>``), as members on other nodes are asked (``remote_members``).

A refusal or a failure on the source's node comes back as an ``EngineError`` with its reason, so
the replica's pipeline (build, heal, delete) handles it as it handles a local one.
"""

from __future__ import annotations

import logging

import psycopg
from django.utils.translation import gettext as _

from panel.clusters.engine import dbconn, isolation
from panel.clusters.models import Cluster, Node
from panel.clusters.replicas.services import replica_slots, streaming
from panel.clusters.services import failures
from panel.clusters.standbys.services import ha_files, remote_members
from panel.core import agent
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

CALL_TIMEOUT = 60.0


class SourceNodeError(EngineError):
    """The source's node did not do a step, said in the panel's own words (``words``: a coded
    sentence a page may show, where an engine's text would go to the log only)."""

    def __init__(self, words: Message | str) -> None:
        super().__init__(str(words))
        self.words = words


def at_source(step: str, source: Cluster, *args: object, timeout: float = CALL_TIMEOUT) -> object:
    """Run ``step`` (one of this module's ``*_here`` functions) on the source's node."""
    name = f"{__name__}.{step}"
    try:
        if source.node is None or source.node.is_here:
            return agent.lookup(name)(source, *args)
        if source.agent_silent():  # its heartbeats stopped: no need to wait for the timeout to know
            raise SourceNodeError(
                Message(
                    N_("The node agent “%(node)s” is not answering (no heartbeat lately)"),
                    "agent.not_answering",
                    node=source.node.name,
                )
            )
        return agent.send(name, (source, *args), {}, timeout=timeout, queue=source.node.agent_queue)
    except ServiceError as exc:
        raise SourceNodeError(exc.as_message()) from None


def _failed(exc: BaseException) -> ServiceError:
    log.warning("the source's node could not do it: %s", str(exc) or type(exc).__name__)
    return ServiceError(
        N_("The source's node could not do it: %(reason)s"),
        code="replica.source_failed",
        params={"reason": failures.reason(exc)},
    )


# --- the replica's side: one call each ----------------------------------------------------------


def admit(source: Cluster) -> None:
    """The source's replication role made or repaired (its password on the source's row, read
    from there by the replica's node: never sent), and its pg_hba.conf written again, which admits
    that role from the nodes of its replicas."""
    at_source("admit_here", source)


def prepare_slot(source: Cluster, slot: str, timeout: float) -> None:
    at_source("prepare_slot_here", source, slot, timeout, timeout=timeout + CALL_TIMEOUT)


def slot_gone(source: Cluster, slot: str) -> bool:
    """The replica's slot dropped on its source, and the source's pg_hba.conf without the line of
    a node that holds no other replica (True also when the source does not answer: its
    ``max_slot_wal_keep_size`` bounds what it keeps)."""
    try:
        return bool(at_source("slot_gone_here", source, slot))
    except EngineError:
        return True


def lag(source: Cluster) -> dict[str, streaming.Lag]:
    return at_source("lag_here", source)  # type: ignore[return-value]


def timeline(source: Cluster) -> int | None:
    """The timeline the source's primary writes on; None when it does not answer or has none."""
    try:
        found = at_source("timeline_here", source)
    except EngineError:
        return None
    return found if isinstance(found, int) else None


def primary_address(replica: Cluster) -> tuple[str, int]:
    """The host and port of the source member that is primary now, as the replica's node reaches
    it (pg_rewind's superuser connection)."""
    source = replica.replica_of
    assert source is not None and replica.node_id is not None
    found = at_source("primary_here", source, replica.node_id)
    assert isinstance(found, tuple)
    return str(found[0]), int(found[1])


def base_conf(source: Cluster) -> str:
    """A source with standbys: its members' base configuration (``ha/postgresql.base.conf``), its
    include of member 1's ``panel.conf`` by absolute path made the relative one a copy has."""
    return str(at_source("base_conf_here", source))


def current_lsn(source: Cluster) -> str:
    return str(at_source("current_lsn_here", source))


# --- on the source's node -------------------------------------------------------------------------


@on_node(timeout=CALL_TIMEOUT)
def admit_here(source: Cluster) -> None:
    try:
        # One replica at a time sets up its source (role, pg_hba.conf written and reloaded): two
        # at once would write the same file; the lock goes with the connection.
        with dbconn.admin_connection(source) as lock:
            lock.execute("SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext('pgpanel_replica_setup'))")
            streaming.ensure_replication_role(source)
            isolation.refresh_server_auth(source)
            if source.is_ha:
                remote_members.push_auth(source)  # members on other nodes read the same lines
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        raise _failed(exc) from None


@on_node(timeout=CALL_TIMEOUT)
def prepare_slot_here(source: Cluster, slot: str, timeout: float) -> None:
    try:
        if source.is_ha:
            # Patroni would drop a slot it does not know: it makes this one, on whichever member is
            # primary now and after a failover (the replica streams through HAProxy).
            replica_slots.declare_slot(source, slot, timeout)
        else:
            # Made anew (a failed attempt's dropped) and holding WAL before the copy starts, not
            # once pg_basebackup's WAL stream connects: another copy's checkpoint meanwhile would
            # recycle where this one starts (``replica_slots.reserve_slot``).
            replica_slots.reserve_slot(source, slot)
    except (EngineError, dbconn.DatabaseError) as exc:
        raise _failed(exc) from None


@on_node(timeout=CALL_TIMEOUT)
def slot_gone_here(source: Cluster, slot: str) -> bool:
    try:
        replica_slots.drop_slot(source, slot)
        with dbconn.admin_connection(source) as conn:
            row = conn.execute(
                "SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = %s", [slot]
            ).fetchone()
        if row is None:
            # The replica is being deleted or was promoted: its node's line goes from pg_hba.conf.
            isolation.refresh_server_auth(source)
            if source.is_ha:
                remote_members.push_auth(source)
    except (EngineError, dbconn.DatabaseError, OSError):
        return True
    return row is None


@on_node(timeout=CALL_TIMEOUT)
def lag_here(source: Cluster) -> dict[str, streaming.Lag]:
    try:
        return streaming.replica_lag(source)
    except dbconn.DatabaseError as exc:
        raise _failed(exc) from None


@on_node(timeout=CALL_TIMEOUT)
def timeline_here(source: Cluster) -> int | None:
    try:
        with dbconn.admin_connection(source) as conn:
            row = conn.execute(
                "SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL ELSE "
                "('x' || substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))"
                "::bit(32)::int END"
            ).fetchone()
    except (dbconn.DatabaseError, psycopg.Error):
        return None
    return int(row[0]) if row and row[0] is not None else None


@on_node(timeout=CALL_TIMEOUT)
def primary_here(source: Cluster, replica_node_id: int) -> tuple[str, int]:
    """Its own port, not HAProxy's: pg_rewind logs in as the panel's superuser, which pg_hba.conf
    lets in over TCP only on a member's port."""
    replica_node = Node.objects.filter(pk=replica_node_id).first()
    for member in source.members.select_related("node").order_by("name"):
        try:
            with dbconn.admin_connection(source, port=int(member.port)) as conn:
                row = conn.execute("SELECT NOT pg_catalog.pg_is_in_recovery()").fetchone()
        except dbconn.DatabaseError:
            continue
        if row and row[0]:
            host = (
                member.host
                if replica_node is None or replica_node.pk == member.node_id
                else member.node.address
            )
            return host, int(member.port)
    raise _failed(EngineError(_("No member of the source is primary.")))


@on_node(timeout=CALL_TIMEOUT)
def current_lsn_here(source: Cluster) -> str:
    try:
        with dbconn.admin_connection(source) as conn:
            row = conn.execute("SELECT pg_catalog.pg_current_wal_lsn()::text").fetchone()
    except dbconn.DatabaseError as exc:
        raise _failed(exc) from None
    assert row is not None
    return str(row[0])


@on_node(timeout=CALL_TIMEOUT)
def base_conf_here(source: Cluster) -> str:
    try:
        base = (ha_files.ha_dir(source) / "postgresql.base.conf").read_text()
    except OSError as exc:
        raise _failed(exc) from None
    return base.replace(f"include_if_exists = '{source.pgdata / 'panel.conf'}'", ha_files.INCLUDE_LINE)
