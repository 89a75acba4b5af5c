"""The clusters list and the Nodes page's cluster lists page: 25 rows a page with links to the
others (fetched by HTMX as the list's fragment), and a user still sees only their own clusters."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Node
from panel.clusters.services import nodes

pytestmark = pytest.mark.django_db


def rows_only(owner: User, count: int, prefix: str = "db", node: Node | None = None) -> None:
    """``count`` stopped clusters as rows: no server behind them."""
    Cluster.objects.bulk_create(
        Cluster(
            owner=owner,
            name=f"{prefix}-{index:03d}",
            kind=ClusterKind.LOCAL,
            version="15",
            plan_slug="db-s-1vcpu-1gb",
            status=ClusterStatus.STOPPED,
            node=node,
            port=30000 + index * 2,
            pooler_port=30001 + index * 2,
        )
        for index in range(count)
    )


def names(page: str) -> list[str]:
    return re.findall(r'class="fw-semibold" href="/clusters/[0-9a-f-]+/">([^<]+)</a>', page)


def test_sixty_clusters_show_25_a_page_with_links(
    owner: User, owner_client: Client, other_user: User, other_client: Client
) -> None:
    rows_only(owner, 60)
    rows_only(other_user, 3, prefix="bob")
    first = owner_client.get("/clusters/").content.decode()
    assert len(names(first)) == 25 and not any(n.startswith("bob") for n in names(first))
    assert 'href="/clusters/?page=2"' in first and 'hx-get="/clusters/?page=3"' in first
    assert "1–25 of 60" in first
    second = owner_client.get("/clusters/?page=2").content.decode()
    assert len(names(second)) == 25 and set(names(first)).isdisjoint(names(second))
    assert 'aria-current="page"><span class="page-link">2<' in second
    last = owner_client.get("/clusters/?page=3").content.decode()
    assert len(names(last)) == 10 and "51–60 of 60" in last
    assert len(set(names(first) + names(second) + names(last))) == 60
    # A number past the last (or not a number) shows a page, never an error.
    assert names(owner_client.get("/clusters/?page=99").content.decode()) == names(last)
    assert names(owner_client.get("/clusters/?page=x").content.decode()) == names(first)
    # Another user sees their three, on one page without links.
    theirs = other_client.get("/clusters/").content.decode()
    assert sorted(names(theirs)) == ["bob-000", "bob-001", "bob-002"] and "page-link" not in theirs


def test_htmx_gets_the_pages_fragment(owner: User, owner_client: Client) -> None:
    rows_only(owner, 30)
    fragment = owner_client.get("/clusters/?page=2", headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="cluster-table"')
    assert "<html" not in fragment and len(names(fragment)) == 5
    assert 'hx-target="#cluster-table"' in fragment and 'hx-push-url="true"' in fragment


def test_staff_page_through_every_cluster(owner: User, other_user: User, staff_user: User) -> None:
    rows_only(owner, 20)
    rows_only(other_user, 20, prefix="bob")
    staff = Client()
    staff.force_login(staff_user)
    assert len(names(staff.get("/clusters/").content.decode())) == 25
    assert len(names(staff.get("/clusters/?page=2").content.decode())) == 15


def test_a_nodes_cluster_list_pages_on_its_own(owner: User, staff_user: User, settings: object) -> None:
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    Node.objects.filter(clusters__isnull=True).delete()
    node = nodes.add_node(
        "db1", address="db1.example.net", ports=(40000, 40199), data_dir="/srv/db1", ram_gb=64, vcpus=64
    )
    rows_only(owner, 30, node=node)
    staff = Client()
    staff.force_login(staff_user)
    link = re.compile(r'<li class="d-flex align-items-center gap-2 mb-1"><a href="/clusters/[0-9a-f-]+/">')
    first = staff.get("/clusters/nodes/").content.decode()
    assert len(link.findall(first)) == 25 and 'href="/clusters/nodes/?db1-page=2"' in first
    assert "30 clusters" in first  # the count is of all of them
    second = staff.get("/clusters/nodes/?db1-page=2").content.decode()
    assert len(link.findall(second)) == 5
    # The polling asks for the page being shown.
    assert 'hx-get="/clusters/nodes/?db1-page=2" hx-trigger="every 5s"' in second
