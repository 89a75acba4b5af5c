"""The Users & Databases tab: HTMX forms with inline errors; changes checked on a real cluster.

Refusals happen before the panel reaches the server, so they run against a cluster row
(fast); the changes that must really happen in PostgreSQL use the ``local_cluster`` fixture.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from .conftest import APP_PASSWORD, can_log_in

HTMX = {"HX-Request": "true"}


def _post(client, url_name, cluster, data=None, **kwargs):
    url = reverse(url_name, kwargs={"cluster_id": cluster.pk, **kwargs})
    response = client.post(url, data or {}, headers=HTMX)
    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<div id="users-tab">'), "an HTMX post answers with the tab only"
    return text


def _names(queryset) -> list[str]:
    return sorted(queryset.values_list("name", flat=True))


# --- the page and its refusals (no server needed) ------------------------------------------------


def test_the_tab_marks_the_admin_user_and_default_database_as_protected(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:users", args=[cluster_row.pk])).content.decode()
    assert "<code>doadmin</code>" in page
    assert ">admin</span>" in page
    assert "<code>defaultdb</code>" in page
    assert reverse("clusters:user-delete", args=[cluster_row.pk, "app"]) in page
    assert reverse("clusters:user-delete", args=[cluster_row.pk, "doadmin"]) not in page
    assert reverse("clusters:database-delete", args=[cluster_row.pk, "appdb"]) in page
    assert reverse("clusters:database-delete", args=[cluster_row.pk, "defaultdb"]) not in page
    assert "hx-confirm=" in page
    assert APP_PASSWORD not in page


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [
        ("user", "doadmin", "is reserved"),
        ("user", "pg_monitor", "is reserved"),
        ("user", "bad name", "must start with a letter or underscore"),
        ("user", "app", "A user named “app” already exists."),
        ("user", "", "This field is required."),
        ("database", "defaultdb", "is reserved"),
        ("database", "template1", "is reserved"),
        ("database", "a b", "must start"),
        ("database", "appdb", "A database named “appdb” already exists."),
    ],
)
def test_it_refuses_bad_user_and_database_names_inline(owner_client, cluster_row, kind, name, message):
    before = {"user": ["app", "doadmin"], "database": ["appdb", "defaultdb"]}
    text = _post(owner_client, f"clusters:{kind}-add", cluster_row, {f"{kind}-name": name})
    assert message in text
    assert 'aria-invalid="true"' in text
    assert _names(getattr(cluster_row, f"{kind}s")) == before[kind]


@pytest.mark.parametrize("typed", [None, "", "App", "appdb", "app "])
def test_it_deletes_no_user_without_its_typed_name(owner_client, cluster_row, typed):
    data = {} if typed is None else {"confirm_name": typed}
    text = _post(owner_client, "clusters:user-delete", cluster_row, data, name="app")
    assert "Type the user name “app” to confirm." in text
    assert 'class="alert alert-danger' in text
    assert _names(cluster_row.users) == ["app", "doadmin"]
    assert not cluster_row.events.filter(kind="user-deleted").exists()


@pytest.mark.parametrize("typed", [None, "", "app", "appdb2"])
def test_it_deletes_no_database_without_its_typed_name(owner_client, cluster_row, typed):
    data = {} if typed is None else {"confirm_name": typed}
    text = _post(owner_client, "clusters:database-delete", cluster_row, data, name="appdb")
    assert "Type the database name “appdb” to confirm." in text
    assert _names(cluster_row.databases) == ["appdb", "defaultdb"]


def test_the_typed_name_refusal_is_german_on_a_german_page(owner_client, cluster_row):
    url = reverse("clusters:database-delete", args=[cluster_row.pk, "appdb"])
    response = owner_client.post(url, {"confirm_name": "x"}, headers={**HTMX, "Accept-Language": "de"})
    text = response.content.decode()
    assert response.status_code == 200
    assert "Geben Sie zur Bestätigung den Datenbanknamen „appdb“ ein." in text


def test_it_refuses_to_delete_the_admin_user_inline(owner_client, cluster_row):
    text = _post(
        owner_client, "clusters:user-delete", cluster_row, {"confirm_name": "doadmin"}, name="doadmin"
    )
    assert "is the admin user and cannot be deleted" in text
    assert 'class="alert alert-danger' in text
    assert cluster_row.users.filter(name="doadmin").exists()


def test_it_refuses_to_delete_the_default_database_inline(owner_client, cluster_row):
    text = _post(
        owner_client, "clusters:database-delete", cluster_row, {"confirm_name": "defaultdb"}, name="defaultdb"
    )
    assert "is the default database and cannot be deleted" in text
    assert cluster_row.databases.filter(name="defaultdb").exists()


def test_it_says_to_start_a_stopped_cluster_first(owner_client, cluster_row):
    cluster_row.status = "stopped"
    cluster_row.save()
    text = _post(owner_client, "clusters:user-add", cluster_row, {"user-name": "newuser"})
    assert "start it first" in text
    assert _names(cluster_row.users) == ["app", "doadmin"]


def test_without_htmx_the_forms_answer_with_the_whole_page(owner_client, cluster_row):
    url = reverse("clusters:database-add", args=[cluster_row.pk])
    response = owner_client.post(url, {"database-name": "defaultdb"})
    assert response.status_code == 200
    assert "<html" in response.content.decode()
    assert "is reserved" in response.content.decode()


# --- changes made for real ---------------------------------------------------------------------


@pytest.mark.integration
def test_it_adds_a_user_showing_its_password_once_then_deletes_it(owner_client, local_cluster):
    text = _post(owner_client, "clusters:user-add", local_cluster, {"user-name": "app"})
    password = local_cluster.users.get(name="app").password
    assert password in text
    assert f'data-copy-text="{password}"' in text
    assert can_log_in(local_cluster, "app", password)
    assert (
        password not in owner_client.get(reverse("clusters:users", args=[local_cluster.pk])).content.decode()
    )
    detail = owner_client.get(reverse("clusters:detail", args=[local_cluster.pk])).content.decode()
    assert '<option value="app">app</option>' in detail  # the connection box's user selector

    # A replayed or forged POST without the typed name (or with another) deletes nothing.
    for data in ({}, {"confirm_name": "doadmin"}):
        text = _post(owner_client, "clusters:user-delete", local_cluster, data, name="app")
        assert "Type the user name “app” to confirm." in text
        assert can_log_in(local_cluster, "app", password)
        assert local_cluster.users.filter(name="app").exists()

    text = _post(owner_client, "clusters:user-delete", local_cluster, {"confirm_name": "app"}, name="app")
    assert "User “app” deleted." in text
    assert "<code>app</code>" not in text
    assert not can_log_in(local_cluster, "app", password)


@pytest.mark.integration
def test_it_resets_a_password_and_the_old_one_stops_working(owner_client, local_cluster):
    old = local_cluster.users.get(name="doadmin").password
    text = _post(owner_client, "clusters:user-reset-password", local_cluster, name="doadmin")
    new = local_cluster.users.get(name="doadmin").password
    assert new != old
    assert new in text
    assert can_log_in(local_cluster, "doadmin", new)
    assert not can_log_in(local_cluster, "doadmin", old)


@pytest.mark.integration
def test_it_adds_and_deletes_a_database(owner_client, local_cluster):
    admin_password = local_cluster.users.get(name="doadmin").password
    text = _post(owner_client, "clusters:database-add", local_cluster, {"database-name": "benchmark"})
    assert "<code>benchmark</code>" in text
    assert can_log_in(local_cluster, "doadmin", admin_password, "benchmark")
    detail = owner_client.get(reverse("clusters:detail", args=[local_cluster.pk])).content.decode()
    assert '<option value="benchmark">benchmark</option>' in detail

    for data in ({}, {"confirm_name": "benchmar"}):
        text = _post(owner_client, "clusters:database-delete", local_cluster, data, name="benchmark")
        assert "Type the database name “benchmark” to confirm." in text
        assert can_log_in(local_cluster, "doadmin", admin_password, "benchmark")
        assert local_cluster.databases.filter(name="benchmark").exists()

    text = _post(
        owner_client,
        "clusters:database-delete",
        local_cluster,
        {"confirm_name": "benchmark"},
        name="benchmark",
    )
    assert "Database “benchmark” deleted." in text
    assert "<code>benchmark</code>" not in text
    assert not can_log_in(local_cluster, "doadmin", admin_password, "benchmark")
