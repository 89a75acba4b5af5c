"""The maintenance window and updates: what a cluster runs against what its node has installed
(a newer PostgreSQL minor after ``apt upgrade``), and installing it: a restart onto the new
binaries, now (``install_update``) or in the cluster's weekly window (``periodic``)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.db import transaction
from django.utils import timezone

from panel.clusters import hooks
from panel.clusters.face import dbconn, perform_action, postgres, require_local, transitions
from panel.clusters.models import Cluster, ClusterStatus, status_word
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError
from panel.core.taskqueue import enqueue_task
from panel.managed.lib.updates import DAYS, day_name, in_window, newer, parse_hour, parse_version
from panel.managed.models import Maintenance
from panel.pools.face import console, pooler_running, supervisor

log = logging.getLogger(__name__)
# A cluster updated in its window is not restarted again in the same window.
ONCE_PER_WINDOW = dt.timedelta(hours=2)


def window_of(cluster: Cluster) -> Maintenance:
    """The cluster's window row, made with the defaults the first time: asked each time, unless a
    list fetched it with its clusters (``select_related("maintenance")``)."""
    descriptor = Cluster.maintenance
    if descriptor.is_cached(cluster):
        row = descriptor.related.get_cached_value(cluster)
        if isinstance(row, Maintenance):
            return row
    return Maintenance.objects.get_or_create(cluster=cluster)[0]


def set_window(cluster: Cluster, day: str, hour: str) -> Maintenance:
    """The weekly window: ``day`` a weekday's English name, ``hour`` ``HH:00`` (UTC)."""
    wanted_day = day.strip().lower()
    if wanted_day not in DAYS:
        raise ServiceError(
            N_("Not a day of the week: %(day)s (monday … sunday)."),
            field="day",
            code="maintenance.day_invalid",
            params={"day": repr(day)},
        )
    wanted_hour = parse_hour(hour)
    if wanted_hour is None:
        raise ServiceError(
            N_("Not an hour of the day: %(hour)s (00:00 … 23:00, UTC)."),
            field="hour",
            code="maintenance.hour_invalid",
            params={"hour": repr(hour)},
        )
    row = window_of(cluster)
    if (row.day, row.hour) != (wanted_day, wanted_hour):
        row.day, row.hour = wanted_day, wanted_hour
        row.save(update_fields=["day", "hour"])
        transitions.log_event(
            cluster,
            "maintenance-window",
            Message(
                N_("Maintenance window set to %(day)s %(hour)02d:00 UTC."),
                day=day_name(wanted_day),
                hour=wanted_hour,
            ),
        )
    return row


def pending(row: Maintenance) -> list[Message]:
    """What the next window would install, one sentence per program."""
    found = []
    if newer(row.postgres_installed, row.postgres_running):
        found.append(
            Message(
                N_("PostgreSQL %(old)s → %(new)s (a restart)"),
                old=row.postgres_running,
                new=row.postgres_installed,
            )
        )
    if newer(row.pgbouncer_installed, row.pgbouncer_running):
        found.append(
            Message(
                N_("PgBouncer %(old)s → %(new)s (a restart)"),
                old=row.pgbouncer_running,
                new=row.pgbouncer_installed,
            )
        )
    return found


@on_node(timeout=30)
def check_updates(cluster: Cluster) -> list[str]:
    """Ask the running server its version and the installed binaries theirs; the row records
    both (the Settings tab and the API read it). Returns what is pending, in words."""
    require_local(cluster)
    row = window_of(cluster)
    try:
        row.postgres_installed = parse_version(postgres.release(cluster.version))
    except EngineError as exc:
        raise _check_failed(cluster, exc) from None
    if cluster.is_serving:
        try:
            with dbconn.admin_connection(cluster) as conn:
                found = conn.execute("SHOW server_version").fetchone()
        except dbconn.DatabaseError as exc:
            raise _check_failed(cluster, exc) from None
        row.postgres_running = parse_version(str(found[0])) if found else ""
    _check_pgbouncer(cluster, row)
    row.checked_at = timezone.now()
    row.save(
        update_fields=[
            "postgres_installed",
            "postgres_running",
            "pgbouncer_installed",
            "pgbouncer_running",
            "checked_at",
        ]
    )
    return [str(message) for message in pending(row)]


def _check_failed(cluster: Cluster, exc: Exception) -> ServiceError:
    """The program's or server's words (paths, English) go to the log; the user reads what failed."""
    log.warning("maintenance: checking the versions of %s failed: %s", cluster.pk, exc)
    return ServiceError(
        N_(
            "Could not read the installed and running versions. Try again later; the panel's log "
            "holds the details for an administrator."
        ),
        code="maintenance.check_failed",
        params={},
    )


def _check_pgbouncer(cluster: Cluster, row: Maintenance) -> None:
    """PgBouncer's two versions; the running one only while it runs (a cluster without pools
    runs none: nothing of it to update)."""
    try:
        row.pgbouncer_installed = parse_version(supervisor.installed_release())
    except supervisor.SupervisorError as exc:
        log.warning("maintenance: %s", exc)
        row.pgbouncer_installed = ""
    row.pgbouncer_running = ""
    if pooler_running(cluster):
        try:
            with console.admin_console(cluster) as conn:
                found = conn.execute("SHOW VERSION").fetchone()
        except (console.ConsoleError, ValueError) as exc:
            log.info("maintenance: SHOW VERSION on %s failed: %s", cluster.pk, exc)
        else:
            row.pgbouncer_running = parse_version(str(found[0])) if found else ""


def install_update(cluster: Cluster) -> None:
    """Start the maintenance now: the cluster is marked restarting and its node restarts it onto
    the installed binaries (nothing pending: nothing is done)."""
    require_local(cluster)
    if not pending(window_of(cluster)):
        return
    if not Cluster.objects.filter(
        pk=cluster.pk, status__in=[ClusterStatus.ONLINE, ClusterStatus.DEGRADED]
    ).update(status=ClusterStatus.STARTING, updated_at=timezone.now()):
        raise ServiceError(
            N_("The cluster is %(status)s; updates are installed only while it is online."),
            code="maintenance.not_online",
            params={"status": status_word(cluster.status)},
        )
    previous = cluster.status
    try:
        enqueue_task("panel.managed.tasks.install_update", str(cluster.pk), queue=cluster.tasks_queue)
    except ServiceError:
        Cluster.objects.filter(pk=cluster.pk).update(status=previous, updated_at=timezone.now())
        raise
    transitions.log_event(
        cluster, "update-requested", Message(N_("Installing the pending updates: the cluster restarts."))
    )


def perform_update(cluster_id: uuid.UUID | str) -> Cluster | None:
    """The node's half: restart onto the installed binaries, then record what now runs."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    row = window_of(cluster)
    before = row.postgres_running
    bouncer = newer(row.pgbouncer_installed, row.pgbouncer_running)
    perform_action(cluster, "restart")  # a ServiceError (it did not come back) is on the cluster's events
    if bouncer:
        # A restart of PostgreSQL leaves PgBouncer up; its new release needs its own restart
        # (its clients reconnect).
        hooks.pooler.stop_pgbouncer(cluster)
        hooks.pooler.reapply_config(cluster)
    check_updates(cluster)
    row.refresh_from_db()
    row.last_installed_at = timezone.now()
    row.save(update_fields=["last_installed_at"])
    transitions.log_event(
        cluster,
        "update-installed",
        Message(
            N_("Updates installed: PostgreSQL %(old)s → %(new)s."),
            old=before or "?",
            new=row.postgres_running,
        ),
    )
    return cluster


def periodic(now: dt.datetime | None = None) -> list[str]:
    """This node's round: every serving cluster's versions checked; a cluster in its window with
    an update pending restarted onto it."""
    now = now or timezone.now()
    notes = []
    for cluster in Cluster.objects.here().filter(status=ClusterStatus.ONLINE).select_related("node"):
        if not cluster.is_local:
            continue
        try:
            waiting = check_updates(cluster)
        except ServiceError as exc:
            log.warning("maintenance: checking %s failed: %s", cluster.pk, exc.message)
            continue
        row = window_of(cluster)
        recent = row.last_installed_at is not None and now - row.last_installed_at < ONCE_PER_WINDOW
        if waiting and in_window(now, row.day, row.hour) and not recent:
            with transaction.atomic():
                claimed = Cluster.objects.filter(pk=cluster.pk, status=ClusterStatus.ONLINE).update(
                    status=ClusterStatus.STARTING, updated_at=now
                )
            if claimed:
                try:
                    perform_update(cluster.pk)
                    notes.append(f"{cluster.name}: updated")
                except ServiceError as exc:
                    notes.append(f"{cluster.name}: update failed: {exc.message}")
    return notes
