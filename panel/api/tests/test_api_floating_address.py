"""The database object's ``floating_address``: the host of the operator's floating address, null
without one (standbys/services/vip.py sets it; docs/managed-api.md)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row

pytestmark = pytest.mark.django_db


def test_the_api_database_object_has_the_floating_address(owner: User, make_token: MakeToken) -> None:
    cluster_row = make_cluster_row(owner)
    token = make_token(owner, Scope.READ)

    def got() -> object:
        body = Client().get(f"/v2/databases/{cluster_row.pk}", headers=bearer(token)).content
        return json.loads(body)["database"]["floating_address"]

    assert got() is None
    Cluster.objects.filter(pk=cluster_row.pk).update(floating_address="198.18.0.200/24")
    assert got() == "198.18.0.200"
