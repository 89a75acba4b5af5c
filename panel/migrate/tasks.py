"""Celery task: a migration's set-up, carrying its id (the service does the work)."""

from __future__ import annotations

from celery import shared_task

from panel.migrate.services import actions


@shared_task(name="panel.migrate.tasks.run_migration")
def run_migration(migration_id: str) -> None:
    actions.run_migration(migration_id)
