"""The clusters the modules share: a cluster row for the pages, and the real cluster the
integration modules of runs share (a test module's own ``cluster`` fixture takes precedence over
this one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from benchmarks import services
from benchmarks.models import JobStatus
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.pools import services as pool_services


@pytest.fixture
def cluster_row(owner: User) -> Cluster:
    """A 4 GB-plan cluster row (97 connections for pools, 97 for doadmin directly); nothing runs
    behind it."""
    return make_cluster_row(owner)


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    """A 1 GB cluster (22 connections for non-superusers) with pgbench's tables at scale 1; the
    pools' PgBouncer stopped afterwards."""
    dataset = services.init_dataset(shared_local_cluster, "defaultdb", 1, enqueue=False)
    dataset = services.execute_init(dataset.pk)
    assert dataset.status == JobStatus.SUCCEEDED, dataset.error_message
    assert dataset.progress == 100 and dataset.size_bytes and dataset.size_bytes > 1_000_000
    assert dataset.duration_s is not None and "pgbench -i" in dataset.command_display
    yield shared_local_cluster
    pool_services.stop_pgbouncer(shared_local_cluster)
