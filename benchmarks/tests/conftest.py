"""The cluster the integration modules of runs share (a test module's own ``cluster`` fixture
takes precedence over this one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks import services
from benchmarks.models import JobStatus
from panel.clusters.models import Cluster
from panel.pools import services as pool_services


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
