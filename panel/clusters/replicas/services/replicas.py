"""Read-only replicas (the managed service's read-only nodes), one function per user action:
add one to a cluster, list them with their lag, promote one to a cluster of its own, delete one.
The web, the API, ``manage.py replica`` and the tasks call these same functions.

A replica is a cluster row whose ``replica_of`` is its source (``replica_build`` makes it); it has
its own name, plan (at least the source's), ports, certificate, system user and PgBouncer, and
its source's data, roles and passwords. Its source cannot be deleted while it has replicas.
A replica of a cluster with standbys streams through the cluster's port (HAProxy, which follows
the primary) with a Patroni permanent slot, so it keeps streaming after a failover.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import gettext as _
from psycopg import sql

from panel import crypto
from panel.clusters import hooks
from panel.clusters.engine import dbconn, isolation, panel_roles, postgres
from panel.clusters.lib.names import InvalidName, require_typed_name, validate_replica_name
from panel.clusters.lib.plans import require_plan
from panel.clusters.models import Cluster, ClusterStatus, EventLevel
from panel.clusters.replicas.services import replica_source, streaming
from panel.clusters.replicas.services.replica_build import build_replica, follow_source_rows
from panel.clusters.services import failures, lifecycle, placement, transitions
from panel.clusters.services.create import create_cluster, new_password
from panel.clusters.services.provision import write_server_config
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.polling import wait_for
from panel.core.runas import EngineError
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)

# PostgreSQL's default max_wal_senders and max_replication_slots are 10 (Patroni's too): one
# sender and one slot per replica, and pg_basebackup needs two senders while it copies.
MAX_REPLICAS = 8


def max_replicas(source: Cluster) -> int:
    """How many replicas ``source`` may have: each standby takes a sender and a slot as well."""
    return MAX_REPLICAS - max(0, source.num_nodes - 1) if source.is_ha else MAX_REPLICAS


def request_problems(source: Cluster, name: str, plan_slug: str) -> list[ServiceError]:
    """Every refusal of a replica's name and plan, so that a form shows them all at once (a plan
    too small used to hide a bad name until it was fixed)."""
    problems = []
    try:
        validate_replica_name(name)
    except InvalidName as exc:
        problems.append(ServiceError.of(exc, "name"))
    try:
        plan = require_plan(plan_slug)
    except ServiceError as exc:
        return [*problems, exc]
    source_plan = source.plan
    if source_plan is not None and plan.smaller_than(source_plan):
        problems.append(
            ServiceError(
                N_("A replica's plan must be at least its source's (%(plan)s); %(chosen)s is smaller."),
                field="plan",
                code="replica.plan_too_small",
                params={"plan": source.plan_slug, "chosen": plan_slug},
            )
        )
    return problems


def create_replica(
    source: Cluster, *, name: str, plan_slug: str | None = None, enqueue: bool = True
) -> Cluster:
    """Check, record the replica (``creating``, on the node ``placement.replica_node`` chooses:
    another than the source's when one has room) and queue its making on that node's worker (or
    leave that to the caller: ``add_replica`` in the foreground)."""
    lifecycle.require_local(source)
    if source.is_replica:
        raise ServiceError(
            N_("“%(name)s” is itself a read-only replica; add replicas to its source instead."),
            code="replica.of_replica",
            params={"name": source.name},
        )
    transitions.require_serving(source, fresh=True)
    if source.replicas.count() >= max_replicas(source):
        raise ServiceError(
            N_("A cluster has at most %(count)s read-only replicas."),
            code="replica.too_many",
            params={"count": max_replicas(source)},
        )
    plan_slug = plan_slug or source.plan_slug
    problems = request_problems(source, name, plan_slug)
    if problems:
        raise problems[0]
    assert source.node is not None
    plan = require_plan(plan_slug)
    node = placement.replica_node(source, plan, source.version)
    try:
        replica = _record(source, name, plan_slug, node.name)
    except ServiceError as exc:
        if exc.code != "node.full" or node.pk == source.node_id:
            raise
        # Another cluster took the room meanwhile (placement holds no lock): the source's node.
        replica = _record(source, name, plan_slug, source.node.name)
    replica.replica_of = source
    replica.config = dict(source.config)  # replayed settings (max_worker_processes…) must fit
    replica.progress_message = _("Queued (replica of %(name)s)") % {"name": source.name}
    replica.save(update_fields=["replica_of", "config", "progress_message", "updated_at"])
    transitions.log_event(
        source, "replica-requested", Message(N_("Read-only replica “%(name)s” requested."), name=name)
    )
    if enqueue:
        try:
            # A copy of the source's data: long work, on the worker of backups and restores (a
            # tenant's replicas never hold up the node's control work).
            enqueue_task(
                "panel.clusters.tasks.build_replica",
                str(replica.pk),
                queue=replica.backups_queue,
                time_limit=settings.PANEL_BACKUP_TIMEOUT + settings.PANEL_COMMAND_TIMEOUT * 2,
            )
        except ServiceError:
            replica.delete()
            raise
    return replica


def _record(source: Cluster, name: str, plan_slug: str, node: str) -> Cluster:
    return create_cluster(
        source.owner, name=name, plan_slug=plan_slug, version=source.version, enqueue=False, node=node
    )


def add_replica(source: Cluster, *, name: str, plan_slug: str | None = None) -> Cluster:
    """In the foreground (the command line, the tests): the replica online, or a ServiceError
    and nothing of it left. Placed on another node, it is built by that node's worker, awaited."""
    replica = create_replica(source, name=name, plan_slug=plan_slug, enqueue=False)
    assert replica.node is not None
    reason = build_replica(replica.pk) if replica.node.is_here else _built_there(replica)
    if reason:
        raise ServiceError(
            N_("The replica could not be made: %(reason)s"), code="replica.failed", params={"reason": reason}
        )
    replica.refresh_from_db()
    return replica


def _built_there(replica: Cluster) -> str:
    """Queue the build on the replica's node and wait for its outcome ("" once online)."""
    source = replica.replica_of
    assert source is not None
    timeout = settings.PANEL_BACKUP_TIMEOUT + settings.PANEL_COMMAND_TIMEOUT * 2
    try:
        enqueue_task(
            "panel.clusters.tasks.build_replica",
            str(replica.pk),
            queue=replica.backups_queue,
            time_limit=timeout,
        )
    except ServiceError:
        replica.delete()
        raise
    rows = Cluster.objects.filter(pk=replica.pk)
    wait_for(lambda: not rows.filter(status=ClusterStatus.CREATING).exists(), timeout, interval=0.5)
    if rows.filter(status=ClusterStatus.ONLINE).exists():
        return ""
    failed = source.events.filter(kind="replica-failed").order_by("-created_at").first()
    return (
        failed.message
        if failed is not None
        else _("it was not made on node %(node)s") % {"node": replica.node}
    )


def get_replica(source: Cluster, name: str) -> Cluster:
    """The replica of that name of ``source``; a ServiceError (code ``replica.not_found``) else."""
    replica = source.replicas.select_related("node", "replica_of").filter(name=name).first()
    if replica is None:
        raise ServiceError(
            N_("“%(cluster)s” has no read-only replica named “%(name)s”."),
            field="name",
            code="replica.not_found",
            params={"cluster": source.name, "name": name},
        )
    return replica


@dataclass(frozen=True)
class ReplicaRow:
    """One line of a source's replica list."""

    replica: Cluster
    state: str  # the walsender's (streaming, catchup…); "" when not connected
    lag_bytes: int | None
    replay_lag_seconds: float | None


def list_replicas(source: Cluster) -> list[ReplicaRow]:
    """The source's replicas by name, with their lag when the source answers."""
    replicas = list(source.replicas.select_related("node").order_by("name"))
    lags: dict[str, streaming.Lag] = {}
    if replicas and source.is_serving:
        try:
            lags = replica_source.lag(source)
        except (ServiceError, EngineError, dbconn.DatabaseError):
            lags = {}
    rows = []
    for replica in replicas:
        lag = lags.get(streaming.slot_name(replica))
        rows.append(
            ReplicaRow(
                replica,
                lag.state if lag else "",
                lag.lag_bytes if lag else None,
                lag.replay_lag_seconds if lag else None,
            )
        )
    return rows


def delete_replica(replica: Cluster, *, foreground: bool = False) -> None:
    """Remove a replica completely: processes, files, system user, its slot on the source, rows
    (queued for its node's worker; ``foreground`` for the command line)."""
    require_replica(replica)
    if foreground:
        lifecycle.delete_cluster(replica, confirm_name=replica.name)
    else:
        lifecycle.request_delete(replica, confirm_name=replica.name)


def require_replica(cluster: Cluster) -> None:
    if not cluster.is_replica:
        raise ServiceError(
            N_("“%(name)s” is not a read-only replica."),
            code="replica.not_a_replica",
            params={"name": cluster.name},
        )


@on_node(timeout=120)
def promote_replica(replica: Cluster, *, confirm_name: str | None = None) -> Cluster:
    """Make a replica a cluster of its own that accepts writes: ``pg_ctl promote``, new secrets
    for the panel's roles, no more ``standby.conf`` nor slot on the old source, its own WAL
    archiving and backups. Its users, databases and pools stay as they are. ``confirm_name``:
    the name the user typed, when the caller asks one (the web)."""
    require_replica(replica)
    try:
        require_typed_name("replica", replica.name, confirm_name)
    except InvalidName as exc:
        raise ServiceError.of(exc, "confirm_name") from None
    transitions.require_serving(replica, fresh=True)
    source = replica.replica_of
    assert source is not None
    follow_source_rows(replica)
    try:
        postgres.promote(
            replica.version,
            replica.pgdata,
            user=isolation.os_user(replica),
            timeout=settings.PANEL_COMMAND_TIMEOUT,
        )
    except EngineError as exc:
        log.warning("promoting replica %s failed: %s", replica.pk, exc)  # pg_ctl's words: the log only
        raise ServiceError(
            N_("Promoting the replica failed. The panel's log holds the details for an administrator."),
            code="replica.promote_failed",
            params={},
        ) from None
    slot = streaming.slot_name(replica)
    replica.replica_of = None
    replica.save(update_fields=["replica_of", "updated_at"])
    try:
        _own_secrets(replica, source)
        write_server_config(replica)  # standby.conf gone; pgBackRest's files written for it
        isolation.reload_server_config(replica)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        # Promoted already (it accepts writes): what is left is said, and a restart redoes the files.
        log.warning("finishing the promotion of %s failed: %s", replica.pk, exc)
        reason = failures.reason(exc)
        transitions.log_event(
            replica,
            "error",
            Message(N_("Promoted, but finishing failed: %(reason)s"), reason=reason),
            EventLevel.ERROR,
        )
        raise ServiceError(
            N_("Promoted, but finishing failed: %(reason)s"),
            code="replica.promote_failed",
            params={"reason": reason},
        ) from None
    if not wait_for(lambda: replica_source.slot_gone(source, slot), 10, interval=0.2):
        transitions.log_event(
            source,
            "replica-slot",
            Message(N_("The replication slot %(slot)s could not be dropped."), slot=slot),
            EventLevel.WARNING,
        )
    transitions.log_event(
        replica,
        "promoted",
        Message(N_("Promoted: no longer a replica of “%(source)s”; accepts writes."), source=source.name),
    )
    transitions.log_event(
        source,
        "replica-promoted",
        Message(N_("Read-only replica “%(name)s” was promoted to a cluster of its own."), name=replica.name),
    )
    hooks.after_provision(replica)  # its own stanza and first backup (panel.backups)
    replica.refresh_from_db()
    return replica


def _own_secrets(cluster: Cluster, source: Cluster) -> None:
    """New passwords for the panel's roles (they were the source's), and the source's replication
    password no longer opens anything here."""
    source_password = (
        crypto.decrypt(source.replication_password_encrypted) if source.replication_password_encrypted else ""
    )
    superuser_password = new_password()
    monitor_password = new_password()
    with dbconn.admin_connection(cluster) as conn:
        dbconn.set_password(conn, settings.PANEL_SUPERUSER, superuser_password)
        previous = (
            crypto.decrypt(cluster.monitor_password_encrypted) if cluster.monitor_password_encrypted else ""
        )
        panel_roles.ensure_monitor_role(conn, settings.PANEL_MONITOR_ROLE, monitor_password, previous)
        try:
            ours = panel_roles.claim(conn, settings.PANEL_REPLICATION_ROLE, lambda: source_password)
        except panel_roles.NotPanelRole:
            ours = False  # somebody else's role of that name is not the panel's to change
        if ours:
            conn.execute(
                sql.SQL("ALTER ROLE {} WITH PASSWORD NULL").format(
                    sql.Identifier(settings.PANEL_REPLICATION_ROLE)
                )
            )
    cluster.superuser_password_encrypted = crypto.encrypt(superuser_password)
    cluster.monitor_password_encrypted = crypto.encrypt(monitor_password)
    cluster.replication_password_encrypted = ""
    cluster.save(
        update_fields=[
            "superuser_password_encrypted",
            "monitor_password_encrypted",
            "replication_password_encrypted",
            "updated_at",
        ]
    )


def status_word_for_api(cluster: Cluster) -> str:
    """The managed service's status of a replica: ``forking`` while it is being made."""
    return "forking" if cluster.status == ClusterStatus.CREATING else cluster.status
