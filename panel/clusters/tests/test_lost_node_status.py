"""Issue 39: while a cluster's own node is silent, the first answering node among its members'
keeps its rows and status (``ha_health.watched_here``), and the pages show that status."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from panel.clusters.models import Cluster, ClusterStatus, Node
from panel.clusters.tests.conftest import make_node
from panel.clusters.tests.test_nodes import create


@pytest.fixture
def web(settings: object) -> None:
    """This process as the web: only heartbeats say a node is alive."""
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    settings.PANEL_NODE_DEAD_AFTER = 45  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_a_spread_cluster_whose_node_is_lost_shows_what_its_other_members_report(
    owner: User, owner_client: Client, web: None, settings: object
) -> None:
    """Issue 39: while a cluster's own node is silent, the first answering node among its members'
    keeps its rows and status (``ha_health.watched_here``); the page then shows that status, not
    "Unknown", and says the node is lost. Without a fresh word from such a node: unknown again."""
    from panel.clusters.services.create import add_member
    from panel.clusters.standbys.services import ha_health

    home, b_node, c_node = (
        make_node("home", first=40000),
        make_node("b", first=40100),
        make_node("c", first=40200),
    )
    cluster = create(owner, "spread-db", "db-s-2vcpu-4gb", node="home")
    add_member(cluster, "member-1", home)
    add_member(cluster, "member-2", b_node)
    add_member(cluster, "member-3", c_node)
    Cluster.objects.filter(pk=cluster.pk).update(num_nodes=3, status=ClusterStatus.DEGRADED)
    Node.objects.filter(pk=home.pk).update(last_heartbeat=timezone.now() - dt.timedelta(minutes=5))

    # Which node keeps it: the first answering one of its members' nodes, by name; never its own.
    settings.PANEL_PROCESS_ROLE = "all"  # type: ignore[attr-defined]  # as a node's agent
    for name, keeps in (("b", True), ("c", False), ("home", False)):
        settings.PANEL_NODE_NAME = name  # type: ignore[attr-defined]
        assert [c.pk for c in ha_health.watched_here()] == ([cluster.pk] if keeps else []), name
    settings.PANEL_NODE_NAME = "web-1"  # type: ignore[attr-defined]
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]

    # No member recorded healthy by a node that answers: unknown.
    page = owner_client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert 'data-status="unknown"' in page and "alert-dark node-unknown" in page
    # B's reconciler recorded its member healthy just now: the status B gave it, and why not more.
    cluster.members.filter(name="member-2").update(healthy_at=timezone.now())
    page = owner_client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert 'data-status="degraded"' in page and 'data-status="unknown"' not in page
    assert "Node “home” is not answering." in page and "members on its other nodes serve it" in page
    out = StringIO()
    call_command("cluster", "list", stdout=out)
    assert "degraded" in out.getvalue() and "unknown" not in out.getvalue()
    # B silent too: nobody keeps it true any more.
    Node.objects.filter(pk=b_node.pk).update(last_heartbeat=timezone.now() - dt.timedelta(minutes=5))
    assert 'data-status="unknown"' in owner_client.get(f"/clusters/{cluster.pk}/").content.decode()
