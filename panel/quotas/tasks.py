"""Celery task: the quota cycle of this node's clusters, sent by beat's fan-out."""

from __future__ import annotations

from celery import shared_task

from panel.quotas import services


@shared_task(name="panel.quotas.tasks.measure")
def measure() -> dict[str, list[str]]:
    return services.run_all()
