"""PostgreSQL's refusals of a change on the Users & Databases tab, replayed on a real cluster: the
form shows the panel's sentence in the page's language with the user's own name, never the
server's English words (issue 38); the change beside each refusal still goes through."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import translation

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.core.errors import ServiceError

from .conftest import connect_as_client

pytestmark = pytest.mark.integration

HTMX = {"HX-Request": "true"}


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Cluster:
    """One real cluster for the module; each test drops on the server what it made there."""
    return shared_local_cluster


def _on_server(cluster: Cluster, statement: str) -> None:
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(statement)


def test_a_role_made_outside_the_panel_is_refused_in_the_pages_language(cluster, owner_client, caplog):
    _on_server(cluster, 'CREATE ROLE "outside"')
    try:
        with pytest.raises(ServiceError) as refused:
            roles.add_user(cluster, "outside")
        assert refused.value.code == "user.name_taken" and refused.value.field == "name"
        assert refused.value.message == (
            "The server already has a user or role named “outside” (made outside the panel). Choose another name."
        )
        with translation.override("de"):
            assert "„outside“" in refused.value.message and "Server" in refused.value.message
        assert 'role "outside" already exists' in caplog.text  # the server's words: the log's

        url = reverse("clusters:user-add", args=[cluster.pk])
        page = owner_client.post(url, {"user-name": "outside"}, headers={**HTMX, "Accept-Language": "de"})
        text = page.content.decode()
        assert "„outside“" in text and "already exists" not in text and 'role "outside"' not in text
        assert not cluster.users.filter(name="outside").exists()
    finally:
        _on_server(cluster, 'DROP ROLE IF EXISTS "outside"')

    # Beside it: a name the server does not have is added.
    user = roles.add_user(cluster, "inside")
    assert user.password
    roles.delete_user(cluster, "inside")


def test_a_database_made_outside_the_panel_is_refused_with_its_name(cluster):
    _on_server(cluster, 'CREATE DATABASE "elsewhere"')
    try:
        with pytest.raises(ServiceError) as refused:
            roles.add_database(cluster, "elsewhere")
        assert refused.value.code == "database.name_taken"
        assert "“elsewhere”" in refused.value.message and "already exists" not in refused.value.message
    finally:
        _on_server(cluster, 'DROP DATABASE IF EXISTS "elsewhere"')


def test_a_database_in_use_is_not_dropped_and_says_so(cluster):
    roles.add_database(cluster, "busy")
    client = connect_as_client(cluster, dbname="busy")
    try:
        with pytest.raises(ServiceError) as refused:
            roles.delete_database(cluster, "busy", confirm_name="busy")
        assert refused.value.code == "cluster.server_object_in_use"
        assert refused.value.message.startswith("The database “busy” is in use by other sessions")
        assert "being accessed by other users" not in refused.value.message
        with translation.override("de"):
            assert "„busy“" in refused.value.message and "in use" not in refused.value.message
        assert cluster.databases.filter(name="busy").exists()
    finally:
        client.close()
    # Its connections gone, the same delete goes through.
    roles.delete_database(cluster, "busy", confirm_name="busy")
    assert not cluster.databases.filter(name="busy").exists()


def test_a_user_that_owns_objects_is_not_dropped_and_says_what_to_do(cluster):
    roles.add_user(cluster, "owner1")
    with connect_as_client(cluster, autocommit=True) as conn:  # doadmin, as a tenant would
        conn.execute('GRANT CONNECT ON DATABASE defaultdb TO "owner1"')
    try:
        with pytest.raises(ServiceError) as refused:
            roles.delete_user(cluster, "owner1", confirm_name="owner1")
        assert refused.value.code == "cluster.server_dependents"
        assert "“owner1” still owns objects" in refused.value.message
        assert "depend on it" not in refused.value.message
        assert cluster.users.filter(name="owner1").exists()
    finally:
        with connect_as_client(cluster, autocommit=True) as conn:
            conn.execute('REVOKE CONNECT ON DATABASE defaultdb FROM "owner1"')
    # Its privilege taken back, the same delete goes through.
    roles.delete_user(cluster, "owner1", confirm_name="owner1")
    assert not cluster.users.filter(name="owner1").exists()
