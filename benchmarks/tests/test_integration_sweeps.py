"""Sweeps on a real cluster and PgBouncer, in the foreground: direct against a pool, a pool resized
online between steps and given back after (also after a cancel and a refused step), a scratch pool
made and removed, and sysbench."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks import services
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import BenchmarkRun, Engine, JobStatus, RunStatus, Sweep
from panel.clusters.models import Cluster
from panel.pools import services as pool_services
from panel.pools.engine import console, disk, supervisor
from panel.pools.engine.console import admin_console
from panel.pools.models import ConnectionPool
from tests.fixtures.clusters import module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

POOL = "sweep-pool"
ORIGINAL = 10


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    """A 1 GB cluster (22 connections for pools) with pgbench's tables at scale 1 and a
    transaction pool of 10 on them."""
    with module_cluster(django_db_blocker, "sweeper", "db-sweeps") as cluster:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            dataset = services.init_dataset(cluster, "defaultdb", 1, enqueue=False)
            dataset = services.execute_init(dataset.pk)
            assert dataset.status == JobStatus.SUCCEEDED, dataset.error_message
            pool_services.create_pool(cluster, POOL, "defaultdb", None, "transaction", ORIGINAL)
        yield cluster


def bench(*args: str) -> str:
    out = io.StringIO()
    call_command("bench", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def served_sizes(cluster: Cluster) -> dict[str, int | None]:
    with admin_console(cluster) as conn:
        return {row.name: row.pool_size for row in console.show_databases(conn) if row.name != "pgbouncer"}


def bouncer_pid(cluster: Cluster) -> int | None:
    return supervisor.running_pid(disk.bouncer_files(cluster))


def options(**kwargs: object) -> cmd.RunOptions:
    values: dict = {"clients": 1, "threads": 1, "duration_s": 2, "builtin": "select-only"}
    return engines.make_options(**{**values, **kwargs})  # type: ignore[arg-type]


def test_direct_against_a_pool_from_the_command_line(cluster: Cluster) -> None:
    printed = bench(
        "sweep", cluster.name, "--clients", "2,4", "--targets", f"direct,{POOL}", "--duration", "2",
        "--script", "select-only", "--wait",
    )  # fmt: skip
    sweep = Sweep.objects.get(cluster=cluster, kind="targets")
    runs = list(sweep.runs.order_by("sweep_index"))
    assert [(r.clients, r.pool_name) for r in runs] == [(2, ""), (2, POOL), (4, ""), (4, POOL)]
    assert all(r.status == RunStatus.SUCCEEDED and r.tps for r in runs), [
        (r.status, r.error_message) for r in runs
    ]
    assert f"pool {POOL}" in printed and "direct" in printed and "*" in printed
    # Whichever way it went on this machine, the sentence says it from the data.
    assert "Through the pool from" in printed or "No crossover in the measured range (2–4 clients)" in printed

    report = services.sweep_report(sweep)
    assert [s["label"] for s in report["series"]] == ["direct", f"pool {POOL}"]
    best = max((r for r in runs), key=lambda r: r.tps or 0)
    assert report["best"]["clients"] == best.clients and report["best"]["tps"] == round(best.tps or 0, 1)
    assert json.loads(bench("sweep-show", str(sweep.pk), "--format", "json"))["best"] == report["best"]


def test_a_pool_size_sweep_resizes_the_pool_online_between_steps_and_gives_it_back(cluster: Cluster) -> None:
    pid = bouncer_pid(cluster)
    printed = bench(
        "sweep", cluster.name, "--clients", "2,4", "--pool-sizes", "2,5", "--pool", POOL, "--duration", "2",
        "--script", "select-only", "--wait", "--format", "json",
    )  # fmt: skip
    record = json.loads(printed)
    steps = [(r["pool_size"], r["clients"], r["pool_size_applied"], r["status"]) for r in record["runs"]]
    # Sizes outermost; each step ran against the size PgBouncer reported for the pool as it began.
    assert steps == [
        (2, 2, 2, "succeeded"),
        (2, 4, 2, "succeeded"),
        (5, 2, 5, "succeeded"),
        (5, 4, 5, "succeeded"),
    ]
    assert [s["label"] for s in record["series"]] == ["size 2", "size 5"]
    assert record["sentences"][0].startswith("Best pool size per client count: 2 clients: size")
    assert record["restored"] and not record["restore_error"]
    # Given back in the database, in PgBouncer's own answer and in the file it reads, online.
    assert ConnectionPool.objects.get(cluster=cluster, name=POOL).size == ORIGINAL
    assert served_sizes(cluster)[POOL] == ORIGINAL
    assert f"pool_size={ORIGINAL}" in disk.bouncer_files(cluster).ini.read_text()
    assert bouncer_pid(cluster) == pid  # reloaded, never restarted


def test_a_cancelled_pool_size_sweep_gives_the_pool_back(cluster: Cluster) -> None:
    pool = ConnectionPool.objects.get(cluster=cluster, name=POOL)
    sweep = services.launch_sweep(
        cluster,
        clients_list=[2],
        pool_sizes=[3, 4],
        pool=pool,
        repeats=1,
        base_options=options(),
        enqueue=False,
    )
    first = sweep.runs.order_by("sweep_index").first()
    assert first is not None
    services.execute_run(first.pk, wait_turn_s=30)
    first.refresh_from_db()
    assert first.status == RunStatus.SUCCEEDED and first.pool_size_applied == 3
    assert served_sizes(cluster)[POOL] == 3  # the sweep is not over: the step's size holds
    sweep.refresh_from_db()
    assert sweep.restored_at is None

    assert services.cancel_sweep(sweep) == 1
    sweep.refresh_from_db()
    assert sweep.restored_at is not None and not sweep.restore_error
    assert served_sizes(cluster)[POOL] == ORIGINAL
    assert ConnectionPool.objects.get(pk=pool.pk).size == ORIGINAL


def test_a_step_that_no_longer_fits_the_budget_fails_and_the_pool_is_still_given_back(
    cluster: Cluster,
) -> None:
    pool = ConnectionPool.objects.get(cluster=cluster, name=POOL)
    sweep = services.launch_sweep(
        cluster,
        clients_list=[2],
        pool_sizes=[12],
        pool=pool,
        repeats=1,
        base_options=options(),
        enqueue=False,
    )
    # Another pool takes the budget meanwhile: 22 - 11 leaves 11 for this pool, not 12.
    other = pool_services.create_pool(cluster, "other-pool", "defaultdb", None, "transaction", 11)
    try:
        sweep = services.execute_sweep(sweep, wait_turn_s=30)
        run = sweep.runs.get()
        assert run.status == RunStatus.FAILED and "a pool of 12 does not fit" in run.error_message
        assert sweep.restored_at is not None and not sweep.restore_error
        assert served_sizes(cluster)[POOL] == ORIGINAL
    finally:
        pool_services.delete_pool(other)


def test_a_scratch_pool_is_made_for_the_sweep_and_removed_after(cluster: Cluster) -> None:
    sweep = services.launch_sweep(
        cluster, clients_list=[2], pool_sizes=[2, 3], repeats=1, base_options=options(),
        database="defaultdb", enqueue=False,
    )  # fmt: skip
    assert sweep.scratch_pool and sweep.pool_name.startswith("sweep-")
    assert served_sizes(cluster)[sweep.pool_name] == 2
    sweep = services.execute_sweep(sweep, wait_turn_s=30)
    runs = list(sweep.runs.order_by("sweep_index"))
    assert [(r.pool_size_applied, r.status) for r in runs] == [(2, "succeeded"), (3, "succeeded")]
    assert sweep.restored_at is not None and not sweep.restore_error
    assert not ConnectionPool.objects.filter(cluster=cluster, name=sweep.pool_name).exists()
    assert sweep.pool_name not in served_sizes(cluster)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--targets", "direct", "--pool-sizes", "2"), "not both"),
        (("--pool", POOL), "--pool names the pool --pool-sizes resizes"),
        (("--pool-sizes", "2,x"), "--pool-sizes: whole numbers"),
        (("--targets", "direct,nope"), "No pool named 'nope'"),
        (("--pool-sizes", "2,40", "--pool", POOL), "40 does not fit"),
    ],
)
def test_the_command_refuses_what_cannot_be_planned(
    cluster: Cluster, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        bench("sweep", cluster.name, "--clients", "2", "--duration", "2", *args)
    assert not Sweep.objects.filter(cluster=cluster, restored_at=None, kind="pool_sizes").exists()


def test_sizes_over_the_budget_are_refused_before_anything_is_made(cluster: Cluster) -> None:
    with pytest.raises(services.ServiceError) as caught:
        services.launch_sweep(
            cluster, clients_list=[2], pool_sizes=[5, 30], repeats=1, base_options=options(),
            database="defaultdb", enqueue=False,
        )  # fmt: skip
    assert caught.value.field == "pool_sizes" and "30 does not fit" in caught.value.message
    assert not Sweep.objects.filter(cluster=cluster, scratch_pool=True, restored_at=None).exists()
    assert set(served_sizes(cluster)) == {POOL}
    assert not BenchmarkRun.objects.filter(cluster=cluster, status=RunStatus.QUEUED).exists()


def test_a_sysbench_sweep_runs_without_prepared_statements_through_the_pool(cluster: Cluster) -> None:
    dataset = services.init_dataset(
        cluster, "defaultdb", engine=Engine.SYSBENCH, tables=1, table_size=1000, enqueue=False
    )
    assert services.execute_init(dataset.pk).status == JobStatus.SUCCEEDED
    pool = ConnectionPool.objects.get(cluster=cluster, name=POOL)
    sweep = services.launch_sweep(
        cluster, clients_list=[2], pools=[None, pool], repeats=1, database="defaultdb", enqueue=False,
        base_options=options(engine="sysbench", builtin="oltp_read_only", query_mode="auto"),
    )  # fmt: skip
    sweep = services.execute_sweep(sweep, wait_turn_s=30)
    direct, pooled = sweep.runs.order_by("sweep_index")
    assert direct.status == pooled.status == RunStatus.SUCCEEDED, (direct.error_message, pooled.error_message)
    assert direct.engine == pooled.engine == "sysbench" and direct.threads == 2
    assert "--db-ps-mode=disable" in pooled.argv and "--db-ps-mode=disable" not in direct.argv
    assert len(services.sweep_report(sweep)["sentences"]) == 1


def test_a_sweep_shrinking_a_tenants_pool_closes_only_the_servers_beyond_the_new_size(
    cluster: Cluster,
) -> None:
    """Issue 38: the tenant's own pool keeps its server connections (traffic through it would
    notice them closed); PgBouncer closes only those beyond the step's size, itself."""
    pool = ConnectionPool.objects.get(cluster=cluster, name=POOL)
    warm = services.launch_run(cluster, pool=pool, options=options(clients=ORIGINAL), enqueue=False)
    warm = services.execute_run(warm.pk, wait_turn_s=30)
    assert warm.status == RunStatus.SUCCEEDED, warm.error_message
    warmed = server_pids(cluster, POOL)
    assert len(warmed) == ORIGINAL

    sweep = services.launch_sweep(
        cluster, clients_list=[2], pool_sizes=[3], pool=pool, repeats=1, base_options=options(), enqueue=False
    )
    sweep = services.execute_sweep(sweep, wait_turn_s=30)

    run = sweep.runs.get()
    assert run.status == RunStatus.SUCCEEDED and run.pool_size_applied == 3, run.error_message
    kept = server_pids(cluster, POOL)
    # The servers left are the tenant's own, opened before the sweep: none was closed and reopened.
    assert kept and kept <= warmed and len(kept) <= 3
    assert served_sizes(cluster)[POOL] == ORIGINAL


def server_pids(cluster: Cluster, pool: str) -> set[int]:
    with admin_console(cluster) as conn:
        columns, rows = console.show(conn, "SERVERS")
    database, pid = columns.index("database"), columns.index("remote_pid")
    return {int(row[pid]) for row in rows if row[database] == pool}
