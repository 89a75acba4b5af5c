"""Issue 38: a run through a pool that is clearly slower than the direct run says why on its page,
from what PgBouncer showed during the run (real pgbench through a real pool of 2 for 10 clients)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from benchmarks import services
from benchmarks.lib.pgbench_command import RunOptions
from benchmarks.models import BenchmarkRun, RunStatus
from panel.clusters.models import Cluster
from panel.pools import services as pool_services

pytestmark = pytest.mark.integration

# Each transaction waits 10 ms on the server: ten direct clients make about 1,000 TPS, ten clients
# sharing two server connections at most 200, whatever the machine.
SLEEPY = "SELECT pg_sleep(0.01);\n"


def run_now(on: Cluster, **kwargs: object) -> BenchmarkRun:
    options = RunOptions(clients=10, threads=2, duration_s=5)
    run = services.launch_run(on, options=options, custom_script=SLEEPY, enqueue=False, **kwargs)  # type: ignore[arg-type]
    return services.execute_run(run.pk, wait_turn_s=30)


def page(owner: User, name: str, **kwargs: object) -> str:
    client = Client()
    client.force_login(owner)
    response = client.get(reverse(name, kwargs=kwargs), headers={"accept-language": "en"})
    assert response.status_code == 200
    return response.content.decode()


def test_a_pool_of_2_for_10_clients_says_on_its_page_that_clients_waited(
    cluster: Cluster,  # noqa: F811
    owner: User,
) -> None:
    direct = run_now(cluster)
    assert direct.status == RunStatus.SUCCEEDED, (direct.error_message, direct.first_error)
    assert direct.pooler == {}
    pool = pool_services.create_pool(cluster, "small", "defaultdb", "", "transaction", 2)
    pooled = run_now(cluster, pool=pool)
    assert pooled.status == RunStatus.SUCCEEDED, (pooled.error_message, pooled.first_error)
    assert pooled.tps is not None and direct.tps is not None and pooled.tps < 0.5 * direct.tps

    # Sampled once a second while pgbench ran: 8 of the 10 clients queue for the 2 servers.
    pooler = pooled.pooler
    assert pooler["pool_size"] == 2 and pooler["clients"] == 10
    assert 3 <= len(pooler["samples"]) <= 7
    summary = pooler["summary"]
    assert summary["waiting_share"] >= 0.5 and summary["waiting_max"] >= 6 and summary["servers_max"] <= 2
    assert summary["cpu_avg"] is not None and summary["cpu_avg"] < 85  # the pooler is not the limit
    assert services.run_record(pooled)["pooler"] == summary and services.run_record(direct)["pooler"] is None
    shown = page(owner, "benchmarks:run-detail", cluster_id=cluster.pk, run_id=pooled.pk)
    assert "bench-pool-slowdown" in shown
    assert "Clients waited for a server: the pool has 2 server connections for 10 clients" in shown
    assert 'data-reason="pooler.clients_waiting"' in shown and "pooler.cpu_bound" not in shown
    assert f'data-baseline="{direct.pk}"' in shown

    german = Client()
    german.force_login(owner)
    url = reverse("benchmarks:run-detail", kwargs={"cluster_id": cluster.pk, "run_id": pooled.pk})
    assert (
        "Clients warteten auf einen Server"
        in german.get(url, headers={"accept-language": "de"}).content.decode()
    )

    # The direct run's page says nothing of the kind; the compare page says it for the pool run.
    assert "bench-pool-slowdown" not in page(
        owner, "benchmarks:run-detail", cluster_id=cluster.pk, run_id=direct.pk
    )
    client = Client()
    client.force_login(owner)
    compare = client.get(
        reverse("benchmarks:compare", kwargs={"cluster_id": cluster.pk}), {"run": [direct.pk, pooled.pk]}
    ).content.decode()
    assert f'data-run="{pooled.pk}" data-baseline="{direct.pk}"' in compare
