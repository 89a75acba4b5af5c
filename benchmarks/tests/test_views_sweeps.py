"""The sweep form's two kinds and its errors, the result page's grid, findings and chart data, and
cancelling a sweep; against rows written directly (no PostgreSQL behind them)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkRun, DataSet, JobStatus, RunStatus, Sweep
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.pools.models import ConnectionPool

FORM = {
    "kind": "targets",
    "clients_list": "10,50",
    "targets": ["direct"],
    "pool": "",
    "pool_sizes": "",
    "database": "defaultdb",
    "repeats": "1",
    "duration": "5",
    "engine": "pgbench",
    "script": "select-only",
    "query_mode": "simple",
    "name": "",
}


@pytest.fixture
def pool(cluster_row: Cluster) -> ConnectionPool:
    return ConnectionPool.objects.create(cluster=cluster_row, name="test-pool", database="defaultdb", size=40)


def post_sweep(client, cluster: Cluster, **changes: object):
    return client.post(reverse("benchmarks:sweep-launch", args=[cluster.pk]), {**FORM, **changes})


def error_next_to(page: str, field: str) -> str:
    """The text between the field's input and the next field of the sweep form."""
    start = page.index(f'id="sweep-{field}"')
    end = page.find('<div class="col', start)
    return page[start:end]


def sweep_urls(sweep: Sweep) -> dict[str, str]:
    kwargs = {"cluster_id": sweep.cluster_id, "sweep_id": sweep.pk}
    return {name: reverse(f"benchmarks:sweep-{name}", kwargs=kwargs) for name in ("detail", "data", "cancel")}


def summary(tps: float, latency: float = 5.0, failed: int = 0) -> dict:
    return {"tps": tps, "latency_avg_ms": latency, "failed_transactions": failed}


# --- the form ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pool_sizes": "5, 98"}, "Only 97 of the cluster&#x27;s 97 connections are left for this pool"),
        ({"pool_sizes": "5,x"}, "Pool sizes are whole numbers separated by commas."),
        ({"pool_sizes": "0,5"}, "Pool sizes must be at least 1."),
        ({"pool_sizes": ""}, "Give at least one pool size"),
    ],
)
def test_pool_size_errors_are_next_to_the_sizes(owner_client, cluster_row, changes, message):
    response = post_sweep(owner_client, cluster_row, kind="pool_sizes", **changes)
    page = response.content.decode()
    assert response.status_code == 200 and message in error_next_to(page, "pool_sizes")
    assert not Sweep.objects.exists() and not BenchmarkRun.objects.exists()


def test_the_budget_counts_the_other_pools_but_not_the_one_resized(owner_client, cluster_row, pool):
    ConnectionPool.objects.create(cluster=cluster_row, name="other", database="defaultdb", size=50)
    # 97 - 50 (other) leaves 47 for test-pool, whose own 40 is given back by the resize.
    page = post_sweep(
        owner_client, cluster_row, kind="pool_sizes", pool=str(pool.pk), pool_sizes="10,48"
    ).content.decode()
    errors = error_next_to(page, "pool_sizes")
    assert (
        "Only 47 of the cluster&#x27;s 97 connections" in errors and "other pools: 48 does not fit." in errors
    )
    assert not Sweep.objects.exists()


def test_a_targets_sweep_needs_a_target_and_scripts_of_its_engine(owner_client, cluster_row):
    page = post_sweep(owner_client, cluster_row, targets=[]).content.decode()
    assert "Choose at least one target." in page
    page = post_sweep(owner_client, cluster_row, engine="sysbench", script="select-only").content.decode()
    assert "Choose one of sysbench&#x27;s scripts." in error_next_to(page, "script")
    assert not Sweep.objects.exists()


def test_the_form_plans_a_pool_size_sweep_sizes_outermost(owner_client, cluster_row, pool, redis_server):
    response = post_sweep(
        owner_client, cluster_row, kind="pool_sizes", pool=str(pool.pk), pool_sizes="20, 5", repeats="2"
    )
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/sweeps/{sweep.pk}/")
    assert (sweep.kind, sweep.pool_sizes, sweep.pool_name) == ("pool_sizes", [5, 20], "test-pool")
    assert sweep.original_pool_size == 40 and not sweep.scratch_pool and sweep.restored_at is None
    steps = [(r.pool_size, r.clients, r.pool_name) for r in sweep.runs.order_by("sweep_index")]
    assert (
        steps
        == [(5, 10, "test-pool")] * 2
        + [(5, 50, "test-pool")] * 2
        + [(20, 10, "test-pool")] * 2
        + [(20, 50, "test-pool")] * 2
    )
    # Planning changes nothing: the pool is resized by each step as it runs.
    assert ConnectionPool.objects.get(pk=pool.pk).size == 40
    # A second sweep on the same pool would fight the first over its size.
    page = post_sweep(
        owner_client, cluster_row, kind="pool_sizes", pool=str(pool.pk), pool_sizes="5"
    ).content.decode()
    assert "Another pool-size sweep is resizing the pool" in error_next_to(page, "pool")
    assert Sweep.objects.count() == 1


def test_the_form_plans_a_sysbench_sweep_through_a_pool_without_prepared_statements(
    owner_client, cluster_row, pool, redis_server
):
    DataSet.objects.create(
        cluster=cluster_row, database="defaultdb", engine="sysbench", tables=2, table_size=1000,
        status=JobStatus.SUCCEEDED,
    )  # fmt: skip
    response = post_sweep(
        owner_client,
        cluster_row,
        engine="sysbench",
        script="oltp_read_only",
        targets=["direct", str(pool.pk)],
    )
    assert response.status_code == 302
    runs = list(Sweep.objects.get().runs.order_by("sweep_index"))
    assert {(r.engine, r.script) for r in runs} == {("sysbench", "oltp_read_only")}
    assert [(r.pool_name, r.query_mode) for r in runs[:2]] == [("", "auto"), ("test-pool", "disable")]
    assert all(r.threads == r.clients for r in runs) and "--db-ps-mode=disable" in runs[1].command_display


# --- the result page ------------------------------------------------------------------------------


def test_the_targets_page_marks_the_best_cell_and_says_where_the_pool_wins(owner_client, cluster_row):
    sweep = Sweep.objects.create(
        cluster=cluster_row, clients_list=[10, 50, 150], repeats=2,
        targets=[{"kind": "direct"}, {"kind": "pool", "pool": "test-pool"}],
    )  # fmt: skip
    table = {
        ("", 10): [2000.0, 2200.0], ("test-pool", 10): [1500.0, 1600.0],
        ("", 50): [2300.0, 2400.0], ("test-pool", 50): [2500.0, 2600.0],
        ("", 150): [None, None], ("test-pool", 150): [1800.0, 1900.0],
    }  # fmt: skip
    index = 0
    for (pool_name, clients), values in table.items():
        for tps in values:
            fields = {"summary": summary(tps)} if tps else {"status": RunStatus.FAILED, "summary": None}
            make_run(
                cluster_row, sweep=sweep, sweep_index=index, clients=clients, pool_name=pool_name, **fields
            )
            index += 1
    urls = sweep_urls(sweep)
    page = owner_client.get(urls["detail"]).content.decode()
    assert (
        "TPS vs clients, by target" in page and 'data-chart="tps"' in page and 'data-chart="latency"' in page
    )
    assert "Through the pool from 50 clients on" in page
    assert "Best cell: pool test-pool at 50 clients, 2,550.0 TPS (median)." in page
    best = page.index("data-best")
    assert "2,550.0 TPS" in page[best : best + 200] and page.count("data-best") == 1
    assert "2 failed runs" in page  # direct at 150 could not start

    body = owner_client.get(urls["data"]).json()
    assert body["done"] is True and body["kind"] == "targets"
    direct, pooled = body["series"]
    assert direct["label"] == "direct" and pooled["label"] == "pool test-pool"
    assert [(p["clients"], p["tps"]) for p in direct["points"]] == [(10, 2100.0), (50, 2350.0), (150, 0.0)]
    assert [(p["clients"], p["best"]) for p in pooled["points"]] == [(10, False), (50, True), (150, False)]
    assert body["best"] == {"series": "pool test-pool", "clients": 50, "tps": 2550.0}


def test_the_pool_size_page_names_the_best_size_per_client_count(owner_client, cluster_row):
    sweep = Sweep.objects.create(
        cluster=cluster_row, clients_list=[10, 50], kind="pool_sizes", pool_sizes=[5, 20],
        pool_name="test-pool", original_pool_size=40, targets=[{"kind": "pool", "pool": "test-pool"}],
    )  # fmt: skip
    for index, (size, clients, tps) in enumerate(
        [(5, 10, 900.0), (5, 50, 1700.0), (20, 10, 1000.0), (20, 50, 1500.0)]
    ):
        make_run(
            cluster_row, sweep=sweep, sweep_index=index, clients=clients, pool_name="test-pool",
            pool_size=size, pool_size_applied=size, summary=summary(tps),
        )  # fmt: skip
    urls = sweep_urls(sweep)
    page = owner_client.get(urls["detail"]).content.decode()
    assert "TPS vs clients, by pool size" in page
    assert "Best pool size per client count: 10 clients: size 20; 50 clients: size 5." in page
    assert "gets its size 40 back when the sweep ends" in page
    # Not yet given back: the page keeps polling until it is, even with every run over.
    assert "every 2s" in page
    body = owner_client.get(urls["data"]).json()
    assert [s["label"] for s in body["series"]] == ["size 5", "size 20"]
    assert body["best"] == {"series": "size 5", "clients": 50, "tps": 1700.0}


# --- cancelling ---------------------------------------------------------------------------------------


def test_cancelling_a_sweep_cancels_its_queued_runs_and_outsiders_get_404(
    owner_client, other_client, cluster_row
):
    sweep = Sweep.objects.create(cluster=cluster_row, clients_list=[10, 50], targets=[{"kind": "direct"}])
    make_run(cluster_row, sweep=sweep, sweep_index=0, clients=10)
    for index in (1, 2):
        make_run(
            cluster_row, sweep=sweep, sweep_index=index, clients=50, status=RunStatus.QUEUED, summary=None
        )
    urls = sweep_urls(sweep)
    assert other_client.post(urls["cancel"]).status_code == 404
    assert sweep.runs.filter(status=RunStatus.QUEUED).count() == 2
    assert "Cancel sweep" in owner_client.get(urls["detail"]).content.decode()

    response = owner_client.post(urls["cancel"])
    assert response.status_code == 302 and response["Location"] == urls["detail"]
    statuses = list(sweep.runs.order_by("sweep_index").values_list("status", flat=True))
    assert statuses == [RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.CANCELLED]
    assert "Cancel sweep" not in owner_client.get(urls["detail"]).content.decode()


def test_another_tenants_pool_cannot_be_resized_or_targeted(owner_client, cluster_row, other_user):
    theirs = make_cluster_row(other_user, name="db-theirs", port=26910, pooler_port=26911)
    their_pool = ConnectionPool.objects.create(
        cluster=theirs, name="their-pool", database="defaultdb", size=10
    )
    page = post_sweep(
        owner_client, cluster_row, kind="pool_sizes", pool=str(their_pool.pk), pool_sizes="2"
    ).content.decode()
    assert "Select a valid choice." in error_next_to(page, "pool")
    page = post_sweep(owner_client, cluster_row, targets=[str(their_pool.pk)]).content.decode()
    assert "Select a valid choice." in page
    assert not Sweep.objects.exists() and ConnectionPool.objects.get(pk=their_pool.pk).size == 10


def test_what_the_form_asks_of_the_service_crosses_to_the_node_agent_intact(cluster_row, pool):
    """The web sends ``launch_sweep`` to the node agent: its arguments must survive the wire."""
    from benchmarks.forms import SweepForm
    from panel.core import agent

    for data in (
        {**FORM, "targets": ["direct", str(pool.pk)]},
        {**FORM, "kind": "pool_sizes", "pool": str(pool.pk), "pool_sizes": "2,5", "engine": "sysbench",
         "script": "oltp_read_only"},
    ):  # fmt: skip
        form = SweepForm(data, cluster=cluster_row)
        assert form.is_valid(), form.errors
        kwargs = form.service_kwargs()
        assert agent.decode(agent.encode(kwargs)) == kwargs
