"""The Settings tab's Resize and Configuration cards: for the owner only, each refusal next to
its field with nothing changed, a resize followed by the page like any other job."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from panel.clusters.models import Cluster, ClusterKind, ClusterStatus
from panel.clusters.tests.conftest import make_cluster_row
from panel.pools.models import ConnectionPool

Queued = Callable[[str], list[tuple[str, list]]]
pytestmark = pytest.mark.django_db


def test_the_settings_tab_renders_both_cards(owner_client: Client, cluster_row: Cluster) -> None:
    page = owner_client.get(reverse("clusters:settings", args=[cluster_row.pk])).content.decode()
    assert f'hx-post="/clusters/{cluster_row.pk}/settings/resize/"' in page
    assert f'hx-post="/clusters/{cluster_row.pk}/settings/config/"' in page
    assert 'data-plan="db-s-4vcpu-8gb"' in page and 'name="work_mem" value="4"' in page
    # Resize and configuration need no second request; the managed service's cards (maintenance,
    # which asks the node what is installed there, autoscale and tags) load after the page.
    assert page.count('hx-trigger="load"') == 3
    for card in ("maintenance", "autoscale", "tags"):
        assert f'hx-get="/clusters/{cluster_row.pk}/{card}/" hx-trigger="load"' in page


def test_an_attached_server_has_neither_card(owner_client: Client, owner: User) -> None:
    attached = make_cluster_row(owner, name="ext", kind=ClusterKind.EXTERNAL)
    page = owner_client.get(reverse("clusters:settings", args=[attached.pk])).content.decode()
    assert 'id="settings-resize"' not in page and 'id="settings-config"' not in page


@pytest.mark.parametrize("name", ["clusters:resize", "clusters:config"])
def test_outsiders_get_404_and_change_nothing(other_client: Client, cluster_row: Cluster, name: str) -> None:
    url = reverse(name, args=[cluster_row.pk])
    assert other_client.get(url).status_code == 404
    post = {"size": "db-s-4vcpu-8gb", "restart": "on", "work_mem": "64"}
    assert other_client.post(url, post).status_code == 404
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.ONLINE and cluster_row.config == {}


def test_the_resize_card_marks_the_current_plan_and_says_why_others_do_not_fit(
    owner_client: Client, cluster_row: Cluster
) -> None:
    ConnectionPool.objects.create(cluster=cluster_row, name="wide", database="appdb", size=30)
    card = owner_client.get(reverse("clusters:resize", args=[cluster_row.pk]), headers={"HX-Request": "true"})
    html = card.content.decode()
    assert 'id="settings-resize"' in html and "<html" not in html
    current = html.split('data-plan="db-s-2vcpu-4gb"')[1].split("</label>")[0]
    assert "current" in current and "disabled" in current
    smaller = html.split('data-plan="db-s-1vcpu-1gb"')[1].split("</label>")[0]
    assert "disabled" in smaller and "make them smaller by 8 in all" in smaller
    bigger = html.split('data-plan="db-s-4vcpu-8gb"')[1].split("</label>")[0]
    assert "disabled" not in bigger and "4 vCPU · 8 GB RAM · 115 GB disk · 200 connections" in bigger
    assert "restarts" in html


def test_a_resize_needs_the_restart_confirmed(owner_client: Client, cluster_row: Cluster) -> None:
    url = reverse("clusters:resize", args=[cluster_row.pk])
    response = owner_client.post(url, {"size": "db-s-4vcpu-8gb"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "Confirm the restart to resize." in response.content.decode()
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.ONLINE


def test_a_refused_resize_shows_why_next_to_the_plans(owner_client: Client, cluster_row: Cluster) -> None:
    url = reverse("clusters:resize", args=[cluster_row.pk])
    response = owner_client.post(
        url, {"size": "db-s-2vcpu-4gb", "restart": "on"}, headers={"HX-Request": "true"}
    )
    assert "already on plan db-s-2vcpu-4gb" in response.content.decode()
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.ONLINE


def test_a_resize_queues_the_work_and_sends_the_page_back_to_the_tab(
    owner_client: Client, cluster_row: Cluster, queued_tasks: Queued
) -> None:
    url = reverse("clusters:resize", args=[cluster_row.pk])
    response = owner_client.post(
        url, {"size": "db-s-4vcpu-8gb", "restart": "on"}, headers={"HX-Request": "true"}
    )
    assert response["HX-Redirect"] == reverse("clusters:settings", args=[cluster_row.pk])
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.RESIZING
    assert [name for name, _args in queued_tasks(cluster_row.tasks_queue)] == ["panel.clusters.tasks.resize"]
    page = owner_client.get(reverse("clusters:settings", args=[cluster_row.pk])).content.decode()
    assert 'data-status="resizing"' in page and 'hx-trigger="every 1s"' in page


def test_the_configuration_card_shows_each_setting_with_unit_range_and_value(
    owner_client: Client, cluster_row: Cluster
) -> None:
    Cluster.objects.filter(pk=cluster_row.pk).update(config={"work_mem": 12})
    html = owner_client.get(reverse("clusters:config", args=[cluster_row.pk])).content.decode()
    assert "work_mem (MB)" in html and "Range: 1 … 1024 MB. Default: 4." in html
    assert 'name="work_mem" value="12"' in html
    assert 'name="timezone" value="UTC"' in html


def test_a_bad_value_is_shown_next_to_its_field_and_changes_nothing(
    owner_client: Client, cluster_row: Cluster
) -> None:
    url = reverse("clusters:config", args=[cluster_row.pk])
    response = owner_client.post(
        url, {"work_mem": "2048", "timezone": "Nowhere/Atlantis", "jit": "True", "track_io_timing": "off"}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "must be between 1 and 1024 MB" in html and "must be a time zone name" in html
    cluster_row.refresh_from_db()
    assert cluster_row.config == {}


def test_the_nodes_form_queues_a_change_of_members(
    owner_client: Client, cluster_row: Cluster, queued_tasks: Queued
) -> None:
    url = reverse("clusters:resize", args=[cluster_row.pk])
    page = owner_client.get(reverse("clusters:settings", args=[cluster_row.pk])).content.decode()
    assert 'id="resize-nodes"' in page and 'name="num_nodes"' in page
    response = owner_client.post(url, {"num_nodes": "3", "restart": "on"}, headers={"HX-Request": "true"})
    assert response["HX-Redirect"] == reverse("clusters:settings", args=[cluster_row.pk])
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.RESIZING
    assert queued_tasks(cluster_row.tasks_queue) == [
        ("panel.clusters.tasks.member_count", [str(cluster_row.pk), 3])
    ]


def test_standbys_on_a_1gb_plan_are_refused_next_to_the_field(owner_client: Client, owner: User) -> None:
    cluster = make_cluster_row(owner, name="db-small", plan_slug="db-s-1vcpu-1gb")
    url = reverse("clusters:resize", args=[cluster.pk])
    response = owner_client.post(url, {"num_nodes": "2", "restart": "on"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "Standby nodes need a plan with 2 GB of RAM or more" in response.content.decode()
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ONLINE and cluster.num_nodes == 1
