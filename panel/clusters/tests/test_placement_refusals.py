"""A node that cannot take a new server says why: for each node considered, which of RAM, vCPUs,
port pairs and disk (its floor: PANEL_NODE_MIN_FREE_DISK_GB) is short with the plan's need and
what is free, or that it is draining or silent; in the form's language, as one coded refusal (the
API's answer: panel/api/tests/test_api_node_full.py). A node with room still places."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone, translation

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterMember, Node, NodeState
from panel.clusters.services import nodes
from panel.clusters.standbys.services import member_count
from panel.clusters.tests.conftest import make_node
from panel.core.errors import ServiceError
from panel.env import env_positive

pytestmark = pytest.mark.django_db


@pytest.fixture
def web(settings: object) -> None:
    """This process as the web: it runs no cluster, so only heartbeats say a node is alive."""
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    settings.PANEL_NODE_DEAD_AFTER = 45  # type: ignore[attr-defined]
    Node.objects.filter(clusters__isnull=True).delete()


def create(owner: User, name: str, plan: str = "db-s-1vcpu-1gb", **kwargs: object) -> Cluster:
    return services.create_cluster(owner, name=name, plan_slug=plan, enqueue=False, **kwargs)  # type: ignore[arg-type]


def test_a_node_whose_ram_is_taken_names_ram_and_the_figures(owner: User, web: None) -> None:
    make_node("busy", 40000, ram_gb=4, vcpus=8)
    create(owner, "takes-it", "db-s-2vcpu-4gb")
    with pytest.raises(ServiceError) as refused:
        create(owner, "no-room", "db-s-1vcpu-2gb")
    assert refused.value.code == "node.full" and refused.value.field == "plan"
    message = refused.value.message
    assert (
        "Node “busy” is full for plan db-s-1vcpu-2gb: RAM: the plan needs 2 GB, 0.0 GB of 4.0 GB are free"
        in message
    )
    assert "vCPUs" not in message and "ports" not in message  # only what is short
    with translation.override("de"):
        german = refused.value.message
    assert "Knoten „busy“" in german and "RAM: der Plan braucht 2 GB, 0,0 GB von 4,0 GB sind frei" in german
    assert not Cluster.objects.filter(name="no-room").exists()


def test_every_node_considered_says_why_and_one_with_room_still_places(owner: User, web: None) -> None:
    make_node("small", 40000, ram_gb=1, vcpus=1)
    make_node("drained", 40100)
    make_node("silent", 40200)
    make_node("narrow", 40300, last=40303)  # one pair: the last two ports are etcd's
    nodes.set_state("drained", NodeState.DRAINING)
    beat = timezone.now() - dt.timedelta(minutes=5)
    Node.objects.filter(name="silent").update(last_heartbeat=beat)
    create(owner, "takes-the-pair", "db-s-1vcpu-1gb", node="narrow")
    with pytest.raises(ServiceError) as refused:
        create(owner, "nowhere", "db-s-2vcpu-4gb")
    assert refused.value.code == "node.full"
    message = refused.value.message
    assert message.startswith("No node has room for plan db-s-2vcpu-4gb (4 GB of RAM and 2 vCPUs).")
    assert "Node “drained” is draining: it keeps its clusters but takes no new ones." in message
    assert (
        f"Node “silent” is not answering: its agent's last heartbeat was at {beat:%Y-%m-%d %H:%M:%S} UTC."
        in message
    )
    assert (
        "Node “small” is full for plan db-s-2vcpu-4gb: RAM: the plan needs 4 GB, 1.0 GB of 1.0 GB are free; "
        "vCPUs: the plan needs 2, 1 of 1 are free." in message
    )
    assert (
        "Node “narrow” is full for plan db-s-2vcpu-4gb: ports: no free pair left in 40300–40303." in message
    )
    # A node with room takes the cluster.
    make_node("roomy", 40400, ram_gb=16, vcpus=8)
    assert create(owner, "somewhere", "db-s-2vcpu-4gb").node.name == "roomy"


def test_no_room_for_standbys_lists_each_node(owner: User, web: None) -> None:
    make_node("a", 40000, ram_gb=4)
    make_node("b", 40100, ram_gb=1)
    with pytest.raises(ServiceError) as refused:
        create(owner, "three", "db-s-1vcpu-2gb", num_nodes=3, node="a")
    assert refused.value.code == "node.full" and refused.value.field == "num_nodes"
    message = refused.value.message
    assert message.startswith("1 more member(s) of plan db-s-1vcpu-2gb find no room.")
    assert (
        "Node “a” is full for plan db-s-1vcpu-2gb: RAM: the plan needs 2 GB, 0.0 GB of 4.0 GB are free."
        in message
    )
    assert (
        "Node “b” is full for plan db-s-1vcpu-2gb: RAM: the plan needs 2 GB, 1.0 GB of 1.0 GB are free."
        in message
    )
    assert not Cluster.objects.exists() and not ClusterMember.objects.exists()


def test_a_node_named_that_does_not_exist_is_refused_on_the_node_field(owner: User, web: None) -> None:
    make_node("known", 40000)
    with pytest.raises(ServiceError) as refused:
        create(owner, "nowhere", node="missing")
    assert (refused.value.code, refused.value.field) == ("node.not_found", "node")
    assert "There is no node named “missing”." in refused.value.message
    assert not Cluster.objects.exists()


def test_a_node_nearly_out_of_disk_names_disk(owner: User, web: None) -> None:
    make_node("low", 40000)
    Node.objects.filter(name="low").update(disk_free_bytes=200 * 1024**2)
    with pytest.raises(ServiceError) as refused:
        create(owner, "no-disk")
    assert refused.value.code == "node.full"
    assert (
        "Node “low” is full for plan db-s-1vcpu-1gb: disk: a new server needs 1.0 GB free in its data "
        "directory, 0.2 GB are free." in refused.value.message
    )
    # Its agent's next report with room: it takes the cluster.
    Node.objects.filter(name="low").update(disk_free_bytes=50 * 1024**3)
    assert create(owner, "disk-again").node.name == "low"


def test_the_disk_floor_follows_the_setting(owner: User, web: None, settings: object) -> None:
    settings.PANEL_NODE_MIN_FREE_DISK_GB = 5  # type: ignore[attr-defined]
    make_node("small-disk", 40000)
    Node.objects.filter(name="small-disk").update(disk_free_bytes=3 * nodes.GB)
    with pytest.raises(ServiceError) as refused:
        create(owner, "wants-five")
    assert refused.value.code == "node.full"
    assert (
        "Node “small-disk” is full for plan db-s-1vcpu-1gb: disk: a new server needs 5.0 GB free in its "
        "data directory, 3.0 GB are free." in refused.value.message
    )
    settings.PANEL_NODE_MIN_FREE_DISK_GB = 2.5  # type: ignore[attr-defined]
    assert create(owner, "fits-now").node.name == "small-disk"


@pytest.mark.parametrize("raw", ["0", "-1", "a lot", "nan", "inf"])
def test_a_disk_floor_that_is_not_a_positive_number_is_refused(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PANEL_NODE_MIN_FREE_DISK_GB", raw)
    with pytest.raises(
        ImproperlyConfigured, match=f"PANEL_NODE_MIN_FREE_DISK_GB must be a positive number, got '{raw}'"
    ):
        env_positive("PANEL_NODE_MIN_FREE_DISK_GB", 1.0)
    monkeypatch.setenv("PANEL_NODE_MIN_FREE_DISK_GB", "0.5")
    assert env_positive("PANEL_NODE_MIN_FREE_DISK_GB", 1.0) == 0.5


def test_the_panel_does_not_start_with_a_bad_disk_floor(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PANEL_", "DJANGO_", "DATABASE_", "REDIS_"))
    }
    env |= {"DJANGO_SETTINGS_MODULE": "panel.settings", "PANEL_DATA_DIR": str(tmp_path / "data")}
    env["PANEL_NODE_MIN_FREE_DISK_GB"] = "0"
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=Path(__file__).resolve().parents[3],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    assert (
        "ImproperlyConfigured: PANEL_NODE_MIN_FREE_DISK_GB must be a positive number, got '0'"
        in started.stderr
    )


def test_the_heartbeat_reports_the_free_disk(settings: object) -> None:
    here = nodes.this_node()
    Node.objects.filter(pk=here.pk).update(disk_free_bytes=None)
    assert nodes.heartbeat(inventory=True)
    here.refresh_from_db()
    assert here.disk_free_bytes is not None and here.disk_free_bytes > 0


def test_a_standby_added_later_goes_where_there_is_room(owner: User, web: None) -> None:
    full = make_node("full", 40000, ram_gb=2)
    make_node("roomy", 40100)
    cluster = create(owner, "grows", "db-s-1vcpu-2gb", node="full")
    assert cluster.node == full
    # The cluster's own node has no room for a second server, another node has.
    member_count._check_room(cluster, 2)
    make_node("also-full", 40200, ram_gb=1)
    Node.objects.filter(name="roomy").update(state=NodeState.DRAINING)
    with pytest.raises(ServiceError) as refused:
        member_count._check_room(cluster, 2)
    assert refused.value.code == "node.full" and refused.value.field == "num_nodes"
    message = refused.value.message
    assert (
        "Node “full” is full for plan db-s-1vcpu-2gb: RAM: the plan needs 2 GB, 0.0 GB of 2.0 GB are free."
        in message
    )
    assert "Node “also-full” is full" in message and "Node “roomy” is draining" in message


def test_a_draining_node_still_takes_standbys_of_its_own_clusters(owner: User, web: None) -> None:
    make_node("home", 40000)
    cluster = create(owner, "stays", "db-s-1vcpu-2gb", node="home")
    nodes.set_state("home", NodeState.DRAINING)
    member_count._check_room(cluster, 3)  # room for two more on its own node: no refusal
    Node.objects.filter(name="home").update(ram_bytes=4 * nodes.GB)
    with pytest.raises(ServiceError, match="Node “home” is full for plan db-s-1vcpu-2gb: RAM"):
        member_count._check_room(cluster, 3)
