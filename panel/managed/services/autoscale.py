"""Storage autoscale: past ``threshold_percent`` of its plan's disk, a cluster moves to the next
plan whose disk is at least ``increment_gib`` larger (storage comes with the plan here), with an
event and an email to the owner."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from panel.clusters.face import postgres, resize, transitions
from panel.clusters.lib.plans import PLANS, Plan
from panel.clusters.models import Cluster, ClusterStatus, EventLevel
from panel.core.errors import C_, N_, Message, ServiceError
from panel.insights.face import notify_owner
from panel.managed.models import Autoscale

log = logging.getLogger(__name__)
THRESHOLD_RANGE = (1, 99)
INCREMENT_RANGE = (1, 10240)


def autoscale_of(cluster: Cluster) -> Autoscale:
    return Autoscale.objects.get_or_create(cluster=cluster)[0]


def set_autoscale(
    cluster: Cluster, *, enabled: bool, threshold_percent: int | None, increment_gib: int | None
) -> Autoscale:
    """The rule, every value checked before any is kept (absent values keep theirs)."""
    row = autoscale_of(cluster)
    threshold = row.threshold_percent if threshold_percent is None else threshold_percent
    increment = row.increment_gib if increment_gib is None else increment_gib
    if not THRESHOLD_RANGE[0] <= threshold <= THRESHOLD_RANGE[1]:
        raise ServiceError(
            N_("threshold_percent must be between %(low)d and %(high)d."),
            field="threshold_percent",
            code="autoscale.threshold_invalid",
            params={"low": THRESHOLD_RANGE[0], "high": THRESHOLD_RANGE[1]},
        )
    if not INCREMENT_RANGE[0] <= increment <= INCREMENT_RANGE[1]:
        raise ServiceError(
            N_("increment_gib must be between %(low)d and %(high)d."),
            field="increment_gib",
            code="autoscale.increment_invalid",
            params={"low": INCREMENT_RANGE[0], "high": INCREMENT_RANGE[1]},
        )
    row.enabled, row.threshold_percent, row.increment_gib = enabled, threshold, increment
    row.save(update_fields=["enabled", "threshold_percent", "increment_gib"])
    transitions.log_event(
        cluster,
        "autoscale",
        Message(
            N_("Storage autoscale %(state)s: past %(threshold)d%% of the disk, at least %(inc)d GiB more."),
            state=C_("autoscale", "on") if enabled else C_("autoscale", "off"),
            threshold=threshold,
            inc=increment,
        ),
    )
    return row


def next_plan(plan: Plan, increment_gib: int) -> Plan | None:
    """The smallest plan with at least ``increment_gib`` more disk (and no less RAM)."""
    for candidate in sorted(PLANS, key=lambda p: (p.disk_gb, p.ram_gb)):
        if candidate.disk_gb >= plan.disk_gb + increment_gib and candidate.ram_gb >= plan.ram_gb:
            return candidate
    return None


def check_cluster(cluster: Cluster, used_bytes: int | None = None) -> str | None:
    """Scale ``cluster`` up if its data passed the threshold; returns what was done. Runs on the
    cluster's node (it measures the data directory and restarts the server)."""
    row = Autoscale.objects.filter(cluster=cluster, enabled=True).first()
    plan = cluster.plan
    if row is None or plan is None or not cluster.is_local or cluster.status != ClusterStatus.ONLINE:
        return None
    used = postgres.directory_size(cluster.pgdata) if used_bytes is None else used_bytes
    percent = 100.0 * used / plan.disk_bytes
    if percent < row.threshold_percent:
        return None
    target = next_plan(plan, row.increment_gib)
    if target is None:
        message = Message(
            N_("Storage at %(percent).0f%% of %(plan)s's disk, and no larger plan to move to."),
            percent=percent,
            plan=plan.slug,
        )
        transitions.log_event(cluster, "autoscale-failed", message, EventLevel.WARNING)
        return str(message)
    try:
        resize.resize_cluster(cluster, target.slug, enqueue=False)
    except ServiceError as exc:
        message = Message(
            N_("Storage at %(percent).0f%%: moving to %(plan)s was refused: %(reason)s"),
            percent=percent,
            plan=target.slug,
            reason=exc.message,
        )
        transitions.log_event(cluster, "autoscale-failed", message, EventLevel.ERROR)
        return str(message)
    cluster.refresh_from_db()
    if cluster.plan_slug != target.slug:
        return f"{cluster.name}: resize to {target.slug} failed"
    row.last_scaled_at = timezone.now()
    row.save(update_fields=["last_scaled_at"])
    message = Message(
        N_("Storage at %(percent).0f%% of %(old)d GB: moved to %(plan)s with %(new)d GB of disk."),
        percent=percent,
        old=plan.disk_gb,
        plan=target.slug,
        new=target.disk_gb,
    )
    transitions.log_event(cluster, "autoscaled", message, EventLevel.WARNING)
    transaction.on_commit(lambda: notify_owner(cluster, C_("alert", "Storage autoscale"), message))
    return str(message)


def periodic() -> list[str]:
    notes = []
    for cluster in Cluster.objects.here().filter(status=ClusterStatus.ONLINE, autoscale__enabled=True):
        done = check_cluster(cluster)
        if done:
            notes.append(done)
    return notes
