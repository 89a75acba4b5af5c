"""Who may see benchmarks: every page, partial, JSON endpoint, export and action answers 404 to
outsiders, and their POSTs change nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkRun, DataSet, RunStatus, Sweep
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row

HTMX = {"HX-Request": "true"}
CLUSTER_GETS = ["benchmarks:tab", "benchmarks:datasets", "benchmarks:history", "benchmarks:compare",
                "benchmarks:compare-data"]  # fmt: skip
POST_ONLY = [
    "benchmarks:run-launch",
    "benchmarks:run-check",
    "benchmarks:dataset-init",
    "benchmarks:sweep-launch",
]
RUN_GETS = ["benchmarks:run-detail", "benchmarks:run-samples"]
CLUSTER_POSTS = [
    ("benchmarks:run-launch", {"target": "direct", "database": "defaultdb", "clients": "2", "duration": "5",
                               "progress": "1", "script": "tpcb-like", "query_mode": "simple"}),
    ("benchmarks:run-check", {"target": "direct", "database": "defaultdb", "clients": "500", "duration": "5",
                              "progress": "1", "script": "tpcb-like", "query_mode": "simple"}),
    ("benchmarks:dataset-init", {"database": "defaultdb", "scale": "1"}),
    ("benchmarks:sweep-launch", {"clients_list": "1,2", "targets": ["direct"], "database": "defaultdb",
                                 "repeats": "1", "duration": "5", "script": "tpcb-like", "query_mode": "simple"}),
]  # fmt: skip


@pytest.fixture
def run(cluster_row: Cluster) -> BenchmarkRun:
    return make_run(cluster_row, samples=3, status=RunStatus.RUNNING, summary=None, finished_at=None)


@pytest.fixture
def sweep(cluster_row: Cluster) -> Sweep:
    sweep = Sweep.objects.create(cluster=cluster_row, clients_list=[1], targets=[{"kind": "direct"}])
    make_run(cluster_row, sweep=sweep)
    return sweep


def _unchanged(run: BenchmarkRun) -> None:
    assert BenchmarkRun.objects.count() == 1 and not Sweep.objects.exists() and not DataSet.objects.exists()
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


@pytest.mark.parametrize("name", CLUSTER_GETS)
def test_it_404s_for_outsider_on_every_cluster_level_url(other_client, run, name):
    url = reverse(name, args=[run.cluster_id])
    assert other_client.get(url, {"run": str(run.pk)}, headers=HTMX).status_code == 404


@pytest.mark.parametrize("client_name", ["owner_client", "other_client"])
@pytest.mark.parametrize("name", POST_ONLY)
def test_the_launch_and_init_actions_answer_only_post(request, run, name, client_name):
    client = request.getfixturevalue(client_name)
    response = client.get(reverse(name, args=[run.cluster_id]), headers=HTMX)
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    _unchanged(run)


@pytest.mark.parametrize("name", RUN_GETS)
def test_it_404s_for_outsider_on_the_run_page_partial_and_data(other_client, run, name):
    url = reverse(name, kwargs={"cluster_id": run.cluster_id, "run_id": run.pk})
    assert other_client.get(url).status_code == 404
    assert other_client.get(url, headers=HTMX).status_code == 404


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_it_404s_for_outsider_on_exports(other_client, run, fmt):
    url = reverse(
        "benchmarks:run-export", kwargs={"cluster_id": run.cluster_id, "run_id": run.pk, "fmt": fmt}
    )
    response = other_client.get(url)
    assert response.status_code == 404 and b"2001.0" not in response.content


@pytest.mark.parametrize("name", ["benchmarks:sweep-detail", "benchmarks:sweep-data"])
def test_it_404s_for_outsider_on_sweeps(other_client, sweep, name):
    url = reverse(name, kwargs={"cluster_id": sweep.cluster_id, "sweep_id": sweep.pk})
    assert other_client.get(url).status_code == 404


def test_outsider_cannot_cancel_a_run(other_client, run):
    url = reverse("benchmarks:run-cancel", kwargs={"cluster_id": run.cluster_id, "run_id": run.pk})
    assert other_client.post(url, headers=HTMX).status_code == 404
    _unchanged(run)


@pytest.mark.parametrize(("name", "data"), CLUSTER_POSTS)
def test_outsider_posts_404_and_change_nothing(other_client, run, name, data):
    response = other_client.post(reverse(name, args=[run.cluster_id]), data, headers=HTMX)
    assert response.status_code == 404
    _unchanged(run)


def test_outsider_cannot_compare_someone_elses_runs_from_his_own_cluster(other_client, other_user, run):
    own = make_cluster_row(other_user, "db-bob", port=26920, pooler_port=26921)
    mine = make_run(own)
    url = reverse("benchmarks:compare-data", args=[own.pk])
    assert other_client.get(url, {"run": [str(mine.pk), str(run.pk)]}).status_code == 400


def test_a_run_is_only_reachable_under_its_own_cluster(owner_client, owner, run):
    second = make_cluster_row(owner, "db-second", port=26910, pooler_port=26911)
    url = reverse("benchmarks:run-detail", kwargs={"cluster_id": second.pk, "run_id": run.pk})
    assert owner_client.get(url).status_code == 404


def test_staff_may_see_every_run(staff_user, run):
    from django.test import Client

    client = Client()
    client.force_login(staff_user)
    url = reverse("benchmarks:run-samples", kwargs={"cluster_id": run.cluster_id, "run_id": run.pk})
    assert client.get(url).status_code == 200
