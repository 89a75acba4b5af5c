"""A collection cycle reads clusters side by side (PANEL_COLLECT_CONCURRENCY): clusters that never
answer cost the cycle about one cluster's budget, not the sum of theirs, and a healthy cluster
beside them is still read.

The hung clusters are servers that accept a connection and never say a word: a Unix socket where
the cluster's PostgreSQL would listen, with a backlog and nobody accepting, as a SIGSTOPped
postmaster looks to a client (the kernel queues the connection; no answer ever comes).
"""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from panel import crypto
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.insights import services
from panel.insights.engine import collector

pytestmark = pytest.mark.integration

HUNG = 6  # more than the 4 threads a cycle had before the setting


@pytest.fixture
def hung(owner: User) -> Iterator[list[Cluster]]:
    clusters, listeners = [], []
    try:
        for index in range(HUNG):
            cluster = make_cluster_row(
                owner, name=f"db-hung-{index}", plan_slug="db-s-1vcpu-1gb", port=26950 + index
            )
            cluster.monitor_password_encrypted = crypto.encrypt("monitor-password-1")
            cluster.save(update_fields=["monitor_password_encrypted"])
            cluster.socket_dir.mkdir(parents=True)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(cluster.socket_dir / f".s.PGSQL.{cluster.port}"))
            listener.listen(16)
            listeners.append(listener)
            clusters.append(cluster)
        yield clusters
    finally:
        for listener in listeners:
            listener.close()
        for cluster in clusters:
            shutil.rmtree(cluster.data_root, ignore_errors=True)


def test_hung_clusters_cost_a_cycle_one_budget_not_the_sum(
    shared_local_cluster: Cluster, hung: list[Cluster], settings: Any
) -> None:
    healthy = shared_local_cluster
    settings.PANEL_COLLECT_CONCURRENCY = HUNG + 2
    started = time.monotonic()
    alone = collector.collect(services.target_for(hung[0]))
    one = time.monotonic() - started
    assert alone.up["postgres"] is False  # it waited for an answer that never came

    started = time.monotonic()
    snaps = services.collect_all()
    cycle = time.monotonic() - started

    assert all(snaps[str(c.pk)].up["postgres"] is False for c in hung)
    assert snaps[str(healthy.pk)].up["postgres"] is True, snaps[str(healthy.pk)].errors
    # One after another (or four at a time, as before) this is HUNG (or 2) times ``one``.
    assert cycle / one < 1.6, (cycle, one)
