"""The Celery tasks are thin: they call the services with the row id."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from benchmarks import services, tasks
from benchmarks.lib.pgbench_command import RunOptions
from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.services import enqueue
from panel.clusters.models import Cluster, ClusterStatus, Database, DatabaseUser


@pytest.fixture
def cluster(owner: User) -> Cluster:
    cluster = Cluster.objects.create(
        owner=owner, name="db-rows", status=ClusterStatus.ONLINE, plan_slug="db-s-1vcpu-1gb", port=1
    )
    Database.objects.create(cluster=cluster, name="defaultdb")
    user = DatabaseUser(cluster=cluster, name="doadmin")
    user.password = "pw"
    user.save()
    return cluster


def test_tasks_are_never_acked_late_and_the_reaper_runs_on_every_node() -> None:
    from panel.celery import app

    for task in (tasks.run_benchmark, tasks.init_dataset, tasks.reap):
        assert task.acks_late is False
    # Beat sends it through the fan-out, which sends one to each living node's tasks queue.
    fanned = {entry["args"][0] for entry in app.conf.beat_schedule.values() if entry.get("args")}
    assert "benchmarks.tasks.reap" in fanned


def test_a_run_that_is_not_first_in_line_stays_queued(
    cluster: Cluster, queued_tasks: Callable[[str], list[tuple[str, list]]]
) -> None:
    def sent() -> list[str]:  # run ids on the benchmarks queue of a real Redis no worker reads
        return [args[0] for task, args in queued_tasks(cluster.work_queue) if task == enqueue.RUN_TASK]

    first = services.launch_run(cluster, options=RunOptions(clients=1, threads=1, duration_s=5))
    second = services.launch_run(cluster, options=RunOptions(clients=1, threads=1, duration_s=5))
    assert sent() == [str(first.pk), str(second.pk)]
    tasks.run_benchmark(str(second.pk))
    second.refresh_from_db()
    assert second.status == RunStatus.QUEUED
    # the first in line is sent again in case its message was lost
    assert sent()[2:] == [str(first.pk)]


def test_a_run_whose_target_vanished_fails_with_the_reason(cluster: Cluster) -> None:
    run = services.launch_run(cluster, options=RunOptions(clients=1, threads=1, duration_s=5), enqueue=False)
    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.STOPPED)
    tasks.run_benchmark(str(run.pk))
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "stopped" in run.error_message


def test_the_time_limit_follows_the_run_duration(cluster: Cluster) -> None:
    run = services.launch_run(cluster, options=RunOptions(clients=1, threads=1, duration_s=60), enqueue=False)
    assert services.run_time_limit(run) == 60 + services.run_margin()
    assert isinstance(BenchmarkRun.objects.get(pk=run.pk).percentile_sampling_rate, float)
