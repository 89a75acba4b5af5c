"""Handing runs and data sets to the workers: the broker, and which queued run goes next."""

from __future__ import annotations

import logging
import uuid

from django.utils import timezone

from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.services.config import run_margin
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)

RUN_TASK = "benchmarks.tasks.run_benchmark"
INIT_TASK = "benchmarks.tasks.init_dataset"


def send_job(task_name: str, object_id: str, cluster: Cluster, *, time_limit: float | None = None) -> None:
    """Send a task to the cluster's node now (its queue of tenants' work, where pgbench runs
    beside the server, apart from the node's control work); an unreachable broker is a
    ServiceError at once."""
    enqueue_task(task_name, object_id, queue=cluster.work_queue, time_limit=time_limit)


def run_time_limit(run: BenchmarkRun) -> float:
    """The task's soft time limit: the run's own duration plus a margin (-t runs: the maximum)."""
    duration = run.duration_s if run.duration_s is not None else cmd.MAX_DURATION_S
    return duration + run_margin()


def enqueue_run(run: BenchmarkRun) -> None:
    send_job(RUN_TASK, str(run.pk), run.cluster, time_limit=run_time_limit(run))
    BenchmarkRun.objects.filter(pk=run.pk).update(enqueued_at=timezone.now())


def next_in_line(cluster_id: uuid.UUID | str) -> BenchmarkRun | None:
    """The queued run a worker should execute next on this cluster (foreground runs are not
    in the workers' queue: their own process runs them)."""
    return (
        BenchmarkRun.objects.filter(cluster_id=cluster_id, status=RunStatus.QUEUED, foreground=False)
        .order_by("created_at", "sweep_index")
        .first()
    )


def kick_next(cluster_id: uuid.UUID | str) -> BenchmarkRun | None:
    """Enqueue the next queued run of a cluster if none is running; a broker error is only logged
    (the reaper tries again)."""
    if BenchmarkRun.objects.filter(cluster_id=cluster_id, status=RunStatus.RUNNING).exists():
        return None
    run = next_in_line(cluster_id)
    if run is None:
        return None
    try:
        enqueue_run(run)
    except ServiceError as exc:
        log.warning("could not enqueue the next run %s: %s", run.pk, exc.message)
        return None
    return run
