"""Creating a cluster with standbys: its members recorded with ports of their own, and the
refusals (too many nodes, standbys on a 1 GB plan) that leave nothing behind."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterMember
from panel.clusters.services.ports import etcd_ports
from panel.core.errors import ServiceError

pytestmark = pytest.mark.django_db


def test_a_three_member_cluster_gets_a_port_and_a_rest_port_per_member(owner):
    cluster = services.create_cluster(
        owner, name="db-ha", plan_slug="db-s-1vcpu-2gb", num_nodes=3, enqueue=False
    )
    members = list(cluster.members.order_by("name"))
    assert cluster.num_nodes == 3
    assert [m.name for m in members] == ["member-1", "member-2", "member-3"]
    ports = [cluster.port, cluster.pooler_port, *(p for m in members for p in (m.port, m.rest_port))]
    assert len(set(ports)) == 8, ports
    assert not set(ports) & set(etcd_ports(cluster.node))
    assert len({m.data_dir for m in members}) == 3
    # A second cluster's ports do not collide with the members'.
    other = services.create_cluster(owner, name="db-one", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    assert not {other.port, other.pooler_port} & set(ports)
    assert other.num_nodes == 1 and not other.members.exists()


@pytest.mark.parametrize(
    ("plan", "num_nodes", "code", "words"),
    [
        ("db-s-1vcpu-2gb", 4, "cluster.num_nodes_range", "1 to 3 nodes"),
        ("db-s-1vcpu-2gb", 0, "cluster.num_nodes_range", "1 to 3 nodes"),
        ("db-s-1vcpu-1gb", 2, "cluster.standbys_need_larger_plan", "2 GB of RAM or more"),
    ],
)
def test_it_refuses_bad_member_counts_and_creates_nothing(owner, plan, num_nodes, code, words):
    with pytest.raises(ServiceError) as refused:
        services.create_cluster(owner, name="db-ha", plan_slug=plan, num_nodes=num_nodes, enqueue=False)
    assert (refused.value.code, refused.value.field) == (code, "num_nodes")
    assert words in str(refused.value)
    assert not Cluster.objects.exists() and not ClusterMember.objects.exists()


def test_the_command_line_refuses_four_nodes(owner):
    with pytest.raises(CommandError, match="1 to 3 nodes"):
        call_command(
            "cluster",
            "create",
            "--name",
            "db-ha",
            "--plan",
            "db-s-1vcpu-2gb",
            "--num-nodes",
            "4",
            "--owner",
            owner.username,
        )
    assert not Cluster.objects.exists()


def test_the_form_shows_the_plan_refusal_next_to_the_field(owner_client):
    response = owner_client.post(
        "/clusters/new/",
        {"name": "db-ha", "plan": "db-s-1vcpu-1gb", "version": "15", "num_nodes": "3"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert "2 GB of RAM or more" in response.content.decode()
    assert not Cluster.objects.exists()
