"""Integration: users and databases on a real cluster, checked by logging in as a client would."""

from __future__ import annotations

import psycopg
import pytest

from panel.clusters import services
from panel.clusters.engine import dbconn
from panel.clusters.services import roles
from panel.core.errors import ServiceError

from .conftest import can_log_in

pytestmark = pytest.mark.integration


def test_users_databases_and_passwords_on_a_live_cluster(local_cluster):
    cluster = local_cluster

    # A database, owned by doadmin, reachable with doadmin's details.
    database = roles.add_database(cluster, "benchmark")
    assert (database.name, database.owner_name, database.is_protected) == ("benchmark", "doadmin", False)
    details = services.connection_details(cluster, database="benchmark")
    with psycopg.connect(details.uri()) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("benchmark",)

    # A user who logs in with the password the panel shows.
    user = roles.add_user(cluster, "app")
    first_password = user.password
    assert services.connection_details(cluster, user="app").password == first_password
    assert can_log_in(cluster, "app", first_password)
    with dbconn.admin_connection(cluster) as conn:
        flags = conn.execute(
            "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = 'app'"
        )
        assert flags.fetchone() == (False, False, False)

    # Reset: the old password stops working, the new one works.
    user = roles.reset_password(cluster, "app")
    assert user.password != first_password
    assert not can_log_in(cluster, "app", first_password)
    assert can_log_in(cluster, "app", user.password)
    assert cluster.users.get(name="app").password == user.password

    # doadmin's password can be reset on a cluster the panel runs.
    old_admin = cluster.users.get(name="doadmin").password
    admin = roles.reset_password(cluster, "doadmin")
    assert not can_log_in(cluster, "doadmin", old_admin)
    assert can_log_in(cluster, "doadmin", admin.password)

    # Deleted: the row goes and the user can no longer log in.
    roles.delete_user(cluster, "app")
    assert not cluster.users.filter(name="app").exists()
    assert not can_log_in(cluster, "app", user.password)

    roles.delete_database(cluster, "benchmark")
    assert not cluster.databases.filter(name="benchmark").exists()
    with dbconn.admin_connection(cluster) as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'benchmark'").fetchone() == (0,)

    kinds = set(cluster.events.values_list("kind", flat=True))
    assert {"database-added", "user-added", "password-reset", "user-deleted", "database-deleted"} <= kinds


def test_duplicates_reserved_names_and_protected_objects_are_refused(local_cluster):
    cluster = local_cluster
    roles.add_database(cluster, "benchmark")
    roles.add_user(cluster, "app")

    for add, name, message in [
        (roles.add_database, "benchmark", "already exists"),
        (roles.add_user, "app", "already exists"),
        (roles.add_database, "defaultdb", "reserved"),
        (roles.add_database, "postgres", "reserved"),
        (roles.add_database, "template1", "reserved"),
        (roles.add_user, "doadmin", "reserved"),
        (roles.add_user, "postgres", "reserved"),
        (roles.add_user, "pgpanel", "reserved"),
        (roles.add_user, "pg_monitor", "reserved"),
        (roles.add_user, "bad name", "letters"),
        (roles.add_database, "x" * 64, "63 bytes"),
    ]:
        with pytest.raises(ServiceError, match=message) as refused:
            add(cluster, name)
        assert refused.value.field == "name", name

    for delete, name, message in [
        (roles.delete_user, "doadmin", "admin user and cannot be deleted"),
        (roles.delete_database, "defaultdb", "default database and cannot be deleted"),
        (roles.delete_user, "ghost", "No user named"),
        (roles.delete_database, "ghost", "No database named"),
    ]:
        with pytest.raises(ServiceError, match=message):
            delete(cluster, name)
    assert set(cluster.users.values_list("name", flat=True)) == {"doadmin", "app"}
    assert set(cluster.databases.values_list("name", flat=True)) == {"defaultdb", "benchmark"}
    doadmin = cluster.users.get(name="doadmin")
    assert can_log_in(cluster, "doadmin", doadmin.password)

    # Changes need a running server.
    services.perform_action(cluster, "stop")
    cluster.refresh_from_db()
    for change, name in [
        (roles.add_user, "app2"),
        (roles.add_database, "benchmark2"),
        (roles.reset_password, "doadmin"),
        (roles.delete_user, "app"),
    ]:
        with pytest.raises(ServiceError, match="start it first"):
            change(cluster, name)
    assert set(cluster.users.values_list("name", flat=True)) == {"doadmin", "app"}
