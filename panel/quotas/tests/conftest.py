"""Fixtures of the quota tests: a cluster row (no server behind it)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row


@pytest.fixture
def cluster_row(owner: User) -> Cluster:
    return make_cluster_row(owner)
