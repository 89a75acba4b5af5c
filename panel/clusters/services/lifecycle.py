"""Start, stop, restart and delete: the web's way marks the cluster busy and queues a worker's
task (``request_action``, ``request_delete``), which the page follows like a provisioning; the
command line and the tasks do the work in the foreground (``perform_action``, ``delete_cluster``)."""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters import hooks
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import Cluster, ClusterStatus, EventLevel, status_word
from panel.clusters.replicas.services import replica_source, streaming
from panel.clusters.services import failures, transitions
from panel.clusters.services.provision import clear_reserved, write_server_config
from panel.clusters.standbys.services import ha, rolling
from panel.core import runas
from panel.core.errors import N_, Message, ServiceError, Term, message_to_text
from panel.core.polling import wait_for
from panel.core.runas import EngineError, OsUser
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)


ACTIONS = ("start", "stop", "restart")
HEALTHY_WAIT = 10  # seconds a restart waits for every member of a cluster with standbys to run
# The statuses each action may start from: the web refuses the others, and the Actions menu offers
# only these. A degraded cluster is running (part of it, at least): it restarts or stops; Start is
# for a stopped one (a restart starts what is missing too).
ACTION_STATUSES: dict[str, frozenset[str]] = {
    "start": frozenset({ClusterStatus.STOPPED}),
    "restart": frozenset({ClusterStatus.ONLINE, ClusterStatus.DEGRADED}),
    "stop": frozenset({ClusterStatus.ONLINE, ClusterStatus.DEGRADED}),
}
# An action inside a sentence ("…; it cannot start now"), translated where the sentence is read.
ACTION_WORDS = {"start": N_("start"), "stop": N_("stop"), "restart": N_("restart")}


def require_local(cluster: Cluster) -> None:
    if not cluster.is_local:
        raise ServiceError(
            N_("The panel does not run this attached server; manage it where it runs."),
            code="cluster.attached_not_managed",
            params={},
        )


def available_actions(cluster: Cluster) -> list[str]:
    """The actions the cluster's status allows now, in the menu's order (none for an attached
    server, which the panel does not run)."""
    if not cluster.is_local:
        return []
    return [action for action in ("start", "restart", "stop") if cluster.status in ACTION_STATUSES[action]]


def request_action(cluster: Cluster, action: str) -> Cluster:
    """Mark the cluster busy and queue ``action`` for a worker (the web's way)."""
    require_local(cluster)
    if action not in ACTIONS:
        raise ServiceError(N_("Unknown action %(a)s."), code="cluster.action_unknown", params={"a": action})
    allowed = ACTION_STATUSES[action]
    busy = ClusterStatus.STOPPING if action == "stop" else ClusterStatus.STARTING
    previous = cluster.status
    if not Cluster.objects.filter(pk=cluster.pk, status__in=allowed).update(
        status=busy, updated_at=timezone.now()
    ):
        raise ServiceError(
            N_("The cluster is %(status)s; it cannot %(action)s now."),
            code="cluster.action_not_now",
            params={"status": status_word(cluster.status), "action": Term(ACTION_WORDS.get(action, action))},
        )
    try:
        enqueue_task(
            "panel.clusters.tasks.cluster_action", str(cluster.pk), action, queue=cluster.tasks_queue
        )
    except ServiceError:
        Cluster.objects.filter(pk=cluster.pk).update(status=previous, updated_at=timezone.now())
        raise
    cluster.refresh_from_db()
    return cluster


def perform_action(cluster: Cluster, action: str) -> Cluster:
    """Start, stop or restart in the foreground (tasks and the command line)."""
    require_local(cluster)
    timeout = settings.PANEL_COMMAND_TIMEOUT
    guard_added = False
    try:
        user = isolation.os_user(cluster)
        if action in {"start", "restart"}:
            # Before stopping: a guard that cannot be built leaves a running cluster running.
            guard_added = write_server_config(cluster)
        # A cluster with standbys restarts member by member and keeps serving (standbys/services/rolling.py).
        rolling_restart = action == "restart" and cluster.is_ha
        if action in {"stop", "restart"} and not rolling_restart:
            transitions.mark(cluster, ClusterStatus.STOPPING)
            if action == "stop":
                # On restart PgBouncer stays up: its clients reconnect once the server is back.
                hooks.pooler.stop_pgbouncer(cluster)
            if cluster.is_ha:
                ha.stop_members(cluster)
            else:
                postgres.stop(cluster.version, cluster.pgdata, user=user, timeout=timeout)
            transitions.mark(cluster, ClusterStatus.STOPPED)
            if action == "stop":
                transitions.log_event(cluster, "stopped", Message(N_("Cluster stopped.")))
        if action in {"start", "restart"}:
            done = (
                Message(N_("Cluster restarted.")) if action == "restart" else Message(N_("Cluster started."))
            )
            if rolling_restart:
                start_missing_members(cluster, user)
                # The primary stays where it is: a restart the user asked for moves nothing.
                primary = rolling.rolling_restart(cluster, keep_primary=True)
                done = Message(
                    N_(
                        "Cluster restarted member by member, the standbys first; %(member)s is still the primary."
                    ),
                    member=primary,
                )
                guard_loaded(cluster, guard_added=guard_added)
            else:
                transitions.mark(cluster, ClusterStatus.STARTING)
                start_server(cluster, user, guard_added=guard_added)
            transitions.mark_online(cluster)
            hooks.pooler.reapply_config(cluster)  # starts PgBouncer again if the cluster has pools
            transitions.log_event(cluster, "restarted" if action == "restart" else "started", done)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        # The engine's own words (pg_ctl's, the server's, with its paths) go to the log only.
        log.warning("%s of cluster %s failed: %s", action, cluster.pk, exc)
        running = postgres.postmaster_pid(cluster.pgdata) is not None
        cluster.status = ClusterStatus.DEGRADED if running else ClusterStatus.STOPPED
        failed = action_failed(action)
        cluster.error_message = message_to_text(failed)
        cluster.save(update_fields=["status", "error_message", "updated_at"])
        transitions.log_event(cluster, "error", failed, EventLevel.ERROR)
        raise ServiceError(failed.template, code="cluster.action_failed", params=failed.params) from None
    return cluster


def start_missing_members(cluster: Cluster, user: OsUser) -> None:
    """Before a rolling restart, which needs every member running: a member that is not (a
    degraded cluster) is started first, as a start would, and the event says so; the primary,
    wherever it runs, stays."""
    if not ha.wait_healthy(cluster, HEALTHY_WAIT):
        transitions.log_event(
            cluster,
            "restarting",
            Message(N_("The members are not all running: the missing ones start first, then each restarts.")),
            EventLevel.WARNING,
        )
        transitions.set_progress(cluster, 5, N_("Starting the members that do not run"))
        ha.start_members(cluster, user, settings.PANEL_COMMAND_TIMEOUT)
    transitions.set_progress(
        cluster, 10, N_("Restarting member by member, the standbys first; the primary stays where it is")
    )


def action_failed(action: str) -> Message:
    """What a page, an event and the command line say of a failed start, stop or restart."""
    return Message(
        N_("Could not %(action)s the cluster. The panel's log holds the details for an administrator."),
        "cluster.action_failed",
        action=Term(ACTION_WORDS.get(action, action)),
    )


def start_server(cluster: Cluster, user: OsUser, *, guard_added: bool) -> None:
    """PostgreSQL started on what ``write_server_config`` wrote, in its cgroup (the plan's limits);
    a guard loaded for the first time (``guard_added``) then clears the reserved roles."""
    runas.make_private_dir(cluster.socket_dir, user)
    if cluster.is_ha:
        ha.start_members(cluster, user, settings.PANEL_COMMAND_TIMEOUT)
    else:
        isolation.start_server(cluster, user, settings.PANEL_COMMAND_TIMEOUT)
    guard_loaded(cluster, guard_added=guard_added)


def guard_loaded(cluster: Cluster, *, guard_added: bool) -> None:
    """A guard loaded for the first time (``guard_added``) clears the reserved roles."""
    if guard_added and not cluster.is_replica:  # a replica's roles are its source's
        clear_reserved(cluster)
        transitions.log_event(cluster, "guard-installed", Message(N_("The privilege guard is now loaded.")))


# --- delete ----------------------------------------------------------------------------------


def check_confirm_name(cluster: Cluster, confirm_name: str) -> None:
    if confirm_name != cluster.name:
        raise ServiceError(
            N_("Type the cluster name “%(name)s” to confirm."),
            field="confirm_name",
            code="cluster.confirm_name_mismatch",
            params={"name": cluster.name},
        )


def refuse_if_replicated(cluster: Cluster) -> None:
    """A cluster its read-only replicas stream from is not deleted under them: they go first
    (deleted, or promoted to clusters of their own)."""
    names = sorted(cluster.replicas.values_list("name", flat=True))
    if names:
        raise ServiceError(
            N_("The cluster has read-only replicas (%(names)s); delete or promote them first."),
            code="cluster.has_replicas",
            params={"names": ", ".join(names)},
        )


def request_delete(cluster: Cluster, *, confirm_name: str) -> bool:
    """The web's way. An attached server is forgotten at once (nothing of it runs here) and this
    returns True; a local cluster is marked ``deleting`` and a worker tears it down while the page
    follows its progress (False: it still exists, for now)."""
    check_confirm_name(cluster, confirm_name)
    refuse_if_replicated(cluster)
    if not cluster.is_local:
        cluster.delete()
        return True
    previous = {
        "status": cluster.status,
        "progress": cluster.progress,
        "error_message": cluster.error_message,
    }
    if (
        not Cluster.objects.filter(pk=cluster.pk)
        .exclude(status=ClusterStatus.DELETING)
        .update(
            status=ClusterStatus.DELETING,
            progress=0,
            progress_message=_("Queued"),
            error_message="",
            updated_at=timezone.now(),
        )
    ):
        raise ServiceError(
            N_("The cluster is already being deleted."), code="cluster.already_deleting", params={}
        )
    try:
        enqueue_task("panel.clusters.tasks.delete", str(cluster.pk), queue=cluster.tasks_queue)
    except ServiceError:
        Cluster.objects.filter(pk=cluster.pk).update(
            progress_message="", updated_at=timezone.now(), **previous
        )
        raise
    cluster.refresh_from_db()
    transitions.log_event(cluster, "deleting", Message(N_("Deletion requested.")))
    return False


def delete_queued(cluster_id: uuid.UUID | str) -> None:
    """The worker's half of ``request_delete``: tear down a cluster marked ``deleting``. If that
    fails, the cluster stays, in ``error`` with the reason, and can be deleted again."""
    cluster = Cluster.objects.filter(pk=cluster_id, status=ClusterStatus.DELETING).first()
    if cluster is None:
        return  # deleted meanwhile (the command line), or the request was taken back
    try:
        tear_down(cluster)
    except (EngineError, OSError) as exc:
        message = failures.deletion(cluster.pk, exc)  # the engine's words: the log only
        transitions.mark_error(cluster, message_to_text(message))
        transitions.log_event(cluster, "error", message, EventLevel.ERROR)
        return
    cluster.delete()


def delete_cluster(cluster: Cluster, *, confirm_name: str) -> None:
    """Delete in the foreground (the command line, tests): stop the server, remove its files and
    its system user, and forget it. The typed name must match."""
    check_confirm_name(cluster, confirm_name)
    refuse_if_replicated(cluster)
    if cluster.is_local:
        Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.DELETING, updated_at=timezone.now())
        tear_down(cluster)
    cluster.delete()


def remove_failed(cluster: Cluster, what: str) -> None:
    """Nothing left running or on disk of a cluster that could not be made (``what``: a restore,
    a replica): its teardown, or where that fails its server killed and its files removed. The
    rows are the caller's to delete."""
    try:
        tear_down(cluster)
    except Exception:
        log.exception("removing the failed %s %s", what, cluster.pk)
        postgres.kill(cluster.pgdata)
        postgres.remove_data(cluster.data_root)


def tear_down(cluster: Cluster) -> None:
    """Stop PgBouncer and PostgreSQL, kill what still runs as the cluster's user, remove the data
    root and the user. Each step reports its progress; the rows are the caller's to delete."""
    transitions.set_progress(cluster, 5, _("Stopping what runs on the cluster"))
    hooks.before_teardown(cluster)
    transitions.set_progress(cluster, 10, _("Stopping PgBouncer"))
    hooks.pooler.stop_pgbouncer(cluster)
    transitions.set_progress(cluster, 30, _("Stopping PostgreSQL"))
    if cluster.is_ha:
        ha.kill_members(cluster)  # its data goes next: no need of a clean shutdown
        ha.forget(cluster)
    try:
        postgres.stop(
            cluster.version, cluster.pgdata, user=isolation.os_user(cluster), timeout=30, mode="immediate"
        )
    except EngineError:
        postgres.kill(cluster.pgdata)
    postgres.kill(cluster.pgdata)
    if (source := cluster.replica_of) is not None:
        # The source keeps no WAL for a replica that is gone (its walsender may take a moment).
        slot = streaming.slot_name(cluster)
        # (on the source's node: the replica may live on another one)
        if not wait_for(lambda: replica_source.slot_gone(source, slot), 10, interval=0.2):
            log.warning("deleting replica %s: its slot on the source stays", cluster.pk)
    isolation.kill_leftover_processes(cluster)
    isolation.remove_server_cgroup(cluster)
    transitions.set_progress(cluster, 60, _("Removing the data directory"))
    postgres.remove_data(cluster.data_root)
    transitions.set_progress(cluster, 90, _("Removing the system user"))
    try:
        isolation.remove_cluster_user(cluster)
    except EngineError as exc:
        # The cluster is gone; a leftover system user owns nothing and runs nothing.
        log.warning("deleting cluster %s: %s", cluster.pk, exc)
