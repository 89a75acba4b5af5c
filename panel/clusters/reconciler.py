"""The reconciler: one pass that brings the clusters back to what their rows say (the periodic
task, a worker's start and ``manage.py cluster reconcile`` all run it)."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from panel import crypto
from panel.clusters import dbconn
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, EventLevel
from panel.clusters.services import new_password

STUCK_AFTER = dt.timedelta(minutes=10)


def reconcile() -> list[str]:
    """Bring back every online local cluster whose postmaster died; fail stuck creations; give
    clusters from before the monitor role theirs."""
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
    notes += create_missing_monitor_roles()
    from panel.pools import services as pools_services  # pools build on clusters

    notes += pools_services.reconcile_all()
    return notes


def create_missing_monitor_roles() -> list[str]:
    """Clusters provisioned before the monitor role existed are collected by the superuser no
    more: create the role on each running one (the upgrade path), once."""
    notes: list[str] = []
    for cluster in Cluster.objects.filter(
        kind=ClusterKind.LOCAL, status__in=ClusterStatus.SERVING, monitor_password_encrypted=""
    ):
        if postgres.postmaster_pid(cluster.pgdata) is None:
            continue
        password = new_password()
        encrypted = crypto.encrypt(password)
        # Claim it: two reconcilers at once must not each set a different password.
        if not Cluster.objects.filter(pk=cluster.pk, monitor_password_encrypted="").update(
            monitor_password_encrypted=encrypted
        ):
            continue
        cluster.monitor_password_encrypted = encrypted
        try:
            with dbconn.admin_connection(cluster) as conn:
                dbconn.ensure_monitor_role(conn, settings.PANEL_MONITOR_ROLE, password)
        except (dbconn.DatabaseError, ValueError) as exc:
            # Released for the next pass (the server may be restarting).
            Cluster.objects.filter(pk=cluster.pk, monitor_password_encrypted=encrypted).update(
                monitor_password_encrypted=""
            )
            notes.append(f"{cluster.name}: monitoring role not created: {exc}")
            continue
        cluster.log_event(
            "monitor-role",
            _("Created the monitoring role %(role)s: statistics are now read without superuser rights.")
            % {"role": settings.PANEL_MONITOR_ROLE},
        )
        notes.append(f"{cluster.name}: monitoring role created")
    return notes
