"""A cluster's floating address (standbys/services/vip.py): the refusals, and the follower
(standbys/engine/vip_follow.py) kept on this node for its member here, really started. Its etcd here is a
port nobody listens on (so it never finds a leader key and never adds the address to an interface);
the address really moving between nodes is tests/test_netns_vip.py's."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from django.contrib.auth.models import User

from panel import crypto
from panel.clusters.models import Cluster, ClusterMember, EtcdMember, EtcdMemberState, Node
from panel.clusters.services import nodes
from panel.clusters.standbys.engine import vip as engine
from panel.clusters.standbys.services import ha_files, vip
from panel.clusters.tests.conftest import make_cluster_row
from panel.core.errors import ServiceError

pytestmark = pytest.mark.django_db


def other_node(name: str = "node-b", address: str = "198.18.0.77") -> Node:
    """A node whose agent never sent a heartbeat (its members are told, not waited for)."""
    return Node.objects.create(
        name=name,
        address=address,
        port_first=27000,
        port_last=27099,
        data_dir="/srv/b",
        ram_bytes=2**33,
        vcpus=4,
    )


def with_standbys(owner: User, *, nodes_of: list[Node], name: str = "db-vip", port: int = 26900) -> Cluster:
    here = nodes.this_node()
    cluster = make_cluster_row(
        owner,
        name=name,
        port=port,
        pooler_port=port + 1,
        num_nodes=len(nodes_of),
        node=here,
        plan_slug="db-s-1vcpu-2gb",
        superuser_password_encrypted=crypto.encrypt("not-used-here"),
    )
    for index, node in enumerate(nodes_of, start=1):
        ClusterMember.objects.create(
            cluster=cluster,
            name=f"member-{index}",
            node=node,
            port=port + 50 + 2 * index,
            rest_port=port + 51 + 2 * index,
            data_dir=f"{cluster.pgdata}-{index}",
        )
    return cluster


def refusal(cluster: Cluster, address: str) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        vip.set_floating_address(cluster, address)
    assert caught.value.field == "address"
    return caught.value


def test_an_address_that_is_not_an_ipv4_host_is_refused(owner: User) -> None:
    cluster = with_standbys(owner, nodes_of=[nodes.this_node(), other_node()])
    error = refusal(cluster, "198.18.0.200")
    assert error.code == "cluster.floating_address_invalid" and "prefix length" in error.message
    assert refusal(cluster, "198.18.0.0/24").code == "cluster.floating_address_invalid"
    cluster.refresh_from_db()
    assert cluster.floating_address == ""


def test_a_cluster_without_standbys_is_refused(cluster_row: Cluster) -> None:
    assert refusal(cluster_row, "198.18.0.200/24").code == "cluster.floating_address_needs_standbys"


def test_members_sharing_a_node_are_refused(owner: User) -> None:
    here = nodes.this_node()
    cluster = with_standbys(owner, nodes_of=[here, here])
    assert refusal(cluster, "198.18.0.200/24").code == "cluster.floating_address_shared_node"


def test_an_address_another_cluster_or_a_node_has_is_refused(owner: User) -> None:
    node_b = other_node()
    first = with_standbys(owner, nodes_of=[nodes.this_node(), node_b], name="db-first")
    Cluster.objects.filter(pk=first.pk).update(floating_address="198.18.0.200/24")
    second = with_standbys(
        owner, nodes_of=[nodes.this_node(), other_node("node-c", "198.18.0.78")], name="db-2", port=26910
    )
    assert refusal(second, "198.18.0.200/25").code == "cluster.floating_address_taken"
    assert refusal(second, "198.18.0.77/24").code == "cluster.floating_address_taken"  # node-b's


@pytest.fixture
def etcd_nowhere() -> Iterator[None]:
    """This node's etcd member row on a loopback port nobody listens on."""
    EtcdMember.objects.all().delete()
    EtcdMember.objects.create(
        name=nodes.this_node().name,
        host="127.0.0.1",
        client_port=9,
        peer_port=10,
        state=EtcdMemberState.RUNNING,
    )
    yield


def an_interface() -> str:
    """One of this machine's interfaces that is not loopback (refused: no gratuitous ARP on it):
    its follower never finds a leader key (``etcd_nowhere``), so it never adds the address."""
    names = [name for _index, name in socket.if_nameindex() if name != "lo"]
    assert names, "this machine has no network interface but loopback"
    return names[0]


@pytest.fixture
def stop_after() -> Iterator[list[Path]]:
    configs: list[Path] = []
    yield configs
    for config in configs:  # (a file left would be another test's reconciler round's to remove)
        engine.stop(config, None, "")
        config.unlink(missing_ok=True)


@pytest.fixture
def member_here(owner: User, etcd_nowhere: None, stop_after: list[Path]) -> tuple[Cluster, Path]:
    """A cluster with standbys whose member-1 is on this node (an interface for floating addresses
    set) and member-2 on node-b; member-1's follower configuration, stopped after the test."""
    here = nodes.this_node()
    Node.objects.filter(pk=here.pk).update(vip_interface=an_interface())
    cluster = with_standbys(owner, nodes_of=[here, other_node()])
    config = vip.config_path(cluster.members.get(name="member-1"))
    stop_after.append(config)
    return cluster, config


def test_the_follower_runs_for_the_member_here_and_stops_when_the_address_goes(
    member_here: tuple[Cluster, Path], wait_until: Callable[..., object]
) -> None:
    cluster, config = member_here
    missed = vip.set_floating_address(cluster, "198.18.0.200/24")

    assert missed == ["node-b: its agent is not answering"]  # its reconciler starts its own
    cluster.refresh_from_db()
    assert cluster.floating_address == "198.18.0.200/24"
    wait_until(lambda: engine.is_running(config), timeout=10)
    rendered = json.loads(config.read_text())
    assert rendered["trigger_key"] == f"/pgpanel/{ha_files.scope(cluster)}/leader"
    assert rendered["trigger_value"] == "member-1" and rendered["interface"] == an_interface()
    assert rendered["user"] == ha_files.scope(cluster)  # the scope's own user, not root
    assert rendered["endpoints"] == ["https://127.0.0.1:9"]
    assert rendered["password"] not in " ".join(psutil.Process(engine.pid(config)).cmdline())
    # The etcd password is root's alone: no cluster's user may read it, nor enter the directory.
    assert config.stat().st_mode & 0o777 == 0o600 and config.stat().st_uid == os.geteuid()
    assert config.parent.stat().st_mode & 0o777 == 0o700 and config.parent.stat().st_uid == os.geteuid()
    assert [e.kind for e in cluster.events.all()][:1] == ["floating-address"]

    assert vip.set_floating_address(cluster, None) == ["node-b: its agent is not answering"]
    assert not engine.is_running(config) and not config.exists()


def test_the_reconciler_keeps_it_running_and_stops_one_no_member_here_has(
    member_here: tuple[Cluster, Path], stop_after: list[Path], wait_until: Callable[..., object]
) -> None:
    cluster, config = member_here
    Cluster.objects.filter(pk=cluster.pk).update(floating_address="198.18.0.200/24")
    orphan = vip.directory() / f"cluster-gone.member-3{vip.SUFFIX}"
    stop_after.append(orphan)

    notes = vip.supervise_here()
    assert f"{cluster.name}/member-1: floating address follower started" in notes
    wait_until(lambda: engine.is_running(config), timeout=10)
    assert vip.supervise_here() == []  # running as it should: nothing to do

    engine.stop(config, None, "")  # died
    orphan.write_text(config.read_text())
    engine.start(orphan, orphan.with_suffix(".log"))
    wait_until(lambda: engine.is_running(orphan), timeout=10)
    notes = vip.supervise_here()
    assert f"{cluster.name}/member-1: floating address follower started" in notes
    assert "floating address follower of cluster-gone.member-3 stopped (no such member here)" in notes
    wait_until(lambda: engine.is_running(config), timeout=10)
    assert not engine.is_running(orphan) and not orphan.exists()
