"""Runs executed by real Celery workers: the queue, one run at a time per cluster, a lost worker."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from benchmarks import services
from benchmarks.engine import runner
from benchmarks.lib.pgbench_command import RunOptions
from benchmarks.models import BenchmarkRun, JobStatus, RunStatus
from panel.clusters.models import Cluster
from panel.pools import services as pool_services
from tests.fixtures.processes import start_celery_worker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOOMED_QUEUE = "benchmarks-doomed"


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    cluster = shared_local_cluster
    dataset = services.execute_init(services.init_dataset(cluster, "defaultdb", 1, enqueue=False).pk)
    assert dataset.status == JobStatus.SUCCEEDED, dataset.error_message
    yield cluster
    pool_services.stop_pgbouncer(cluster)  # the module's next test starts from no pool


def terminal(run: BenchmarkRun) -> Callable[[], bool]:
    def check() -> bool:
        run.refresh_from_db()
        return run.is_terminal

    return check


def test_runs_on_the_queue_are_executed_by_the_worker_one_at_a_time(
    cluster: Cluster, celery_worker: None, wait_until: Callable[..., object]
) -> None:
    first = services.launch_run(cluster, options=RunOptions(clients=2, threads=1, duration_s=3))
    second = services.launch_run(cluster, options=RunOptions(clients=2, threads=1, duration_s=3))
    assert second.queue_position == 1
    wait_until(terminal(first), timeout=40, message="first run finished")
    wait_until(terminal(second), timeout=40, message="second run finished")
    for run in (first, second):
        assert run.status == RunStatus.SUCCEEDED, (run.error_message, run.first_error)
        assert run.samples.count() >= 2 and run.summary and run.summary["transactions_processed"] > 0
        assert run.worker_pid and run.worker_pid != os.getpid()
    # Never two at once on one cluster: the second started after the first ended.
    assert first.finished_at is not None and second.started_at is not None
    assert second.started_at >= first.finished_at


@pytest.fixture
def doomed_worker(redis_server: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A worker of our own, on its own queue, for this test to kill (the session worker lives on)."""
    proc = start_celery_worker(redis_server, DOOMED_QUEUE, tmp_path / "doomed-worker.log", concurrency=1)
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_a_killed_worker_is_detected_its_pgbench_stopped_and_the_next_run_proceeds(
    cluster: Cluster,
    celery_worker: None,
    doomed_worker: subprocess.Popen[bytes],
    wait_until: Callable[..., object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    living = Cluster.work_queue
    monkeypatch.setattr(Cluster, "work_queue", DOOMED_QUEUE)  # read by enqueue.send_job
    lost = services.launch_run(cluster, options=RunOptions(clients=2, threads=1, duration_s=60))
    wait_until(lambda: lost.samples.count() >= 2, timeout=30, message="the doomed run is running")
    nxt = services.launch_run(cluster, options=RunOptions(clients=2, threads=1, duration_s=3))
    monkeypatch.setattr(Cluster, "work_queue", living)  # the next run goes to the living worker
    lost.refresh_from_db()
    pgbench_pid = lost.pgbench_pid
    assert lost.status == RunStatus.RUNNING and runner.is_pgbench(pgbench_pid)

    os.killpg(doomed_worker.pid, signal.SIGKILL)
    killed_at = time.monotonic()

    def reaped() -> bool:
        services.reap()
        lost.refresh_from_db()
        return lost.status != RunStatus.RUNNING

    wait_until(reaped, timeout=60, message="the reaper noticed the lost worker")
    assert time.monotonic() - killed_at < 60
    assert lost.status == RunStatus.FAILED and "worker lost" in lost.error_message
    assert not runner.is_pgbench(pgbench_pid)
    # Nothing left running (a zombie waits for whoever adopted it to reap it: not running).
    left = [p for p in psutil.process_iter(["pid", "status"]) if p.info["pid"] == pgbench_pid]
    assert all(p.info["status"] == psutil.STATUS_ZOMBIE for p in left)
    assert lost.samples.count() >= 2  # what it measured is kept
    assert not list(Path(tempfile.gettempdir()).glob(services.workdir_prefix(lost) + "*"))

    wait_until(terminal(nxt), timeout=40, message="the next run on the cluster ran")
    assert nxt.status == RunStatus.SUCCEEDED, (nxt.error_message, nxt.first_error)


def test_the_reaper_fails_a_run_whose_heartbeat_stopped(cluster: Cluster, settings: object) -> None:
    """The heartbeat path, for workers on another machine (no pid to look at)."""
    run = services.launch_run(cluster, options=RunOptions(clients=1, threads=1, duration_s=3), enqueue=False)
    assert services.claim_run(run.pk) is not None
    BenchmarkRun.objects.filter(pk=run.pk).update(worker_hostname="elsewhere", worker_pid=1)
    settings.BENCHMARK_WORKER_LOST_SECONDS = 1  # type: ignore[attr-defined]
    assert services.reap() == []  # fresh heartbeat
    time.sleep(1.2)
    assert services.reap() == [f"run {run.pk}: worker lost"]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "worker lost" in run.error_message


def test_a_worker_resizes_the_pool_of_a_pool_size_sweep_before_each_step_and_gives_it_back(
    cluster: Cluster, celery_worker: None, wait_until: Callable[..., object]
) -> None:
    """The resize is part of the step the node's worker executes, not of the request that planned it."""
    from panel.pools import services as pool_services

    pool = pool_services.create_pool(cluster, "sized", "defaultdb", None, "transaction", 10)
    sweep = services.launch_sweep(
        cluster, clients_list=[2], pool_sizes=[3, 6], pool=pool, repeats=1,
        base_options=RunOptions(clients=1, threads=1, duration_s=2, builtin="select-only"),
    )  # fmt: skip
    assert pool_services.pool_stats(cluster) is not None

    def restored() -> bool:
        sweep.refresh_from_db()
        return sweep.restored_at is not None

    wait_until(restored, timeout=60, message="the sweep ran and gave its pool back")
    runs = list(sweep.runs.order_by("sweep_index"))
    assert [(r.status, r.pool_size_applied) for r in runs] == [("succeeded", 3), ("succeeded", 6)], [
        r.error_message for r in runs
    ]
    assert all(r.worker_pid and r.worker_pid != os.getpid() for r in runs)
    assert not sweep.restore_error
    pool.refresh_from_db()
    assert pool.size == 10
    # Through the pools app's own change, once per size and once back, each applied by a RELOAD.
    events = cluster.events.filter(kind="pool-updated").order_by("created_at", "id")
    assert [m.rsplit("size ", 1)[1] for m in events.values_list("message", flat=True)] == [
        "3).",
        "6).",
        "10).",
    ]
