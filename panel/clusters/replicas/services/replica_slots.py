"""The replication slots that keep a read-only replica's WAL on its source: made, declared to
Patroni (a cluster with standbys keeps them on every member as permanent slots, so a failover
keeps them), found and dropped.
"""

from __future__ import annotations

import json

from django.utils.translation import gettext as _

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster, ClusterStatus, credentials
from panel.clusters.replicas.services.streaming import SLOT_PREFIX, slot_name
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.core.polling import wait_for
from panel.core.runas import EngineError


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
            auth=credentials.rest_credentials(source),
        )
        if status == 200:
            return
    raise EngineError(
        _("Patroni did not take the replication slot: %(reason)s")
        % {"reason": answer.strip() or _("No member's Patroni answers.")}
    )
