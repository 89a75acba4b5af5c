"""launch_run and friends without a running server: validation, refusals, no orphan rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User

from benchmarks import services
from benchmarks.lib.pgbench_command import RunOptions
from benchmarks.models import BenchmarkRun, DataSet, InvalidTransition, JobStatus, RunSample, RunStatus, Sweep
from benchmarks.services import enqueue
from panel.clusters.models import Cluster, ClusterStatus, Database, DatabaseUser
from panel.core.errors import ServiceError
from panel.pools.engine.rendering import MAX_CLIENT_CONN
from panel.pools.models import ConnectionPool

OPTIONS = RunOptions(clients=4, threads=2, duration_s=3)
SYSBENCH = RunOptions(clients=2, threads=2, duration_s=3, builtin="oltp_read_only", engine="sysbench")


@pytest.fixture
def cluster(owner: User) -> Cluster:
    """An online cluster as the database records it (nothing listens: launching never connects)."""
    cluster = Cluster.objects.create(
        owner=owner,
        name="db-rows",
        status=ClusterStatus.ONLINE,
        plan_slug="db-s-1vcpu-1gb",
        port=1,
        pooler_port=2,
    )
    Database.objects.create(cluster=cluster, name="defaultdb", is_protected=True)
    admin = DatabaseUser(cluster=cluster, name="doadmin", is_protected=True)
    admin.password = "secret-password"
    admin.save()
    return cluster


def test_it_refuses_when_redis_is_unreachable_and_leaves_no_row(cluster: Cluster, redis_down: str) -> None:
    with pytest.raises(ServiceError, match="not reachable"):
        services.launch_run(cluster, options=OPTIONS)
    assert not BenchmarkRun.objects.exists()
    with pytest.raises(ServiceError, match="not reachable"):
        services.launch_sweep(cluster, clients_list=[1, 2], pools=[None], repeats=1, base_options=OPTIONS)
    assert not BenchmarkRun.objects.exists() and not Sweep.objects.exists()


def test_it_refuses_a_custom_script_pgbench_rejects_with_pgbench_message(cluster: Cluster) -> None:
    with pytest.raises(ServiceError) as caught:
        services.launch_run(cluster, options=OPTIONS, custom_script="\\set aid random(1, \nSELECT 1;\n")
    assert caught.value.field == "custom_script"
    assert caught.value.message.startswith("script.sql:1: syntax error"), caught.value.message
    assert not BenchmarkRun.objects.exists()


def test_it_refuses_a_deleted_pool_a_stopped_cluster_and_bad_numbers(cluster: Cluster) -> None:
    pool = ConnectionPool.objects.create(cluster=cluster, name="gone", database="defaultdb", size=5)
    ConnectionPool.objects.filter(pk=pool.pk).delete()
    with pytest.raises(ServiceError, match="no longer exists") as caught:
        services.launch_run(cluster, pool=pool, options=OPTIONS)
    assert caught.value.field == "pool"

    with pytest.raises(ServiceError) as caught:
        services.launch_run(cluster, options=RunOptions(clients=2, threads=4, duration_s=3))
    assert caught.value.field == "threads"
    with pytest.raises(ServiceError) as caught:
        services.launch_run(cluster, database="nope", options=OPTIONS)
    assert caught.value.field == "database"

    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.STOPPED)
    with pytest.raises(ServiceError, match="stopped; start it first"):
        services.launch_run(cluster, options=OPTIONS)
    assert not BenchmarkRun.objects.exists()


def test_it_warns_before_launch_without_blocking(cluster: Cluster) -> None:
    warnings = services.preview_warnings(cluster, options=RunOptions(clients=30, threads=2, duration_s=3))
    assert any("will not start" in warning for warning in warnings)
    assert services.preview_warnings(cluster, options=OPTIONS) == []


def test_a_pool_target_allows_as_many_clients_as_pgbouncer_accepts(cluster: Cluster) -> None:
    pool = ConnectionPool.objects.create(cluster=cluster, name="tx-pool", database="defaultdb", size=5)
    target = services.resolve_target(cluster, pool=pool, database=None, user=None)
    assert target.max_connections == MAX_CLIENT_CONN
    options = RunOptions(clients=1200, threads=2, duration_s=3)
    warnings = services.preview_warnings(cluster, pool=pool, options=options)
    assert not any("client connections" in warning for warning in warnings), warnings
    over = RunOptions(clients=MAX_CLIENT_CONN + 1, threads=1, duration_s=3)
    warnings = services.preview_warnings(cluster, pool=pool, options=over)
    assert any(f"at most {MAX_CLIENT_CONN} client connections" in warning for warning in warnings), warnings


@pytest.fixture
def sent(queued_tasks: Callable[[str], list[tuple[str, list]]]) -> Callable[[], list[str]]:
    """The runs handed to the benchmarks queue of a real Redis that no worker reads, in order."""

    def run_ids() -> list[str]:
        return [
            args[0]
            for task, args in queued_tasks(f"node.{django_settings.PANEL_NODE_NAME}.work")
            if task == enqueue.RUN_TASK
        ]

    return run_ids


def test_a_run_records_a_redacted_reproducible_command_and_its_queue_position(
    cluster: Cluster, sent: Callable[[], list[str]]
) -> None:
    first = services.launch_run(cluster, options=OPTIONS)
    second = services.launch_run(cluster, options=OPTIONS)
    assert first.command_display.startswith("PGPASSWORD=******** PGSSLMODE=require ")
    assert "secret-password" not in first.command_display
    assert "-h 127.0.0.1 -p 1 -U doadmin -c 4 -j 2 -T 3 -P 1" in first.command_display
    assert (first.queue_position, second.queue_position) == (0, 1)
    with pytest.raises(InvalidTransition):
        first.succeed(summary=None, exit_code=0)  # not running
    services.cancel_run(first)
    assert second.queue_position == 0
    with pytest.raises(ServiceError, match="only a queued or running run"):
        services.cancel_run(first)


def test_claims_run_one_at_a_time_per_cluster_in_order(
    cluster: Cluster, sent: Callable[[], list[str]]
) -> None:
    first = services.launch_run(cluster, options=OPTIONS)
    second = services.launch_run(cluster, options=OPTIONS)
    foreground = services.launch_run(cluster, options=OPTIONS, enqueue=False)
    assert sent() == [str(first.pk), str(second.pk)] and foreground.foreground
    assert services.claim_run(second.pk) is None  # not first in line
    assert services.claim_run(first.pk) is not None
    assert services.claim_run(second.pk, in_order=False) is None  # the cluster is busy
    first.refresh_from_db()
    first.succeed(summary={"tps": 10.0}, exit_code=0)
    assert services.claim_run(second.pk) is not None
    assert services.claim_run(second.pk) is None  # already running
    second.refresh_from_db()
    second.fail("test")
    # A foreground run is not in the workers' queue: it takes the cluster when free.
    assert services.next_in_line(cluster.pk) is None
    assert services.claim_run(foreground.pk, in_order=False) is not None


def test_export_compare_and_sweep_plan(cluster: Cluster) -> None:
    runs = [services.launch_run(cluster, options=OPTIONS, enqueue=False) for _ in range(2)]
    for run, tps in zip(runs, (100.0, 200.0), strict=True):
        for seq in (1, 2):
            RunSample.objects.create(
                run=run, seq=seq, elapsed_s=seq, tps=tps, latency_avg_ms=1.5, latency_stddev_ms=0.1,
                failed=0, received_at=run.created_at, p50_ms=1.0, p95_ms=2.0, p99_ms=3.0, percentile_count=9,
            )  # fmt: skip
    csv_text = services.export_run(runs[0], "csv")
    assert csv_text.splitlines()[0].startswith("seq,elapsed_s,tps,latency_avg_ms")
    assert len(csv_text.splitlines()) == 3
    record = json.loads(services.export_run(runs[0], "json"))
    assert record["status"] == RunStatus.QUEUED and len(record["samples"]) == 2
    with pytest.raises(ServiceError):
        services.export_run(runs[0], "xml")

    compared = services.compare_runs(runs)
    assert compared["x"] == [1, 2]
    assert compared["series"]["tps"] == {str(runs[0].pk): [100.0, 100.0], str(runs[1].pk): [200.0, 200.0]}
    with pytest.raises(ServiceError):
        services.compare_runs(runs[:1])

    pool = ConnectionPool.objects.create(cluster=cluster, name="test-pool", database="defaultdb", size=20)
    sweep = services.launch_sweep(
        cluster, clients_list=[1, 4], pools=[None, pool], repeats=2, base_options=OPTIONS, enqueue=False
    )
    planned = [(run.clients, run.target_display) for run in sweep.runs.order_by("sweep_index")]
    assert (
        planned
        == [(1, "direct")] * 2
        + [(1, "pool test-pool")] * 2
        + [(4, "direct")] * 2
        + [(4, "pool test-pool")] * 2
    )
    assert all(run.threads <= run.clients for run in sweep.runs.all())
    results = services.sweep_results(sweep)
    assert [point["clients"] for point in results["direct"]] == [1, 4]


def test_a_sysbench_run_needs_a_sysbench_data_set_not_pgbench_s(cluster: Cluster) -> None:
    options = SYSBENCH
    DataSet.objects.create(cluster=cluster, database="defaultdb", scale=10, status=JobStatus.SUCCEEDED)
    with pytest.raises(ServiceError) as caught:
        services.launch_run(cluster, options=options, enqueue=False)
    assert caught.value.field == "database" and "No sysbench data set" in caught.value.message
    assert not BenchmarkRun.objects.exists()

    DataSet.objects.create(
        cluster=cluster,
        database="defaultdb",
        engine="sysbench",
        tables=3,
        table_size=1000,
        status=JobStatus.SUCCEEDED,
    )
    run = services.launch_run(cluster, options=options, enqueue=False)
    # The tables and rows of the data set; the pgbench data set's scale plays no part.
    assert (run.engine, run.options["tables"], run.options["table_size"]) == ("sysbench", 3, 1000)
    assert run.percentile_sampling_rate is None and run.query_mode == "auto"
    assert run.command_display.startswith("PGPASSWORD=******** PGSSLMODE=require")
    assert "sysbench oltp_read_only" in run.command_display and "--tables=3" in run.command_display
    pool = ConnectionPool.objects.create(
        cluster=cluster, name="tx", database="defaultdb", size=5, mode="transaction"
    )
    pooled = services.launch_run(cluster, pool=pool, options=options, enqueue=False)
    assert pooled.query_mode == "disable" and "--db-ps-mode=disable" in pooled.command_display


def test_a_sysbench_run_refuses_pgbench_only_options_and_custom_scripts(cluster: Cluster) -> None:
    options = replace(SYSBENCH, tables=1, table_size=10)
    with pytest.raises(ServiceError) as caught:
        services.launch_run(cluster, options=options, custom_script="SELECT 1;", enqueue=False)
    assert caught.value.field == "script"
    with pytest.raises(ServiceError) as caught:
        services.launch_run(cluster, options=replace(options, max_tries=2), enqueue=False)
    assert caught.value.field == "max_tries"
    # sysbench would load the Lua file a script path names: only its built-in OLTP names pass.
    with pytest.raises(ServiceError) as caught:
        services.launch_run(cluster, options=replace(options, builtin="/tmp/mine.lua"), enqueue=False)
    assert caught.value.field == "script" and "Unknown sysbench script" in caught.value.message
    assert not BenchmarkRun.objects.exists()
