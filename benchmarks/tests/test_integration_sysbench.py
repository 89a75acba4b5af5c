"""sysbench against a real cluster and PgBouncer: prepare, runs direct and through a transaction
pool, the same samples, summary, exports and compare as pgbench, its refusals, and no password
on any command line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace

import psutil
import pytest

from benchmarks import services
from benchmarks.engine import runner
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib import sysbench_command as sb
from benchmarks.models import BenchmarkRun, Engine, JobStatus, RunStatus
from benchmarks.services.targets import resolve_target
from benchmarks.tests.test_integration_runs import run_in_background
from panel.clusters.models import Cluster
from panel.pools import services as pool_services

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    """A 1 GB cluster with sysbench's tables (2 × 5,000 rows) in ``defaultdb``, and a pool."""
    dataset = services.init_dataset(
        shared_local_cluster, "defaultdb", engine=Engine.SYSBENCH, tables=2, table_size=5_000, enqueue=False
    )
    dataset = services.execute_init(dataset.pk)
    assert dataset.status == JobStatus.SUCCEEDED, dataset.error_message
    assert dataset.progress == 100 and dataset.size_bytes and dataset.size_bytes > 1_000_000
    assert (
        dataset.command_display.startswith("PGPASSWORD=******** ") and " prepare" in dataset.command_display
    )
    assert "--tables=2" in dataset.command_display and "--table-size=5000" in dataset.command_display
    yield shared_local_cluster
    pool_services.stop_pgbouncer(shared_local_cluster)
    # The module's next test prepares again on the same server (sysbench refuses tables it finds).
    assert services.cleanup_dataset(shared_local_cluster, "defaultdb") == 1


def sysbench_options(**kwargs: object) -> cmd.RunOptions:
    values: dict = {"clients": 2, "duration_s": 3, "builtin": "oltp_read_only", "engine": "sysbench"}
    return engines.make_options(**{**values, **kwargs})  # type: ignore[arg-type]


def run_now(cluster: Cluster, **kwargs: object) -> BenchmarkRun:
    pool = kwargs.pop("pool", None)
    run = services.launch_run(cluster, pool=pool, options=sysbench_options(**kwargs), enqueue=False)  # type: ignore[arg-type]
    return services.execute_run(run.pk, wait_turn_s=30)


def assert_ran(run: BenchmarkRun, clients: int, seconds: int) -> None:
    assert run.status == RunStatus.SUCCEEDED, (run.error_message, run.first_error)
    assert run.engine == Engine.SYSBENCH and run.exit_code == 0 and run.error_count == 0
    summary = run.summary
    assert summary is not None and summary["clients"] == clients
    # sysbench's own total time: the asked seconds, and more when its last transactions waited
    # on a loaded machine (2.4 s latencies made a 3 s run report 5 s in a full run).
    assert summary["duration_s"] >= seconds
    assert summary["tps"] > 0 and summary["qps"] > summary["tps"]
    assert summary["latency_p50_ms"] <= summary["latency_p95_ms"] <= summary["latency_p99_ms"]
    samples = list(run.samples.order_by("seq"))
    # One sample a second; sysbench, like pgbench, may skip the last when the run ends on it.
    assert seconds - 1 <= len(samples) <= seconds
    assert [s.seq for s in samples] == list(range(1, len(samples) + 1))
    assert [s.elapsed_s for s in samples] == [float(n) for n in range(1, len(samples) + 1)]
    assert all(s.p95_ms and s.qps and s.latency_avg_ms is None for s in samples)
    # The samples are sysbench's own seconds: together they hold the report's transactions (of
    # the seconds they cover: a last second sysbench did not report is in the total only).
    covered = summary["transactions_processed"] * len(samples) / seconds
    assert sum(s.tps for s in samples) == pytest.approx(covered, rel=0.3)
    assert sum(s.tps for s in samples) <= summary["transactions_processed"] * 1.05
    assert run.tps == summary["tps"] and run.argv[0].endswith("sysbench")
    assert not any("password" in arg.lower() for arg in run.argv)
    assert run.argv_env["PGPASSWORD"] is None and run.argv_env["PGSSLMODE"] == "require"


def test_direct_and_pooled_runs_record_samples_summaries_and_compare(cluster: Cluster) -> None:
    pool = pool_services.create_pool(cluster, "txpool", "defaultdb", None, "transaction", 5)
    direct = run_now(cluster, builtin="oltp_read_write")
    assert_ran(direct, 2, 3)
    assert "--db-ps-mode=auto" in direct.argv and direct.query_mode == "auto"
    pooled = run_now(cluster, pool=pool)
    assert_ran(pooled, 2, 3)
    # PgBouncer 1.18 keeps no prepared statement across transactions: sysbench goes without.
    assert "--db-ps-mode=disable" in pooled.argv and pooled.query_mode == "disable"
    assert "--pgsql-db=txpool" in pooled.argv and "--tables=2" in pooled.argv
    assert any("--db-ps-mode=disable" in warning for warning in map(str, pooled.warning_messages))

    compared = services.compare_runs([direct, pooled])
    assert compared["lines"] == [str(direct.pk), str(pooled.pk)]
    longest = max(direct.samples.count(), pooled.samples.count())
    assert len(compared["series"]["p95_ms"][str(pooled.pk)]) == longest
    exported = json.loads(services.export_run(pooled, "json"))
    assert exported["summary"]["tps"] == pooled.tps and len(exported["samples"]) == pooled.samples.count()
    assert services.export_run(pooled, "csv").splitlines()[0].startswith("seq,elapsed_s,tps")


def test_a_queued_run_naming_a_lua_file_fails_without_spawning(cluster: Cluster) -> None:
    """A row written around the launch service (its script a file of the tenant's choosing) is
    refused again before sysbench starts: sysbench would load that Lua file."""
    run = services.launch_run(cluster, options=sysbench_options(), enqueue=False)
    BenchmarkRun.objects.filter(pk=run.pk).update(options={**run.options, "builtin": "/tmp/mine.lua"})
    run = services.execute_run(run.pk, wait_turn_s=30)
    assert run.status == RunStatus.FAILED and "Unknown sysbench script '/tmp/mine.lua'" in run.error_message
    assert run.pgbench_pid is None and run.argv == [] and run.samples.count() == 0


def test_prepared_statements_through_a_transaction_pool_would_fail(cluster: Cluster) -> None:
    """Why the panel disables them: forced on through the pool, every client aborts at once."""
    pool = pool_services.create_pool(cluster, "txpool", "defaultdb", None, "transaction", 5)
    target = resolve_target(cluster, pool=pool, database=None, user=None)
    forced = replace(sysbench_options(), tables=2, table_size=5_000, query_mode="auto")
    args = sb.build_run_args(runner.program_path("sysbench"), target.connection, forced)
    env = cmd.build_env(target.password, "require", base=runner.base_env())
    proc = runner.LoadProcess(args, env)
    out = []
    while not proc.done:
        line = proc.next_line(5)
        if line is not None:
            out.append(line.text)
    assert proc.wait(5) == 1
    assert any('prepared statement "sbstmt' in text for text in out), out


def test_a_cancel_stops_sysbench_and_keeps_the_samples(
    cluster: Cluster, wait_until: Callable[..., object]
) -> None:
    run, worker, _outcome = run_in_background(cluster, sysbench_options(duration_s=60))
    try:
        wait_until(lambda: run.samples.count() >= 2, timeout=30, message="two samples")
        run.refresh_from_db()
        pid = run.pgbench_pid
        assert pid and psutil.Process(pid).name() == "sysbench"
        # Its command line holds no password (what `ps` shows every user).
        assert not any("password" in arg.lower() for arg in psutil.Process(pid).cmdline())
        services.cancel_run(run)
    finally:
        worker.join(30)
    assert not runner.is_pgbench(pid)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.samples.count() >= 2
