"""Fixtures of the insights tests that need no running server: a cluster row and stored points."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.insights.engine.collector import Snapshot


@pytest.fixture
def cluster_row(owner: User) -> Cluster:
    return make_cluster_row(owner, name="db-metrics", plan_slug="db-s-1vcpu-1gb")


def snapshot(at: dt.datetime, **gauges: float) -> Snapshot:
    """A successful collection holding ``gauges`` (``pool_cl_waiting__test_pool`` → pool=test-pool)."""
    snap = Snapshot(at=at, up={"postgres": True, "host": True})
    for name, value in gauges.items():
        metric, _sep, pool = name.partition("__")
        snap.gauge(metric, f"pool={pool.replace('_', '-')}" if pool else "", value)
    return snap
