"""Celery tasks: the collector beat and the rollup/retention beat, thin over the services."""

from __future__ import annotations

import logging

from celery import shared_task

from panel.insights import services

log = logging.getLogger(__name__)


@shared_task(name="panel.insights.tasks.collect")
def collect() -> int:
    snapshots = services.collect_all()
    for cluster_id, snap in snapshots.items():
        for source, reason in snap.errors.items():
            log.info("insights: %s %s not collected: %s", cluster_id, source, reason)
    return len(snapshots)


@shared_task(name="panel.insights.tasks.rollup")
def rollup() -> dict[str, int]:
    return services.prune_and_rollup()
