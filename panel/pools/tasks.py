"""Celery tasks: thin wrappers that carry a cluster id and call the pool services."""

from __future__ import annotations

import logging

from celery import shared_task

from panel.clusters.models import Cluster
from panel.clusters.services import ServiceError
from panel.pools import apply, services

log = logging.getLogger(__name__)


@shared_task(name="panel.pools.tasks.apply_config")
def apply_config(cluster_id: str) -> None:
    """Re-apply a cluster's PgBouncer configuration (e.g. after a role changed)."""
    try:
        cluster = Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        return
    try:
        apply.apply_config(cluster)
    except ServiceError as exc:
        log.warning("applying the pools of %s failed: %s", cluster_id, exc.message)


@shared_task(name="panel.pools.tasks.reconcile")
def reconcile() -> list[str]:
    """One pass of PgBouncer supervision over every cluster (the cluster reconciler also calls it)."""
    notes = services.reconcile_all()
    for note in notes:
        log.info("pool reconciler: %s", note)
    return notes
