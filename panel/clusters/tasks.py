"""Celery tasks: thin wrappers that carry a cluster id and call the service."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from panel.clusters import reconciler, services
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError

log = logging.getLogger(__name__)


@shared_task(name="panel.clusters.tasks.provision")
def provision(cluster_id: str) -> None:
    services.provision_cluster(cluster_id)


@shared_task(name="panel.clusters.tasks.cluster_action")
def cluster_action(cluster_id: str, action: str) -> None:
    try:
        cluster = Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        return
    try:
        services.perform_action(cluster, action)
    except ServiceError as exc:
        log.warning("%s of %s failed: %s", action, cluster_id, exc.message)


@shared_task(name="panel.clusters.tasks.delete")
def delete(cluster_id: str) -> None:
    services.delete_queued(cluster_id)


@shared_task(name="panel.clusters.tasks.reconcile")
def reconcile() -> list[str]:
    notes = reconciler.reconcile()
    for note in notes:
        log.info("reconciler: %s", note)
    return notes


@worker_ready.connect
def _reconcile_at_start(**_kwargs: Any) -> None:
    reconcile.delay()
