"""Celery tasks: installing a cluster's updates, and each node's periodic round (versions
checked, updates in their window, storage autoscale), sent by beat's fan-out."""

from __future__ import annotations

import logging

from celery import shared_task

from panel.core.errors import ServiceError
from panel.managed.services import autoscale, maintenance

log = logging.getLogger(__name__)


@shared_task(name="panel.managed.tasks.install_update")
def install_update(cluster_id: str) -> None:
    try:
        maintenance.perform_update(cluster_id)
    except ServiceError as exc:
        log.warning("installing updates on %s failed: %s", cluster_id, exc.message)


@shared_task(name="panel.managed.tasks.periodic")
def periodic() -> list[str]:
    return maintenance.periodic() + autoscale.periodic()
