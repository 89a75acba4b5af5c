"""A cluster's floating address where people see it: the connection details box says it when one
is set (the API's database object: panel/api/tests/test_api_floating_address.py), and ``manage.py cluster floating-address`` and ``manage.py
node vip-interface`` show, refuse and set it (standbys/services/vip.py does the work: test_services_vip.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from panel.clusters.models import Cluster, Node
from panel.clusters.services import nodes

pytestmark = pytest.mark.django_db


def test_the_connection_box_says_the_floating_address_when_one_is_set(
    owner_client: Client, cluster_row: Cluster
) -> None:
    url = reverse("clusters:connection", args=[cluster_row.pk])
    assert "floating-address-note" not in owner_client.get(url).content.decode()
    Cluster.objects.filter(pk=cluster_row.pk).update(floating_address="198.18.0.200/24")
    box = owner_client.get(url).content.decode()
    assert "floating-address-note" in box
    assert "Floating address: <code>198.18.0.200</code> moves to the primary's node." in box
    german = owner_client.get(url, headers={"accept-language": "de"}).content.decode()
    assert "Floating-Adresse: <code>198.18.0.200</code>" in german


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_the_command_shows_refuses_and_needs_one_choice(cluster_row: Cluster) -> None:
    assert (
        run("cluster", "floating-address", cluster_row.name) == f"{cluster_row.name}: floating address none\n"
    )
    with pytest.raises(CommandError, match="not both"):
        run("cluster", "floating-address", cluster_row.name, "198.18.0.200/24", "--none")
    with pytest.raises(CommandError, match=r"this cluster has none\. \(address\)"):
        run("cluster", "floating-address", cluster_row.name, "198.18.0.200/24")
    with pytest.raises(CommandError, match="no prefix length"):
        run("cluster", "floating-address", cluster_row.name, "198.18.0.200")
    assert run("cluster", "floating-address", cluster_row.name, "--none").endswith("floating address none\n")


def test_a_nodes_interface_is_set_or_refused(db: None) -> None:
    node = nodes.this_node()
    assert run("node", "vip-interface", node.name, "bond0.100") == (
        f"Node {node.name}: floating addresses go on bond0.100.\n"
    )
    assert Node.objects.get(pk=node.pk).vip_interface == "bond0.100"
    with pytest.raises(CommandError, match="loopback"):
        run("node", "vip-interface", node.name, "lo")
    with pytest.raises(CommandError, match="No node named"):
        run("node", "vip-interface", "nowhere", "eth0")


def test_a_new_node_takes_the_interface_of_the_setting(db: None, settings: object) -> None:
    settings.PANEL_VIP_INTERFACE = "ens18"  # type: ignore[attr-defined]
    node = Node.objects.create(
        name="node-new",
        address="198.18.0.90",
        port_first=27000,
        port_last=27099,
        data_dir="/srv",
        ram_bytes=1,
        vcpus=1,
    )
    assert node.vip_interface == "ens18"


def test_a_setting_that_is_no_interface_name_stops_the_panel_at_start(settings: object) -> None:
    from panel.clusters.checks import check_vip_interface

    settings.PANEL_VIP_INTERFACE = "eth0; reboot"  # type: ignore[attr-defined]
    errors = check_vip_interface(None)
    assert [e.id for e in errors] == ["clusters.E013"] and "not a network interface name" in errors[0].msg
    settings.PANEL_VIP_INTERFACE = "eth0"  # type: ignore[attr-defined]
    assert check_vip_interface(None) == []
