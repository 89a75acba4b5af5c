"""The reaper: fail work whose worker is gone, stop its pgbench, restart stalled queues."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks.engine import runner
from benchmarks.models import BenchmarkRun, DataSet, JobStatus, RunStatus
from benchmarks.services.config import HOSTNAME, requeue_after, worker_lost_after
from benchmarks.services.enqueue import kick_next, next_in_line
from benchmarks.services.execute import workdir_prefix
from benchmarks.services.sweep_pool import restore_finished_sweeps
from panel.clusters.models import Cluster


def reap() -> list[str]:
    """Fail runs and data sets whose worker is gone, stop their pgbench, restart stalled queues,
    give back the pools of pool-size sweeps that ended that way."""
    notes: list[str] = []
    now = timezone.now()
    stale = now - dt.timedelta(seconds=worker_lost_after())
    here = Cluster.objects.here().values("pk")
    for run in BenchmarkRun.objects.filter(status=RunStatus.RUNNING, cluster__in=here):
        local = run.worker_hostname == HOSTNAME
        dead = local and run.worker_pid is not None and not runner.process_alive(run.worker_pid)
        if not dead and (run.heartbeat_at is None or run.heartbeat_at >= stale):
            continue
        reason = _("worker lost: the process running it stopped sending heartbeats")
        if not BenchmarkRun.objects.filter(
            pk=run.pk, status=RunStatus.RUNNING, heartbeat_at=run.heartbeat_at
        ).update(status=RunStatus.FAILED, error_message=reason, finished_at=timezone.now()):
            continue  # it moved on meanwhile
        if local:
            runner.kill_group(run.pgbench_pid)
            runner.remove_workdirs(workdir_prefix(run))
        notes.append(f"run {run.pk}: worker lost")
        kick_next(run.cluster_id)
    for dataset in DataSet.objects.filter(status=JobStatus.RUNNING, cluster__in=here):
        if dataset.heartbeat_at is not None and dataset.heartbeat_at >= stale:
            continue
        if DataSet.objects.filter(
            pk=dataset.pk, status=JobStatus.RUNNING, heartbeat_at=dataset.heartbeat_at
        ).update(status=JobStatus.FAILED, error_message=_("worker lost"), finished_at=timezone.now()):
            runner.kill_group(dataset.pgbench_pid)
            notes.append(f"data set {dataset.pk}: worker lost")
    # Queues that stalled: nothing running, the first in line not (re)sent for a while.
    resend_before = now - dt.timedelta(seconds=requeue_after())
    busy = BenchmarkRun.objects.filter(status=RunStatus.RUNNING).values_list("cluster_id", flat=True)
    waiting = (
        BenchmarkRun.objects.filter(status=RunStatus.QUEUED, cluster__in=here)
        .exclude(cluster_id__in=busy)
        .values_list("cluster_id", flat=True)
    )
    for cluster_id in set(waiting):
        first = next_in_line(cluster_id)
        stalled = first is not None and (first.enqueued_at is None or first.enqueued_at < resend_before)
        if stalled and kick_next(cluster_id) is not None:
            assert first is not None  # stalled
            notes.append(f"run {first.pk}: enqueued again")
    notes.extend(restore_finished_sweeps())
    return notes
