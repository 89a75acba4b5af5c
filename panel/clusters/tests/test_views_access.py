"""Who may see what: login is required everywhere, outsiders get 404s, staff see every cluster."""

from __future__ import annotations

import pytest
from django.urls import reverse

from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.models.firewall import trusted_source_values

from .conftest import make_cluster_row

GET_ENDPOINTS = [
    ("clusters:detail", {}),
    ("clusters:live", {}),
    ("clusters:users", {}),
    ("clusters:settings", {}),
    ("clusters:connection", {}),
    ("clusters:connection-reveal", {}),
    ("clusters:connection-secret", {}),
    ("clusters:ca-certificate", {}),
    ("clusters:delete", {}),
]
POST_ENDPOINTS = [
    ("clusters:action", {"action": "stop"}, {}),
    ("clusters:action", {"action": "restart"}, {}),
    ("clusters:retry", {}, {}),
    ("clusters:delete", {}, {"confirm_name": "db-row"}),
    ("clusters:user-add", {}, {"user-name": "intruder"}),
    ("clusters:user-delete", {"name": "app"}, {}),
    ("clusters:user-reset-password", {"name": "app"}, {}),
    ("clusters:database-add", {}, {"database-name": "intruderdb"}),
    ("clusters:database-delete", {"name": "appdb"}, {}),
    ("clusters:trusted-source-add", {}, {"source": "203.0.113.7"}),
    ("clusters:trusted-source-remove", {}, {"source": "203.0.113.7"}),
]


def _url(name: str, cluster: Cluster, extra: dict[str, str]) -> str:
    return reverse(name, kwargs={"cluster_id": cluster.pk, **extra})


@pytest.mark.parametrize("path", ["/clusters/", "/clusters/new/", "/clusters/attach/"])
def test_it_redirects_anonymous_visitors_to_login(client, db, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response.url.startswith("/login/?next=")


def test_it_redirects_anonymous_visitors_away_from_cluster_pages(client, cluster_row):
    response = client.get(reverse("clusters:detail", args=[cluster_row.pk]))
    assert response.status_code == 302
    assert response.url.startswith("/login/")


def test_the_login_page_is_public_and_logout_is_a_post_form(client, owner_client, db):
    assert client.get("/login/").status_code == 200
    page = owner_client.get("/clusters/").content.decode()
    assert 'action="/logout/"' in page
    assert 'method="post"' in page
    response = owner_client.post("/logout/")
    assert response.status_code == 302
    assert owner_client.get("/clusters/").status_code == 302


@pytest.mark.parametrize(("name", "extra"), GET_ENDPOINTS)
def test_it_404s_for_outsider_on_every_page_and_partial(other_client, cluster_row, name, extra):
    response = other_client.get(_url(name, cluster_row, extra), {"format": "uri"})
    assert response.status_code == 404
    assert b"admin-secret" not in response.content


@pytest.mark.parametrize(("name", "extra", "data"), POST_ENDPOINTS)
def test_it_404s_for_outsider_on_every_action_and_changes_nothing(
    other_client, cluster_row, name, extra, data
):
    response = other_client.post(_url(name, cluster_row, extra), data)
    assert response.status_code == 404
    cluster = Cluster.objects.get(pk=cluster_row.pk)
    assert cluster.status == ClusterStatus.ONLINE
    assert sorted(cluster.users.values_list("name", flat=True)) == ["app", "doadmin"]
    assert sorted(cluster.databases.values_list("name", flat=True)) == ["appdb", "defaultdb"]
    assert cluster.users.get(name="app").password == "app-secret-Wm3pR8"
    assert trusted_source_values(cluster) == []


def test_it_404s_for_outsider_with_htmx_headers_too(other_client, cluster_row):
    url = reverse("clusters:connection-reveal", args=[cluster_row.pk])
    assert other_client.get(url, headers={"HX-Request": "true"}).status_code == 404


def test_it_hides_other_peoples_clusters_from_the_list(other_client, cluster_row):
    page = other_client.get("/clusters/").content.decode()
    assert cluster_row.name not in page


def test_staff_see_and_open_everyones_clusters(client, staff_user, cluster_row):
    client.force_login(staff_user)
    page = client.get("/clusters/").content.decode()
    assert cluster_row.name in page
    assert "alice" in page  # the owner column
    assert client.get(reverse("clusters:detail", args=[cluster_row.pk])).status_code == 200


def test_staff_get_the_admin_link_and_users_do_not(client, staff_user, owner_client, db):
    assert "/admin/" not in owner_client.get("/clusters/").content.decode()
    client.force_login(staff_user)
    assert "/admin/" in client.get("/clusters/").content.decode()


def test_it_lists_only_the_owners_clusters(owner_client, owner, other_user):
    make_cluster_row(owner, "db-mine", port=26910)
    make_cluster_row(other_user, "db-theirs", port=26920)
    page = owner_client.get("/clusters/").content.decode()
    assert "db-mine" in page
    assert "db-theirs" not in page
