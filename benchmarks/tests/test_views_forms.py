"""The Benchmarks tab's forms: inline errors with status 200 and nothing queued, warnings before
launch, and launches that queue rows (against a real Redis, no worker)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkRun, DataSet, JobStatus, RunStatus, Sweep
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.pools.models import ConnectionPool

HTMX = {"HX-Request": "true"}
RUN = {
    "target": "direct",
    "database": "defaultdb",
    "user": "",
    "clients": "4",
    "threads": "",
    "duration": "5",
    "transactions": "",
    "progress": "1",
    "script": "tpcb-like",
    "custom_script": "",
    "query_mode": "simple",
    "rate": "",
    "latency_limit": "",
    "max_tries": "",
    "percentiles": "on",
    "label": "",
}


def _launch(client, cluster: Cluster, htmx: bool = True, **changes: str):
    data = {**RUN, **changes}
    return client.post(
        reverse("benchmarks:run-launch", args=[cluster.pk]), data, headers=HTMX if htmx else {}
    )


def field_errors(page: str, field: str) -> list[str]:
    """The inline errors printed right after the field's input."""
    match = re.search(
        rf'id="run-{field}".*?</div>\s*(?=<div class="col|</div>\s*</div>|<details)', page, re.S
    )
    assert match, f"no field {field}"
    return re.findall(r'<div class="invalid-feedback d-block">(.*?)</div>', match.group(0), re.S)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"clients": "0"}, "clients", "greater than or equal to 1"),
        ({"duration": "0"}, "duration", "greater than or equal to 1"),
        ({"duration": "", "transactions": ""}, "duration", "Give a duration or a number of transactions"),
        ({"duration": "5", "transactions": "100"}, "duration", "not both"),
        ({"threads": "8"}, "threads", "cannot exceed clients"),
        ({"script": "custom", "custom_script": ""}, "custom_script", "Write the custom script"),
    ],
)
def test_invalid_run_input_is_shown_next_to_its_field_and_queues_nothing(
    owner_client, cluster_row, changes, field, message
):
    response = _launch(owner_client, cluster_row, **changes)
    assert response.status_code == 200
    page = response.content.decode()
    assert page.lstrip().startswith('<section id="bench-run-form"'), "HTMX gets the form only"
    assert any(message in error for error in field_errors(page, field)), page
    assert not BenchmarkRun.objects.exists()


def test_a_custom_script_pgbench_rejects_shows_pgbench_own_message(owner_client, cluster_row):
    response = _launch(
        owner_client, cluster_row, script="custom", custom_script="\\set aid random(1, \nSELECT 1;\n"
    )
    assert response.status_code == 200
    errors = " ".join(field_errors(response.content.decode(), "custom_script"))
    # pgbench's own words, naming the line of the script (not one of the form's messages).
    assert "script.sql:1: syntax error" in errors, errors
    assert not BenchmarkRun.objects.exists()


def test_without_htmx_an_invalid_run_renders_the_whole_tab_with_200(owner_client, cluster_row):
    response = _launch(owner_client, cluster_row, htmx=False, clients="0")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'aria-current="page" href="/clusters/' in page and "greater than or equal to 1" in page


def test_a_stopped_cluster_refuses_the_launch_on_the_form(owner_client, owner):
    cluster = make_cluster_row(owner, "db-stopped", status="stopped")
    page = _launch(owner_client, cluster).content.decode()
    assert "start it first" in page
    assert not BenchmarkRun.objects.exists()


def test_redis_down_is_a_form_error_and_leaves_no_row(owner_client, cluster_row, redis_down):
    response = _launch(owner_client, cluster_row)
    assert response.status_code == 200
    assert "is not reachable, so nothing was started" in response.content.decode()
    assert not BenchmarkRun.objects.exists()


def test_a_launch_queues_a_run_and_goes_to_its_page(owner_client, cluster_row, redis_server):
    response = _launch(owner_client, cluster_row, htmx=False, clients="8", label="baseline")
    run = BenchmarkRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "benchmarks:run-detail", kwargs={"cluster_id": cluster_row.pk, "run_id": run.pk}
    )
    assert run.status == RunStatus.QUEUED and run.clients == 8 and run.duration_s == 5
    assert run.label == "baseline" and run.pool is None and run.database == "defaultdb"
    assert run.percentile_sampling_rate is not None
    assert "-c 8" in run.command_display


def test_an_htmx_launch_through_a_pool_redirects_with_hx_redirect(owner_client, cluster_row, redis_server):
    pool = ConnectionPool.objects.create(cluster=cluster_row, name="test-pool", database="appdb", size=20)
    response = _launch(
        owner_client, cluster_row, target=str(pool.pk), database="", clients="150", percentiles=""
    )
    run = BenchmarkRun.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"].endswith(f"/runs/{run.pk}/")
    assert run.pool == pool and run.pool_name == "test-pool" and run.database == "appdb"
    assert run.percentile_sampling_rate is None


def test_a_fixed_user_pool_decides_the_user_and_refuses_another(owner_client, cluster_row, redis_server):
    pool = ConnectionPool.objects.create(
        cluster=cluster_row, name="fixed-pool", database="appdb", user="app", size=20
    )
    tab = owner_client.get(reverse("benchmarks:tab", args=[cluster_row.pk])).content.decode()
    assert (
        f'data-pool-users="{{&quot;{pool.pk}&quot;: &quot;app&quot;}}"' in tab
    )  # the page disables the select

    response = _launch(owner_client, cluster_row, target=str(pool.pk), database="", user="doadmin")
    assert response.status_code == 200 and "HX-Redirect" not in response
    assert field_errors(response.content.decode(), "user") == [
        "The pool “fixed-pool” always logs in as “app”."
    ]
    assert not BenchmarkRun.objects.exists()

    # The disabled select posts no user: the pool's own.
    data = {key: value for key, value in RUN.items() if key != "user"}
    owner_client.post(
        reverse("benchmarks:run-launch", args=[cluster_row.pk]),
        {**data, "target": str(pool.pk), "database": ""},
        headers=HTMX,
    )
    assert BenchmarkRun.objects.get().user == "app"


def test_warnings_show_clients_above_the_scale_and_above_the_direct_limit(owner_client, cluster_row):
    DataSet.objects.create(cluster=cluster_row, database="defaultdb", scale=10, status=JobStatus.SUCCEEDED)
    url = reverse("benchmarks:run-check", args=[cluster_row.pk])
    page = owner_client.post(url, {**RUN, "clients": "150"}, headers=HTMX).content.decode()
    assert "150 clients on a scale of 10" in page
    assert "the server accepts at most 97 connections" in page and "will not start" in page
    page = owner_client.post(url, {**RUN, "clients": "5"}, headers=HTMX).content.decode()
    assert "No warnings for these settings." in page
    assert not BenchmarkRun.objects.exists(), "checking never launches"


def test_the_tab_shows_empty_states_and_the_forms(owner_client, cluster_row):
    page = owner_client.get(reverse("benchmarks:tab", args=[cluster_row.pk])).content.decode()
    assert "No data set yet." in page and "No run yet." in page
    assert 'id="run-form"' in page and 'id="init-form"' in page and 'id="sweep-form"' in page
    assert 'hx-post="{}"'.format(reverse("benchmarks:run-check", args=[cluster_row.pk])) in page
    assert "js/bench-form.js" in page


@pytest.mark.parametrize(("plan", "clients"), [("db-s-1vcpu-1gb", 11), ("db-s-4vcpu-8gb", 50)])
def test_the_empty_history_suggests_clients_the_plan_allows(owner, client, plan, clients):
    """A plan of 22 client connections was told to start with 50 clients, which it refuses."""
    cluster = make_cluster_row(owner, name="db-plan", plan_slug=plan)
    client.force_login(owner)
    page = client.get(reverse("benchmarks:tab", args=[cluster.pk])).content.decode()
    assert f"e.g. {clients} clients directly for 60 seconds" in page


# --- data sets ----------------------------------------------------------------------------------------


def test_init_errors_are_inline_and_queue_nothing(owner_client, cluster_row):
    url = reverse("benchmarks:dataset-init", args=[cluster_row.pk])
    response = owner_client.post(url, {"database": "defaultdb", "scale": "0"}, headers=HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    assert page.lstrip().startswith('<section id="bench-datasets"')
    assert "greater than or equal to 1" in page
    page = owner_client.post(url, {"database": "defaultdb", "scale": "1", "init_steps": "dxz"}, headers=HTMX)
    assert "Unknown initialization step" in page.content.decode()
    assert not DataSet.objects.exists()


def test_init_queues_a_data_set_whose_bar_polls_until_it_is_done(owner_client, cluster_row, redis_server):
    url = reverse("benchmarks:dataset-init", args=[cluster_row.pk])
    page = owner_client.post(url, {"database": "appdb", "scale": "3"}, headers=HTMX).content.decode()
    dataset = DataSet.objects.get()
    assert dataset.database == "appdb" and dataset.scale == 3 and dataset.status == JobStatus.QUEUED
    assert "Initialising at scale 3" in page and "every 1s" in page
    DataSet.objects.filter(pk=dataset.pk).update(status=JobStatus.RUNNING, progress=40)
    live = owner_client.get(
        reverse("benchmarks:datasets", args=[cluster_row.pk]), headers=HTMX
    ).content.decode()
    assert "40 %" in live and "every 1s" in live
    DataSet.objects.filter(pk=dataset.pk).update(
        status=JobStatus.SUCCEEDED, progress=100, size_bytes=45_000_000, duration_s=2.5
    )
    live = owner_client.get(
        reverse("benchmarks:datasets", args=[cluster_row.pk]), headers=HTMX
    ).content.decode()
    assert "every 1s" not in live and "Ready" in live and "42.9\xa0MB" in live and "2.5 s" in live


def test_a_failed_init_shows_its_error(owner_client, cluster_row):
    DataSet.objects.create(
        cluster=cluster_row, database="appdb", scale=5, status=JobStatus.FAILED, error_message="disk full"
    )
    page = owner_client.get(reverse("benchmarks:tab", args=[cluster_row.pk])).content.decode()
    assert "Initialisation failed" in page and "disk full" in page


# --- sweeps --------------------------------------------------------------------------------------------


def test_the_sweep_form_plans_every_run(owner_client, cluster_row, redis_server):
    pool = ConnectionPool.objects.create(cluster=cluster_row, name="test-pool", database="appdb", size=97)
    data = {
        "clients_list": "10, 50,100,150",
        "targets": ["direct", str(pool.pk)],
        "database": "defaultdb",
        "repeats": "2",
        "duration": "5",
        "script": "select-only",
        "query_mode": "simple",
        "name": "scan",
    }
    response = owner_client.post(reverse("benchmarks:sweep-launch", args=[cluster_row.pk]), data)
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/sweeps/{sweep.pk}/")
    runs = list(sweep.runs.order_by("sweep_index"))
    assert len(runs) == 4 * 2 * 2
    assert [(r.clients, r.pool_name) for r in runs[:4]] == [
        (10, ""),
        (10, ""),
        (10, "test-pool"),
        (10, "test-pool"),
    ]
    assert {r.script for r in runs} == {"select-only"} and {r.duration_s for r in runs} == {5}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"clients_list": "10, x"}, "whole numbers"),
        ({"clients_list": ""}, "This field is required."),
        ({"targets": []}, "Choose at least one target."),
        ({"repeats": "0"}, "greater than or equal to 1"),
    ],
)
def test_sweep_errors_are_inline(owner_client, cluster_row, changes, message):
    data = {"clients_list": "10,50", "targets": ["direct"], "database": "defaultdb", "repeats": "1",
            "duration": "5", "script": "tpcb-like", "query_mode": "simple", **changes}  # fmt: skip
    response = owner_client.post(reverse("benchmarks:sweep-launch", args=[cluster_row.pk]), data)
    assert response.status_code == 200 and message in response.content.decode()
    assert not Sweep.objects.exists() and not BenchmarkRun.objects.exists()
