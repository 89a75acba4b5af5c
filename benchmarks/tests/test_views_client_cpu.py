"""Where a run's client ran and what CPU it used, on the run, compare and sweep pages (issue 30):
rows written directly in the database, as the executor leaves them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.lib.client_cpu import client_cores, is_client_bound
from benchmarks.lib.sweep_grid import Observation, summarise
from benchmarks.models import BenchmarkRun, Sweep
from benchmarks.services.sweep_report import sweep_report
from benchmarks.tests.test_views_pages import make_run, run_url

CLIENT = {
    "node": "node-a",
    "cgroup": "/pgpanel-clients",
    "memory_bytes": 1024**3,
    "cpu_weight": 512,
    "weight_of_default": 1024,
}


def test_client_cores_and_the_client_bound_rule() -> None:
    assert client_cores({}) is None and client_cores({**CLIENT, "cpu_s": None, "wall_s": 20}) is None
    assert client_cores({"cpu_s": 10.0, "wall_s": 20.0}) == 0.5
    assert not is_client_bound(0.5, threads=2, cpu_count=2)
    assert is_client_bound(0.95, threads=1, cpu_count=2)  # one thread: one core at most
    assert is_client_bound(1.8, threads=8, cpu_count=2)  # never more than the machine's CPUs
    assert not is_client_bound(None, threads=1, cpu_count=2)


def test_the_run_page_says_where_the_client_ran_and_its_cpu(owner_client, cluster_row) -> None:
    run = make_run(cluster_row, client={**CLIENT, "cpu_s": 12.0, "wall_s": 60.0}, threads=2)
    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    assert "bench-client" in page and "/pgpanel-clients" in page and "node-a" in page
    assert "1.0\xa0GB" in page and "CPU weight 512 of 1024" in page
    assert "Client CPU: 0.20 cores on average (12.0 s of CPU in 60.0 s)." in page
    assert "bench-client-bound" not in page


def test_a_client_bound_run_gets_a_hint_in_both_languages(owner_client, cluster_row) -> None:
    run = make_run(cluster_row, client={**CLIENT, "cpu_s": 58.0, "wall_s": 60.0}, threads=1, clients=1)
    url = run_url("benchmarks:run-detail", run)
    page = owner_client.get(url).content.decode()
    assert "bench-client-bound" in page and "this TPS is the client's limit" in page
    german = owner_client.get(url, headers={"accept-language": "de"}).content.decode()
    assert "diese TPS sind die Grenze des Clients" in german


def test_a_run_without_a_cgroup_says_so(owner_client, cluster_row) -> None:
    run = make_run(cluster_row, client={"node": "node-a", "cgroup": "", "cpu_s": 1.0, "wall_s": 10.0})
    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    assert "in the worker's own cgroup" in page


def test_compare_shows_client_cpu_beside_tps(owner_client, cluster_row) -> None:
    runs = [
        make_run(cluster_row, label="a", client={**CLIENT, "cpu_s": 6.0, "wall_s": 60.0}),
        make_run(cluster_row, label="b", client={**CLIENT, "cpu_s": 117.0, "wall_s": 60.0}),
    ]
    url = reverse("benchmarks:compare", args=[cluster_row.pk])
    page = owner_client.get(url, {"run": [str(run.pk) for run in runs]}).content.decode()
    assert "Client CPU (cores)" in page and ">0.10</td>" in page
    assert "client-bound: this TPS is the client’s limit" in page  # 1.95 cores of 2 threads


@pytest.mark.django_db
def test_a_sweeps_cells_carry_the_clients_median_cpu(cluster_row) -> None:
    grid = summarise([Observation("direct", 10, 100.0, client_cores=0.4), Observation("direct", 10, 90.0)])
    assert grid.cell("direct", 10).client_cores == 0.4  # type: ignore[union-attr]
    sweep = Sweep.objects.create(cluster=cluster_row, clients_list=[10], targets=[{"kind": "direct"}])
    for cores in (0.3, 0.5, 0.4):
        make_run(cluster_row, sweep=sweep, clients=10, client={**CLIENT, "cpu_s": cores * 60, "wall_s": 60.0})
    assert BenchmarkRun.objects.filter(sweep=sweep).count() == 3
    report = sweep_report(sweep)
    assert report["rows"][0]["cells"][0]["client_cores"] == 0.4
