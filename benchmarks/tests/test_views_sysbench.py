"""The Benchmarks tab with sysbench: the engine on the forms, its data sets kept apart from
pgbench's, its refusals inline, and the -C preset in plain view (against a real Redis, no worker)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkRun, DataSet, Engine, JobStatus, RunStatus
from benchmarks.tests.test_views_forms import HTMX, RUN, _launch, field_errors
from panel.clusters.models import Cluster
from panel.pools.models import ConnectionPool

SYSBENCH = {**RUN, "engine": "sysbench", "script": "oltp_read_only", "query_mode": "simple"}


def sysbench_dataset(cluster: Cluster, database: str = "defaultdb") -> DataSet:
    return DataSet.objects.create(
        cluster=cluster,
        database=database,
        engine=Engine.SYSBENCH,
        tables=2,
        table_size=5000,
        status=JobStatus.SUCCEEDED,
    )


def test_a_sysbench_launch_queues_a_sysbench_run_on_its_data_set(owner_client, cluster_row, redis_server):
    sysbench_dataset(cluster_row)
    response = _launch(owner_client, cluster_row, htmx=False, **{**SYSBENCH, "clients": "3"})
    assert response.status_code == 302
    run = BenchmarkRun.objects.get()
    assert run.status == RunStatus.QUEUED and run.engine == Engine.SYSBENCH and run.script == "oltp_read_only"
    assert run.clients == run.threads == 3 and run.query_mode == "auto"
    assert run.percentile_sampling_rate is None  # its percentiles are sysbench's own
    assert (
        "sysbench oltp_read_only" in run.command_display
        and "--tables=2 --table-size=5000" in run.command_display
    )
    assert "--threads=3" in run.command_display and "--pgsql-password" not in run.command_display


def test_through_a_transaction_pool_prepared_statements_are_off(owner_client, cluster_row, redis_server):
    sysbench_dataset(cluster_row, "appdb")
    pool = ConnectionPool.objects.create(
        cluster=cluster_row, name="tx-pool", database="appdb", size=20, mode="transaction"
    )
    check = owner_client.post(
        reverse("benchmarks:run-check", args=[cluster_row.pk]),
        {**SYSBENCH, "target": str(pool.pk), "database": ""},
        headers=HTMX,
    ).content.decode()
    assert "--db-ps-mode=disable" in check and "PgBouncer 1.18" in check
    _launch(owner_client, cluster_row, **{**SYSBENCH, "target": str(pool.pk), "database": ""})
    run = BenchmarkRun.objects.get()
    assert run.query_mode == "disable" and "--db-ps-mode=disable" in run.command_display
    assert "--pgsql-db=tx-pool" in run.command_display


def test_a_pgbench_data_set_is_not_a_sysbench_one(owner_client, cluster_row):
    DataSet.objects.create(cluster=cluster_row, database="defaultdb", scale=10, status=JobStatus.SUCCEEDED)
    page = _launch(owner_client, cluster_row, **SYSBENCH).content.decode()
    assert any("No sysbench data set" in error for error in field_errors(page, "database"))
    assert not BenchmarkRun.objects.exists()


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"script": "tpcb-like"}, "script", "Unknown sysbench script"),
        ({"script": "custom", "custom_script": "SELECT 1;"}, "script", "Unknown sysbench script"),
        ({"max_tries": "3"}, "max_tries", "that option is pgbench"),
        ({"connect": "on"}, "connect", "that option is pgbench"),
    ],
)
def test_pgbench_only_choices_are_refused_next_to_their_field(
    owner_client, cluster_row, changes, field, message
):
    sysbench_dataset(cluster_row)
    page = _launch(owner_client, cluster_row, **{**SYSBENCH, **changes}).content.decode()
    assert any(message in error for error in field_errors(page, field)), field_errors(page, field)
    assert not BenchmarkRun.objects.exists()


def test_a_pgbench_launch_without_an_engine_is_pgbench_as_before(owner_client, cluster_row, redis_server):
    _launch(owner_client, cluster_row, connect="on")
    run = BenchmarkRun.objects.get()
    assert run.engine == Engine.PGBENCH and " -C " in run.command_display


def test_sysbench_prepare_from_the_data_set_form_sits_beside_pgbench_s(
    owner_client, cluster_row, redis_server
):
    url = reverse("benchmarks:dataset-init", args=[cluster_row.pk])
    owner_client.post(url, {"database": "appdb", "scale": "3"}, headers=HTMX)
    page = owner_client.post(
        url,
        {"database": "defaultdb", "engine": "sysbench", "scale": "", "tables": "2", "table_size": "5000"},
        headers=HTMX,
    ).content.decode()
    prepared = DataSet.objects.get(engine=Engine.SYSBENCH)
    assert (prepared.database, prepared.tables, prepared.table_size, prepared.scale) == (
        "defaultdb",
        2,
        5000,
        None,
    )
    assert 'data-engine="sysbench"' in page and 'data-engine="pgbench"' in page
    assert "Preparing 2 tables of 5000 rows" in page
    DataSet.objects.filter(pk=prepared.pk).update(status=JobStatus.SUCCEEDED, progress=100)
    live = owner_client.get(
        reverse("benchmarks:datasets", args=[cluster_row.pk]), headers=HTMX
    ).content.decode()
    assert "2 × 5000 rows" in live


def test_a_pgbench_data_set_needs_its_scale(owner_client, cluster_row):
    url = reverse("benchmarks:dataset-init", args=[cluster_row.pk])
    page = owner_client.post(url, {"database": "defaultdb", "scale": ""}, headers=HTMX).content.decode()
    assert "Give a scale factor." in page and not DataSet.objects.exists()


def test_the_form_says_why_sysbench_goes_without_prepared_statements_and_shows_the_c_preset(
    owner_client, cluster_row
):
    page = owner_client.get(reverse("benchmarks:tab", args=[cluster_row.pk])).content.decode()
    assert "--db-ps-mode=disable" in page and "does not keep them" in page
    assert '<optgroup label="sysbench">' in page and 'value="oltp_point_select"' in page
    # The connection-per-transaction preset is on the form itself, not folded under "More options".
    run_form = page[page.index('id="run-form"') :]
    assert run_form.index('id="run-connect"') < run_form.index("<details")
    assert "Web app without a pool" in run_form
