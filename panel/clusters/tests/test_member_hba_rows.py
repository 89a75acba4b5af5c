"""The members' pg_hba.conf as the rows make it (no server runs): a cluster with a standby on another
node lets that node's addresses stream and rewind, and TCP clients from the nodes holding its
members only (HAProxy, the cluster's entry on each of them, reaches the members from there: issue
39); when the member leaves, its node's lines go."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from panel.clusters.engine import isolation
from panel.clusters.models import Cluster
from panel.clusters.services import nodes
from panel.clusters.services.create import add_member
from panel.clusters.tests.conftest import make_cluster_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def spread(owner: User) -> Iterator[Cluster]:
    a = nodes.add_node(
        "hba-a",
        address="10.0.0.1",
        ports=(27100, 27119),
        data_dir=str(settings.PANEL_DATA_DIR),
        ram_gb=8,
        vcpus=4,
    )
    b = nodes.add_node(
        "hba-b",
        address="10.0.0.2",
        private_address="192.168.7.2",
        ports=(27120, 27139),
        data_dir=str(settings.PANEL_DATA_DIR),
        ram_gb=8,
        vcpus=4,
    )
    cluster = make_cluster_row(owner, name="db-hba", node=a, num_nodes=2)
    add_member(cluster, "member-1", a)
    add_member(cluster, "member-2", b)
    yield cluster
    shutil.rmtree(cluster.data_root, ignore_errors=True)


def _lines(cluster: Cluster) -> list[str]:
    return [" ".join(line.split()) for line in cluster.hba_path.read_text().splitlines()]


CERT_TOO = "scram-sha-256 clientcert=verify-full"  # the member CA's certificate and the password


def test_a_standby_on_another_node_may_stream_and_rewind_from_its_addresses_only(spread: Cluster) -> None:
    isolation.write_auth_config(spread)
    lines = _lines(spread)
    for network in ("10.0.0.1/32", "10.0.0.2/32", "192.168.7.2/32"):
        assert f"hostssl replication pgpanel,pgpanel_member {network} {CERT_TOO}" in lines
        assert f"hostssl postgres pgpanel,pgpanel_member {network} {CERT_TOO}" in lines
    clients = [line for line in lines if line.startswith("hostssl all all ")]
    assert clients == [
        "hostssl all all 127.0.5.1/32 scram-sha-256",  # HAProxy's own address
        "hostssl all all 127.0.0.1/32 scram-sha-256",
        "hostssl all all 10.0.0.1/32 scram-sha-256",
        "hostssl all all 10.0.0.2/32 scram-sha-256",  # the entry on B
        "hostssl all all 192.168.7.2/32 scram-sha-256",
    ]
    assert not any("0.0.0.0/0" in line or " all scram" in line for line in lines)

    spread.trusted_sources.create(value="203.0.113.7")  # HAProxy's to apply: no line changes
    isolation.write_auth_config(spread)
    assert _lines(spread) == lines

    spread.members.get(name="member-2").delete()  # the member left: its node is no longer let in
    isolation.write_auth_config(spread)
    assert not any("10.0.0.2" in line or "192.168.7.2" in line for line in _lines(spread))
    assert f"hostssl replication pgpanel,pgpanel_member 10.0.0.1/32 {CERT_TOO}" in _lines(spread)
