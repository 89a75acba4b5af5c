"""Deleting a cluster: the typed name must match; a mismatch deletes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from panel.clusters.engine import postgres
from panel.clusters.models import Cluster

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
def test_the_right_name_stops_and_removes_the_cluster(owner_client, local_cluster):
    url = reverse("clusters:delete", args=[local_cluster.pk])
    response = owner_client.post(url, {"confirm_name": local_cluster.name}, headers=HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("clusters:list")
    assert not Cluster.objects.filter(pk=local_cluster.pk).exists()
    assert postgres.postmaster_pid(local_cluster.pgdata) is None
    assert not local_cluster.data_root.exists()
    page = owner_client.get(reverse("clusters:list")).content.decode()
    assert f"Cluster “{local_cluster.name}” deleted." in page


def test_the_right_name_without_htmx_redirects_to_the_list(owner_client, cluster_row):
    response = owner_client.post(
        reverse("clusters:delete", args=[cluster_row.pk]), {"confirm_name": "db-row"}
    )
    assert response.status_code == 302
    assert response.url == reverse("clusters:list")
    assert not Cluster.objects.filter(pk=cluster_row.pk).exists()
