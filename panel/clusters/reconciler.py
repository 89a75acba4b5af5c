"""The reconciler: one pass that brings the clusters back to what their rows say (the periodic
task, a worker's start and ``manage.py cluster reconcile`` all run it), and up to what the panel
creates today (the privilege guard in clusters created before it)."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters import dbconn, services
from panel.clusters.engine import guard, postgres
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, EventLevel

log = logging.getLogger(__name__)

STUCK_AFTER = dt.timedelta(minutes=10)


def reconcile() -> list[str]:
    """Bring back every online local cluster whose postmaster died; fail stuck creations."""
    notes: list[str] = []
    for cluster in Cluster.objects.filter(kind=ClusterKind.LOCAL, status__in=ClusterStatus.SERVING):
        if postgres.postmaster_pid(cluster.pgdata) is not None:
            continue
        # Re-read: a user may have stopped or deleted it since the query ran.
        if not Cluster.objects.filter(pk=cluster.pk, status__in=ClusterStatus.SERVING).update(
            status=ClusterStatus.DEGRADED, updated_at=timezone.now()
        ):
            continue
        cluster.refresh_from_db()
        cluster.log_event("degraded", _("PostgreSQL was not running; starting it again."), EventLevel.WARNING)
        try:
            postgres.start(
                cluster.version, cluster.pgdata, cluster.log_file, timeout=settings.PANEL_COMMAND_TIMEOUT
            )
        except postgres.EngineError as exc:
            cluster.log_event("error", _("Restart failed: %(reason)s") % {"reason": exc}, EventLevel.ERROR)
            notes.append(f"{cluster.name}: restart failed: {exc}")
            continue
        cluster.mark_online()
        cluster.log_event("recovered", _("PostgreSQL restarted by the reconciler."))
        notes.append(f"{cluster.name}: restarted")
    for cluster in Cluster.objects.filter(kind=ClusterKind.LOCAL, status__in=ClusterStatus.SERVING):
        pid = postgres.postmaster_pid(cluster.pgdata)
        if pid is None:
            continue
        configured = services.guard_configured(cluster)
        if configured and guard.is_loaded(pid) is not False:
            continue
        notes += _install_guard(cluster, configured=configured)
    stuck_before = timezone.now() - STUCK_AFTER
    for cluster in Cluster.objects.filter(
        kind=ClusterKind.LOCAL, status__in=ClusterStatus.BUSY, updated_at__lt=stuck_before
    ):
        reason = _("The job working on this cluster was interrupted.")
        # Only if the job has not moved on since the query ran.
        if not Cluster.objects.filter(
            pk=cluster.pk, status=cluster.status, updated_at__lt=stuck_before
        ).update(
            status=ClusterStatus.ERROR, error_message=reason, progress_message="", updated_at=timezone.now()
        ):
            continue
        cluster.log_event("error", reason, EventLevel.ERROR)
        notes.append(f"{cluster.name}: marked error (stuck)")
    from panel.pools import services as pools_services  # pools build on clusters

    notes += pools_services.reconcile_all()
    return notes


def _install_guard(cluster: Cluster, *, configured: bool) -> list[str]:
    """Restart a cluster created before the privilege guard with it loaded, and take away what
    its roles were granted that the guard now refuses."""
    try:
        guard.ensure_built(cluster.version)
    except guard.GuardBuildError as exc:
        # Retried every pass; an event each time would bury the cluster's history.
        log.warning("privilege guard for %s not built: %s", cluster.name, exc)
        return [f"{cluster.name}: privilege guard not built: {exc}"]
    if not Cluster.objects.filter(pk=cluster.pk, status__in=ClusterStatus.SERVING).update(
        status=ClusterStatus.STARTING, updated_at=timezone.now()
    ):
        return []
    cluster.refresh_from_db()
    cluster.log_event(
        "guard-upgrade",
        _("This cluster predates the privilege guard: restarting it with the guard loaded."),
        EventLevel.WARNING,
    )
    try:
        # With panel.conf lacking the guard, the restart writes it and clears the roles itself.
        services.perform_action(cluster, "restart")
        if configured:
            services.clear_reserved(cluster)
            cluster.log_event("guard-installed", _("The privilege guard is now loaded."))
    except (services.ServiceError, dbconn.DatabaseError) as exc:
        message = exc.message if isinstance(exc, services.ServiceError) else str(exc)
        return [f"{cluster.name}: loading the privilege guard failed: {message}"]
    return [f"{cluster.name}: privilege guard loaded"]
