"""The cluster list, the create form and the attach form."""

from __future__ import annotations

import pytest
from django.urls import reverse

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterStatus

from .conftest import make_cluster_row

needs_postgres = pytest.mark.skipif(not services.available_versions(), reason="no PostgreSQL binaries")


def _create_data(**overrides: str) -> dict[str, str]:
    data = {"name": "db-new", "plan": "db-s-1vcpu-1gb", "version": services.available_versions()[0]}
    data.update(overrides)
    return data


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


def test_the_empty_list_says_what_to_do_next(owner_client, staff_client):
    page = owner_client.get(reverse("clusters:list")).content.decode()
    assert "You have no database clusters yet" in page
    assert reverse("clusters:create") in page
    # Attaching is for staff unless PANEL_ATTACH_FOR_ALL: the button is not offered to others.
    assert reverse("clusters:attach") not in page
    assert reverse("clusters:attach") in staff_client.get(reverse("clusters:list")).content.decode()


def test_attaching_is_offered_to_every_account_when_opened_to_all(owner_client, settings):
    settings.PANEL_ATTACH_FOR_ALL = True
    assert reverse("clusters:attach") in owner_client.get(reverse("clusters:list")).content.decode()
    assert owner_client.get(reverse("clusters:attach")).status_code == 200


def test_the_attach_form_tells_other_accounts_it_is_for_staff(owner_client):
    response = owner_client.get(reverse("clusters:attach"))
    assert response.status_code == 403
    assert "reserved to staff" in response.content.decode()
    data = {"name": "db-remote", "host": "db.example.com", "port": "5432", "user": "u", "password": "p"}
    data |= {"database": "d", "sslmode": "require"}
    response = owner_client.post(reverse("clusters:attach"), data)
    assert response.status_code == 403
    assert not Cluster.objects.exists()


def test_the_list_shows_name_status_plan_and_version(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:list")).content.decode()
    assert reverse("clusters:detail", args=[cluster_row.pk]) in page
    assert 'data-status="online"' in page
    assert "db-s-2vcpu-4gb" in page
    assert "PostgreSQL 15" in page
    assert "hx-trigger" not in page  # nothing busy: no polling


def test_the_list_polls_while_a_cluster_is_busy(owner_client, owner):
    make_cluster_row(owner, status=ClusterStatus.CREATING, progress=40)
    page = owner_client.get(reverse("clusters:list")).content.decode()
    assert 'hx-trigger="every 2s' in page
    partial = owner_client.get(reverse("clusters:list"), headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith('<div id="cluster-table"')
    assert "<html" not in partial


@needs_postgres
def test_the_create_form_offers_a_default_name_versions_and_plans(owner_client):
    page = owner_client.get(reverse("clusters:create")).content.decode()
    assert 'value="db-postgresql-local-' in page
    for version in services.available_versions():
        assert f'value="{version}"' in page
    assert "25 connections (22 for pools)" in page
    assert "100 connections (97 for pools)" in page
    assert 'value="db-s-1vcpu-1gb" checked' in page


@needs_postgres
@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "Bad Name!"}, "lowercase letters, digits and hyphens"),
        ({"name": ""}, "This field is required."),
        ({"plan": "db-s-99vcpu"}, "Select a valid choice."),
        ({"version": "7"}, "Select a valid choice."),
    ],
)
def test_it_shows_invalid_input_inline_and_creates_nothing(owner_client, data, message):
    response = owner_client.post(reverse("clusters:create"), _create_data(**data))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert "invalid-feedback" in response.content.decode()
    assert not Cluster.objects.exists()


@needs_postgres
def test_it_refuses_a_duplicate_name_inline(owner_client, owner):
    make_cluster_row(owner, "db-new")
    response = owner_client.post(reverse("clusters:create"), _create_data())
    assert response.status_code == 200
    assert "You already have a cluster named" in response.content.decode()
    assert Cluster.objects.count() == 1


@needs_postgres
def test_it_says_so_when_redis_is_down_and_leaves_no_row(owner_client, redis_down):
    # The tests' REDIS_URL points at a port where nothing listens unless redis_server runs.
    response = owner_client.post(reverse("clusters:create"), _create_data())
    assert response.status_code == 200
    assert "The task queue" in response.content.decode()
    assert not Cluster.objects.exists()


@needs_postgres
def test_it_creates_a_cluster_and_shows_its_progress(owner_client, owner, redis_server):
    response = owner_client.post(reverse("clusters:create"), _create_data())
    cluster = Cluster.objects.get(owner=owner, name="db-new")
    assert response.status_code == 302
    assert response.url == reverse("clusters:detail", args=[cluster.pk])
    assert cluster.status == ClusterStatus.CREATING
    assert cluster.plan_slug == "db-s-1vcpu-1gb"
    page = owner_client.get(response.url).content.decode()
    assert "is being created" in page
    assert "data-while-busy" in page  # it leaves the page once the cluster is created (panel.js)
    assert 'hx-trigger="every 1s"' in page


def test_the_attach_form_defaults_to_sslmode_require_and_hides_the_password(staff_client):
    page = staff_client.get(reverse("clusters:attach")).content.decode()
    assert '<option value="require" selected>' in page
    assert 'type="password"' in page


def test_it_shows_a_connection_failure_next_to_the_attach_form(staff_client):
    data = {
        "name": "db-remote",
        "host": "127.0.0.1",
        "port": "1",
        "user": "postgres",
        "password": "typed-secret",
        "database": "postgres",
        "sslmode": "disable",
    }
    response = staff_client.post(reverse("clusters:attach"), data)
    page = response.content.decode()
    assert response.status_code == 200
    assert "Could not connect" in page
    assert 'class="alert alert-danger"' in page
    assert "typed-secret" not in page  # a password input is never echoed back
    assert not Cluster.objects.exists()


def test_it_refuses_an_invalid_attach_name_inline(staff_client):
    data = {"name": "X", "host": "h", "port": "5432", "user": "u", "password": "p", "database": "d"}
    data["sslmode"] = "require"
    response = staff_client.post(reverse("clusters:attach"), data)
    assert response.status_code == 200
    assert "A cluster name must be 3 to 63 characters long." in response.content.decode()
    assert not Cluster.objects.exists()


@pytest.mark.integration
def test_it_attaches_a_running_server(staff_client, local_cluster):
    admin = local_cluster.users.get(name="doadmin")
    data = {
        "name": "db-attached",
        "host": "127.0.0.1",
        "port": str(local_cluster.port),
        "user": "doadmin",
        "password": admin.password,
        "database": "defaultdb",
        "sslmode": "require",
    }
    response = staff_client.post(reverse("clusters:attach"), data)
    attached = Cluster.objects.get(name="db-attached")
    assert response.status_code == 302
    assert response.url == reverse("clusters:detail", args=[attached.pk])
    page = staff_client.get(response.url).content.decode()
    assert "Attached server" in page
    assert "Download CA certificate" not in page
    assert admin.password not in page
