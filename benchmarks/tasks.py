"""Celery tasks: thin wrappers carrying a row id to the service that does the work.

A run is never retried once started (``acks_late=False``, no autoretry): a lost worker is the
reaper's business. Time limits are set per message from the run's own duration when enqueued.
"""

from __future__ import annotations

import logging

from celery import shared_task

from benchmarks import services

log = logging.getLogger(__name__)


@shared_task(name="benchmarks.tasks.run_benchmark", acks_late=False, ignore_result=True)
def run_benchmark(run_id: str) -> None:
    run = services.execute_run(run_id)
    log.info("benchmark run %s: %s", run_id, run.status)


@shared_task(name="benchmarks.tasks.init_dataset", acks_late=False, ignore_result=True)
def init_dataset(dataset_id: str) -> None:
    dataset = services.execute_init(dataset_id)
    log.info("data set %s: %s", dataset_id, dataset.status)


@shared_task(name="benchmarks.tasks.reap", acks_late=False, ignore_result=True, expires=30)
def reap() -> list[str]:
    notes = services.reap()
    for note in notes:
        log.info("benchmark reaper: %s", note)
    return notes
