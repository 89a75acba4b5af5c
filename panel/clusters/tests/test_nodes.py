"""Nodes: placement by free capacity, full and draining nodes, heartbeats and the "unknown"
status, the `manage.py node` commands and the staff Nodes page. (Two real node agents on one
machine: tests/test_two_nodes.py.)"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Node, NodeState
from panel.clusters.services import nodes
from panel.clusters.tests.conftest import make_node
from panel.core.errors import ServiceError

GB = 1024**3


@pytest.fixture(autouse=True)
def _no_leftover_nodes(request: pytest.FixtureRequest) -> None:
    """Each test starts without nodes: a module of real clusters that ran before (its fixture
    outside any test's transaction) leaves this machine's node registered."""
    if request.node.get_closest_marker("django_db") or {"db", "transactional_db"} & set(request.fixturenames):
        request.getfixturevalue("db")
        Node.objects.filter(clusters__isnull=True).delete()


@pytest.fixture
def web(settings: object) -> None:
    """This process as the web: it runs no cluster, so only heartbeats say a node is alive."""
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    settings.PANEL_NODE_DEAD_AFTER = 45  # type: ignore[attr-defined]


def create(owner: User, name: str, plan: str = "db-s-1vcpu-1gb", node: str | None = None) -> Cluster:
    return services.create_cluster(owner, name=name, plan_slug=plan, enqueue=False, node=node)


@pytest.mark.django_db
def test_a_new_cluster_goes_to_the_node_with_the_most_free_ram(owner: User, web: None) -> None:
    small = make_node("small", ram_gb=4, first=40000)
    big = make_node("big", ram_gb=16, vcpus=8, first=40100)
    first = create(owner, "one", "db-s-2vcpu-4gb")
    assert first.node == big
    # Connection details show the node's address, the port is from its range.
    assert first.public_host == "big.example.net" and 40100 <= first.port <= 40199
    create(owner, "two", "db-s-4vcpu-8gb")  # big: 12 GB taken, 4 left; small: 4 free
    third = create(owner, "three", "db-s-1vcpu-2gb")
    assert third.node == small  # 4 GB free on each: the one with more vCPUs free
    assert nodes.usage(big).ram_bytes == 12 * GB
    # The user may pick the node.
    assert create(owner, "four", node="small").node == small


@pytest.mark.django_db
def test_a_full_node_refuses_with_a_clear_message_and_records_nothing(owner: User, web: None) -> None:
    make_node("tiny", ram_gb=2, vcpus=2)
    create(owner, "fits", "db-s-1vcpu-2gb")
    with pytest.raises(ServiceError) as refused:
        create(owner, "too-big", "db-s-1vcpu-1gb")
    assert "Node “tiny” is full for plan db-s-1vcpu-1gb" in refused.value.message
    assert "RAM: the plan needs 1 GB, 0.0 GB of 2.0 GB are free" in refused.value.message
    assert refused.value.code == "node.full"
    assert refused.value.field == "plan"  # one node: the plan is what the user can change
    assert not Cluster.objects.filter(name="too-big").exists()


@pytest.mark.django_db
def test_a_draining_or_silent_node_takes_no_new_cluster(owner: User, web: None, settings: object) -> None:
    drained = make_node("drained", first=40000)
    silent = make_node("silent", beat=False, first=40100)
    nodes.set_state("drained", NodeState.DRAINING)
    with pytest.raises(
        ServiceError, match="draining: it keeps its clusters but takes no new ones"
    ) as refused:
        create(owner, "here", node="drained")
    assert refused.value.field == "node"
    with pytest.raises(ServiceError, match="is not answering"):
        create(owner, "there", node="silent")
    with pytest.raises(ServiceError, match="every node is draining or its agent is not answering"):
        create(owner, "anywhere")
    # Activated again, it takes clusters; the silent one never gets any.
    nodes.set_state("drained", NodeState.ACTIVE)
    assert create(owner, "back").node == drained
    assert not silent.clusters.exists()


@pytest.mark.django_db
def test_a_web_with_no_node_says_to_start_an_agent(owner: User, web: None) -> None:
    with pytest.raises(ServiceError, match="No node has registered yet: start the node agent"):
        create(owner, "nowhere")


@pytest.mark.django_db
def test_this_process_is_its_own_node_when_it_does_the_work_itself(owner: User, settings: object) -> None:
    """Role "all" (the tests, manage.py on a one-machine panel): the node registers itself."""
    assert not Node.objects.exists()
    cluster = create(owner, "mine")
    node = cluster.node
    assert node.name == settings.PANEL_NODE_NAME and node.is_here and node.is_alive  # type: ignore[attr-defined]
    assert node.port_first == settings.PANEL_PORT_RANGE[0]  # type: ignore[attr-defined]
    assert node.versions  # the heartbeat reported the installed PostgreSQL


@pytest.mark.django_db
def test_a_silent_nodes_clusters_show_as_unknown(owner: User, owner_client: Client, web: None) -> None:
    gone = make_node("gone", first=40000)
    alive = make_node("alive", ram_gb=2, first=40100)
    on_gone = create(owner, "on-gone", node="gone")
    on_alive = create(owner, "on-alive", node="alive")
    Cluster.objects.filter(pk__in=[on_gone.pk, on_alive.pk]).update(status=ClusterStatus.ONLINE)
    Node.objects.filter(pk=gone.pk).update(last_heartbeat=timezone.now() - dt.timedelta(seconds=46))

    page = owner_client.get("/clusters/").content.decode()
    assert page.count('data-status="unknown"') == 1
    assert page.count('data-status="online"') == 1
    assert "Node “gone” has not answered since" in page
    detail = owner_client.get(f"/clusters/{on_gone.pk}/live/").content.decode()
    assert 'data-status="unknown"' in detail
    # Back within the window: online again, no row was changed meanwhile.
    Node.objects.filter(pk=gone.pk).update(last_heartbeat=timezone.now())
    assert owner_client.get("/clusters/").content.decode().count('data-status="online"') == 2
    assert alive.is_alive


@pytest.mark.django_db
def test_an_attached_server_is_never_unknown_and_a_living_node_reaches_it(owner: User, web: None) -> None:
    attached = Cluster.objects.create(
        owner=owner, name="ext", kind=ClusterKind.EXTERNAL, version="15", port=5432
    )
    assert not attached.status_unknown and attached.public_host == attached.host
    make_node("asleep", beat=False, first=40000)
    make_node("awake", first=40100)
    make_node("zebra", first=40200)
    # Any node reaches it over the network: the first that answers, by name.
    assert attached.agent_queue == "node.awake" and attached.tasks_queue == "node.awake.tasks"


# --- the command line ------------------------------------------------------------------------------


def node_command(*args: str) -> str:
    out = StringIO()
    call_command("node", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_node_add_list_drain_activate_remove(owner: User, web: None) -> None:
    said = node_command(
        "add",
        "db2",
        "--address",
        "db2.example.net",
        "--ports",
        "41000-41099",
        "--data-dir",
        "/srv/db2",
        "--ram",
        "16",
        "--vcpus",
        "8",
    )
    assert "Node db2 added: db2.example.net, ports 41000-41099." in said
    listing = node_command("list").splitlines()
    assert listing[0].split()[:5] == ["NAME", "STATE", "ALIVE", "HEARTBEAT", "ADDRESS"]
    assert listing[1].split()[:5] == ["db2", "active", "NO", "never", "db2.example.net"]
    assert "0 bytes / 16.0 GB" in listing[1]

    Node.objects.filter(name="db2").update(last_heartbeat=timezone.now(), versions="15")
    create(owner, "on-db2")
    assert node_command("list").splitlines()[1].split()[:3] == ["db2", "active", "yes"]
    assert "its 1 cluster(s) stay" in node_command("drain", "db2")
    assert Node.objects.get(name="db2").state == NodeState.DRAINING
    with pytest.raises(CommandError, match="still holds 1 cluster"):
        node_command("remove", "db2")
    node_command("activate", "db2")
    Cluster.objects.filter(name="on-db2").delete()
    assert "Node db2 removed." in node_command("remove", "db2")
    assert not Node.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ports", "41000"], "The port range must be two ports"),
        (["--ports", "41099-41000"], "The port range must be two ports"),
        (["--ram", "0"], "at least 1 GB of RAM"),
        (["--data-dir", "relative"], "absolute path"),
    ],
)
def test_node_add_refuses_bad_input_clearly(args: list[str], message: str) -> None:
    base = {
        "--address": "x.example.net",
        "--ports": "41000-41099",
        "--data-dir": "/srv/x",
        "--ram": "4",
        "--vcpus": "2",
    }
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    with pytest.raises(CommandError, match=message):
        node_command("add", "x", *[item for pair in base.items() for item in pair])
    assert not Node.objects.exists()


@pytest.mark.django_db
def test_node_names_and_overlapping_ports_are_refused() -> None:
    make_node("one", first=40000)
    with pytest.raises(ServiceError, match="letters, digits and hyphens"):
        nodes.add_node("bad.name", address="h", ports=(40200, 40299), data_dir="/srv/b", ram_gb=1, vcpus=1)
    with pytest.raises(ServiceError, match="overlap node “one”"):
        nodes.add_node(
            "two", address="one.example.net", ports=(40050, 40149), data_dir="/srv/t", ram_gb=1, vcpus=1
        )
    with pytest.raises(ServiceError, match="already a node named “one”"):
        nodes.add_node("one", address="elsewhere", ports=(40200, 40299), data_dir="/srv/o", ram_gb=1, vcpus=1)


# --- the staff page ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_nodes_page_shows_capacity_clusters_and_heartbeat_to_staff_only(
    owner: User, owner_client: Client, staff_user: User, web: None
) -> None:
    node = make_node("db1", ram_gb=8, vcpus=4)
    create(owner, "busy", "db-s-2vcpu-4gb")
    assert owner_client.get("/clusters/nodes/").status_code == 302  # to the login page
    staff = Client()
    staff.force_login(staff_user)
    page = staff.get("/clusters/nodes/").content.decode()
    assert 'data-node="db1"' in page and "Answering" in page and "0 s ago" in page
    assert "4.0\xa0GB / 8.0\xa0GB" in page and 'aria-valuenow="50"' in page  # RAM bar
    assert "2 / 4" in page  # vCPUs
    assert "busy" in page and "1 cluster" in page

    response = staff.post("/clusters/nodes/db1/draining/")
    assert response.status_code == 302
    node.refresh_from_db()
    assert node.state == NodeState.DRAINING
    assert "Take new clusters again" in staff.get("/clusters/nodes/").content.decode()
    assert owner_client.post("/clusters/nodes/db1/active/").status_code == 302
    node.refresh_from_db()
    assert node.state == NodeState.DRAINING  # a tenant cannot change it


@pytest.mark.django_db
def test_the_nodes_page_names_the_clusters_a_silent_node_holds_members_of(
    owner: User, staff_user: User, web: None
) -> None:
    """Issue 39: a node that holds a member of a cluster living elsewhere lists that cluster; when
    it stops answering the page says the cluster runs without it, with the cluster's status."""
    from panel.clusters.services.create import add_member

    make_node("home", first=40000)
    other = make_node("other", first=40100)
    cluster = create(owner, "spread-db", "db-s-2vcpu-4gb", node="home")
    add_member(cluster, "member-2", other)
    Cluster.objects.filter(pk=cluster.pk).update(num_nodes=2, status=ClusterStatus.DEGRADED)
    staff = Client()
    staff.force_login(staff_user)
    page = staff.get("/clusters/nodes/").content.decode()
    card = page[page.index('data-node="other"') :]
    assert "Members of clusters on other nodes" in card and "spread-db" in card and "lives on home" in card
    assert "node-down-clusters" not in page  # both answer

    Node.objects.filter(pk=other.pk).update(last_heartbeat=timezone.now() - dt.timedelta(minutes=5))
    page = staff.get("/clusters/nodes/").content.decode()
    card = page[page.index('data-node="other"') :]
    assert "Not answering" in card and "node-down-clusters" in card
    assert "runs without its member here" in card and "Degraded" in card
    home_card = page[page.index('data-node="home"') : page.index('data-node="other"')]
    assert "node-down-clusters" not in home_card and "Members of clusters on other nodes" not in home_card


@pytest.mark.django_db
def test_the_create_form_offers_nodes_once_there_are_several(
    owner: User, owner_client: Client, web: None, queued_tasks: Callable[[str], list[tuple[str, list]]]
) -> None:
    make_node("solo", first=40000)
    assert 'name="node"' not in owner_client.get("/clusters/new/").content.decode()
    make_node("second", ram_gb=2, first=40100)
    form = owner_client.get("/clusters/new/").content.decode()
    assert 'name="node"' in form and "Automatic (most free capacity)" in form
    assert "second — 2 GB RAM and 4 vCPUs free" in form
    response = owner_client.post(
        "/clusters/new/", {"name": "picked", "plan": "db-s-1vcpu-1gb", "version": "15", "node": "second"}
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    picked = Cluster.objects.get(name="picked")
    assert picked.node.name == "second"
    # Its provisioning waits on that node's queue, for that node's agent.
    assert queued_tasks("node.second.tasks") == [("panel.clusters.tasks.provision", [str(picked.pk)])]
    assert queued_tasks("node.solo.tasks") == []


# --- beat's periodic work, one per living node ---------------------------------------------------------


@pytest.mark.django_db
def test_beat_fans_periodic_work_out_to_each_living_node(
    web: None, settings: object, queued_tasks: Callable[[str], list[tuple[str, list]]]
) -> None:
    from panel.celery import app
    from panel.clusters.tasks import fan_out

    make_node("up", first=40000)
    make_node("down", beat=False, first=40100)
    drained = make_node("drained", first=40200)
    nodes.set_state(drained.name, NodeState.DRAINING)  # it still runs its clusters

    assert sorted(fan_out.run("panel.insights.tasks.collect", 15.0)) == ["drained", "up"]
    assert queued_tasks("node.up.tasks") == [("panel.insights.tasks.collect", [])]
    assert queued_tasks("node.drained.tasks") == [("panel.insights.tasks.collect", [])]
    assert queued_tasks("node.down.tasks") == []
    # Tenants' periodic work (log forwarding) goes to the nodes' work queues instead.
    assert sorted(fan_out.run("panel.logsink.tasks.forward", 10.0, "work")) == ["drained", "up"]
    assert queued_tasks("node.up.work") == [("panel.logsink.tasks.forward", [])]
    # Beat itself only sends the fan-outs, to the default queue any node's worker takes.
    periodic = {
        entry["args"][0] for entry in app.conf.beat_schedule.values() if entry["task"].endswith("fan_out")
    }
    assert periodic == {
        "panel.clusters.tasks.reconcile",
        "panel.insights.tasks.collect",
        "panel.quotas.tasks.measure",
        "panel.backups.tasks.periodic",
        "panel.logsink.tasks.forward",
        "panel.managed.tasks.periodic",
        "benchmarks.tasks.reap",
    }


@pytest.mark.django_db
def test_each_node_reconciles_and_collects_only_its_own_clusters(owner: User, settings: object) -> None:
    mine = create(owner, "mine")  # this process's node, registered on first use
    other = make_node("other", first=40000)
    theirs = create(owner, "theirs", node="other")
    assert set(Cluster.objects.here()) == {mine}
    settings.PANEL_NODE_NAME = "other"  # type: ignore[attr-defined]
    assert set(Cluster.objects.here()) == {theirs}
    assert other.is_here


@pytest.mark.django_db
def test_a_beat_refreshes_the_heartbeat_and_only_an_inventory_beat_the_versions() -> None:
    node = nodes.register_this_node()
    assert node.versions and node.agent_host
    Node.objects.filter(pk=node.pk).update(versions="", last_heartbeat=timezone.now() - dt.timedelta(hours=1))
    assert nodes.heartbeat(inventory=False)
    node.refresh_from_db()
    assert node.versions == "" and node.heartbeat_age == 0
    assert nodes.heartbeat()
    node.refresh_from_db()
    assert node.versions
    Node.objects.all().delete()
    assert not nodes.heartbeat()  # removed: the agent is told
