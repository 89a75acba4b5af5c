"""Deleting a cluster: the typed name must match; a mismatch deletes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import lifecycle as services

HTMX = {"HX-Request": "true"}


def test_the_cluster_page_has_a_delete_dialog_posting_to_delete(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode()
    assert 'id="delete-cluster-modal"' in page
    assert 'hx-post="' + reverse("clusters:delete", args=[cluster_row.pk]) in page
    assert 'name="confirm_name"' in page


def test_a_wrong_name_is_an_inline_error_and_keeps_the_cluster(owner_client, cluster_row):
    url = reverse("clusters:delete", args=[cluster_row.pk])
    response = owner_client.post(url, {"confirm_name": "db-wrong"}, headers=HTMX)
    text = response.content.decode()
    assert response.status_code == 200
    assert text.lstrip().startswith('<form id="delete-cluster-form"')
    assert "Type the cluster name “db-row” to confirm." in text
    assert "is-invalid" in text
    assert Cluster.objects.filter(pk=cluster_row.pk).exists()


def test_a_wrong_name_without_htmx_shows_the_confirmation_page(owner_client, cluster_row):
    response = owner_client.post(reverse("clusters:delete", args=[cluster_row.pk]), {"confirm_name": ""})
    assert response.status_code == 200
    assert "<html" in response.content.decode()
    assert "to confirm." in response.content.decode()
    assert Cluster.objects.filter(pk=cluster_row.pk).exists()


@pytest.mark.integration
def test_the_right_name_queues_the_teardown_and_the_page_follows_it_until_it_is_gone(
    owner_client, local_cluster, celery_worker, wait_until
):
    url = reverse("clusters:delete", args=[local_cluster.pk])
    response = owner_client.post(url, {"confirm_name": local_cluster.name}, headers=HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("clusters:list")
    # The request only marked it: the list shows it deleting (and polls) until a worker is done.
    page = owner_client.get(reverse("clusters:list")).content.decode()
    assert f"Deleting cluster “{local_cluster.name}”" in page
    live = reverse("clusters:live", args=[local_cluster.pk])
    wait_until(
        lambda: not Cluster.objects.filter(pk=local_cluster.pk).exists(),
        timeout=60,
        message="the worker deleting the cluster",
    )
    assert postgres.postmaster_pid(local_cluster.pgdata) is None
    assert not local_cluster.data_root.exists()
    # A cluster page still open follows the deletion to the list.
    gone = owner_client.get(live, headers=HTMX)
    assert gone.status_code == 404
    assert gone["HX-Redirect"] == reverse("clusters:list")


def test_a_deleting_cluster_shows_its_progress_and_no_actions(owner_client, cluster_row):
    cluster_row.status = ClusterStatus.DELETING
    cluster_row.progress, cluster_row.progress_message = 30, "Stopping PostgreSQL"
    cluster_row.save()
    page = owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode()
    assert 'data-status="deleting"' in page
    assert "Stopping PostgreSQL" in page
    assert reverse("clusters:live", args=[cluster_row.pk]) in page  # it polls
    assert reverse("clusters:action", args=[cluster_row.pk, "stop"]) not in page
    listing = owner_client.get(reverse("clusters:list")).content.decode()
    assert "Deleting" in listing and 'hx-trigger="every 2s"' in listing


def test_the_queue_down_deletes_nothing_and_says_why(owner_client, cluster_row, redis_down):
    cluster_row.status = ClusterStatus.ONLINE
    cluster_row.save()
    url = reverse("clusters:delete", args=[cluster_row.pk])
    response = owner_client.post(url, {"confirm_name": "db-row"}, headers=HTMX)
    assert "is not reachable, so nothing was started" in response.content.decode()
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.ONLINE


def test_the_live_view_of_someone_elses_cluster_is_a_404_that_sends_to_the_list(other_client, cluster_row):
    response = other_client.get(reverse("clusters:live", args=[cluster_row.pk]), headers=HTMX)
    assert response.status_code == 404
    assert response["HX-Redirect"] == reverse("clusters:list")
    assert cluster_row.name not in response.content.decode()


def test_the_right_name_without_htmx_redirects_to_the_list(owner_client, cluster_row, monkeypatch):
    queued = []
    monkeypatch.setattr(services, "enqueue_task", lambda *args, **kw: queued.append(args))
    response = owner_client.post(
        reverse("clusters:delete", args=[cluster_row.pk]), {"confirm_name": "db-row"}
    )
    assert response.status_code == 302
    assert response.url == reverse("clusters:list")
    assert queued == [("panel.clusters.tasks.delete", str(cluster_row.pk))]
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.DELETING


def test_deleting_twice_is_refused(owner_client, cluster_row):
    cluster_row.status = ClusterStatus.DELETING
    cluster_row.save()
    url = reverse("clusters:delete", args=[cluster_row.pk])
    response = owner_client.post(url, {"confirm_name": "db-row"}, headers=HTMX)
    assert "already being deleted" in response.content.decode()


@pytest.mark.integration
def test_a_failed_teardown_leaves_the_cluster_in_error_with_the_reason(
    local_cluster, monkeypatch, caplog, owner_client
):
    def refuse(path):
        raise OSError(f"Device or resource busy: '{path}'")

    Cluster.objects.filter(pk=local_cluster.pk).update(status=ClusterStatus.DELETING)
    with monkeypatch.context() as patched:  # undone before the fixture deletes the cluster
        patched.setattr(postgres, "remove_data", refuse)
        services.delete_queued(local_cluster.pk)
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ERROR
    page = owner_client.get(reverse("clusters:detail", args=[local_cluster.pk])).content.decode()
    assert "Could not delete the cluster. Delete it again;" in page
    assert "busy" not in page and str(local_cluster.data_root) not in page
    event = local_cluster.events.get(kind="error")
    assert "busy" not in str(event.shown) and "/" not in str(event.shown)
    # The engine's words, with the path, are the server log's.
    assert f"Device or resource busy: '{local_cluster.data_root}'" in caplog.text
