"""Celery tasks: thin wrappers that carry a job's id and call the service."""

from __future__ import annotations

import logging

from celery import shared_task

from panel.backups.services import backups, restore, retention

log = logging.getLogger(__name__)


@shared_task(name="panel.backups.tasks.backup")
def backup(job_id: str) -> None:
    backups.perform_backup(int(job_id))


@shared_task(name="panel.backups.tasks.restore")
def restore_task(job_id: str) -> None:
    restore.perform_restore(int(job_id))


@shared_task(name="panel.backups.tasks.periodic")
def periodic() -> list[str]:
    """This node's round (beat's fan-out): scheduled backups, archiving checks, kept repositories."""
    notes = backups.scheduled_round() + retention.expire_kept()
    for note in notes:
        log.info("backups: %s", note)
    return notes
