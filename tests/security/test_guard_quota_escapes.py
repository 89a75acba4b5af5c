"""Issue 15: a database over its quota stays stopped whatever the tenant tries, until the panel
lists it no more.

One cluster for the module, provisioned by the service with the guard. The panel's superuser
lists a database in ``pgpanel_guard.readonly_databases`` (``ALTER SYSTEM`` and a reload, as the
panel's ``panel.conf`` would); the tenant then attacks as ``doadmin`` over TCP and TLS with its
real connection details: read-only settings of its own, the guard's setting, functions, another
role, copies and renames of the database. Beside them: a database not listed still writes, the
list is read as the panel writes it (quoted names), one the server cannot read is refused, and
writes work again once the database is no longer listed. What is stopped:
test_guard_quota_databases.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors

from panel.clusters.engine import dbconn
from tests.fixtures.write_stop import (
    DATABASE_STOPPED,
    DATABASES_SETTING,
    FREE_DB,
    FREE_ROLE,
    FROZEN_DB,
    OWNERS_SETTING,
    Quota,
    copy_in,
    count,
    frozen_database,
    listed,
    name,
    quota_cluster,
    show,
    stopped,
    wait_for_setting,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture(scope="module")
def quota(django_db_setup: None, django_db_blocker: object) -> Iterator[Quota]:
    with quota_cluster(django_db_blocker, "quota-escapes", "db-guard-quota-escapes") as found:
        yield found


@pytest.fixture
def frozen_db(quota: Quota) -> Iterator[psycopg.Connection]:
    """``doadmin`` in FROZEN_DB, once the database is listed (the session opened before)."""
    with frozen_database(quota) as conn:
        yield conn


# --- readonly_databases: the tenant cannot undo it -----------------------------------------------------


def test_read_only_settings_of_its_own_do_not_undo_it(frozen_db):
    frozen_db.execute("SET default_transaction_read_only = off")
    frozen_db.execute("SET transaction_read_only = off")
    stopped(frozen_db, "INSERT INTO items VALUES (1100, 'read-write')")
    with frozen_db.transaction():
        frozen_db.execute("SET TRANSACTION READ WRITE")
        stopped(frozen_db, "INSERT INTO items VALUES (1101, 'read-write')")


def test_the_setting_cannot_be_changed_by_the_tenant(quota, frozen_db):
    for statement in (
        f"SET {DATABASES_SETTING} = ''",
        f"SET LOCAL {DATABASES_SETTING} = 'defaultdb'",
        f"SET {OWNERS_SETTING} = ''",
        f"SELECT set_config('{DATABASES_SETTING}', '', false)",
        f"RESET {DATABASES_SETTING}",
    ):
        with pytest.raises(errors.CantChangeRuntimeParam):
            frozen_db.execute(statement)
    for statement in (
        f"ALTER DATABASE {FROZEN_DB} SET {DATABASES_SETTING} = ''",
        f"ALTER ROLE doadmin SET {DATABASES_SETTING} = ''",
        f"ALTER ROLE doadmin IN DATABASE {FROZEN_DB} SET {DATABASES_SETTING} = ''",
    ):
        with pytest.raises(psycopg.Error, match="cannot be changed now"):
            frozen_db.execute(statement)
    with pytest.raises(errors.InsufficientPrivilege, match="ALTER SYSTEM"):
        frozen_db.execute(f"ALTER SYSTEM SET {DATABASES_SETTING} = ''")
    with pytest.raises(psycopg.OperationalError, match="cannot be changed"):
        quota.tenant(options=f"-c {DATABASES_SETTING}=").close()
    assert show(frozen_db, DATABASES_SETTING) == FROZEN_DB
    stopped(frozen_db, "INSERT INTO items VALUES (1200, 'after the attempts')")


def test_a_database_setting_of_its_own_does_not_undo_it(quota, frozen_db):
    frozen_db.execute(f"ALTER DATABASE {FROZEN_DB} SET default_transaction_read_only = off")
    try:
        with quota.tenant() as fresh:
            stopped(fresh, "INSERT INTO items VALUES (1300, 'new session')")
    finally:
        frozen_db.execute(f"ALTER DATABASE {FROZEN_DB} RESET default_transaction_read_only")


def test_functions_of_its_own_do_not_undo_it(frozen_db):
    stopped(frozen_db, "SELECT add_item(1400)")  # SECURITY DEFINER, owned by doadmin
    frozen_db.execute(
        "CREATE FUNCTION quota_sneak() RETURNS void LANGUAGE plpgsql SECURITY DEFINER "
        "AS $$ BEGIN INSERT INTO items VALUES (1401, 'plpgsql'); "
        "CREATE TABLE quota_sneaked AS SELECT * FROM items; END $$"
    )
    try:
        stopped(frozen_db, "SELECT quota_sneak()")
        stopped(frozen_db, "DO $$ BEGIN EXECUTE 'INSERT INTO items VALUES (1402, ''do'')'; END $$")
        stopped(frozen_db, "DO $$ BEGIN CREATE TABLE quota_do (id int); END $$")
        frozen_db.execute("PREPARE quota_prepared AS INSERT INTO items VALUES ($1, 'prepared')")
        stopped(frozen_db, "EXECUTE quota_prepared(1403)")
    finally:
        frozen_db.execute("DROP FUNCTION quota_sneak()")
        frozen_db.execute("DEALLOCATE ALL")
    assert frozen_db.execute("SELECT count(*) FROM items WHERE id >= 1400").fetchone() == (0,)


def test_another_role_of_the_tenant_does_not_undo_it(quota, frozen_db):
    frozen_db.execute(f"SET ROLE {FREE_ROLE}")
    try:
        assert frozen_db.execute("SELECT current_user").fetchone() == (FREE_ROLE,)
        stopped(frozen_db, "INSERT INTO items VALUES (1500, 'set role')")
        assert count(frozen_db) == 100  # its grants still work for reading
    finally:
        frozen_db.execute("RESET ROLE")
    with quota.as_role(FREE_ROLE, FROZEN_DB) as conn:  # logged in as that role
        stopped(conn, "UPDATE items SET note = 'login' WHERE id = 1")


def test_new_tables_and_copies_do_not_undo_it(quota, frozen_db):
    stopped(frozen_db, "CREATE TABLE items_copy (id int, note text)")
    stopped(frozen_db, "CREATE TABLE items_copy AS SELECT * FROM items")
    with pytest.raises(errors.DiskFull):
        copy_in(frozen_db, "COPY items (id, note) FROM STDIN", [1600, "stdin"])
    with quota.tenant("defaultdb") as conn:
        # A copy of the frozen database, or the frozen one under another name, would escape it.
        stopped(conn, f"CREATE DATABASE quota_clone TEMPLATE {FROZEN_DB}", DATABASE_STOPPED)
        stopped(conn, f"ALTER DATABASE {FROZEN_DB} RENAME TO quota_renamed", DATABASE_STOPPED)
        conn.execute("CREATE DATABASE quota_clone_ok TEMPLATE template0")  # another database: fine
        conn.execute("DROP DATABASE quota_clone_ok")


def test_writes_in_a_database_not_listed_still_work(quota, frozen_db):
    with quota.tenant(FREE_DB) as conn:
        table = name("free")
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
        conn.execute(f"INSERT INTO {table} SELECT generate_series(1, 10)")
        conn.execute(f"UPDATE {table} SET id = id + 100")
        conn.execute(f"CREATE INDEX ON {table} (id)")
        copy_in(conn, f"COPY {table} FROM STDIN", [1])
        assert count(conn, table) == 11
        conn.execute(f"DROP TABLE {table}")
    stopped(frozen_db, "INSERT INTO items VALUES (1700, 'still frozen here')")


def test_names_are_read_as_the_panel_writes_them_quoted(quota):
    odd = name("Quota-Odd")  # capitals and a dash: only a quoted identifier names it
    with quota.tenant("defaultdb") as conn:
        conn.execute(f'CREATE DATABASE "{odd}"')
    try:
        with listed(quota, DATABASES_SETTING, f'"{FREE_DB}","{odd}"'), quota.tenant(odd) as conn:
            stopped(
                conn,
                "CREATE TABLE t (id int)",
                f'database "{odd}" is over its storage quota: writes are stopped',
            )
            with quota.tenant(FROZEN_DB) as other:  # not listed this time
                other.execute(
                    "INSERT INTO items VALUES (1900, 'not listed'); DELETE FROM items WHERE id = 1900"
                )
    finally:
        with quota.tenant("defaultdb") as conn:
            conn.execute(f'DROP DATABASE "{odd}" WITH (FORCE)')


def test_a_list_the_server_cannot_read_is_refused_and_the_old_one_kept(quota):
    with dbconn.admin_connection(quota.cluster) as conn:
        for setting in (DATABASES_SETTING, OWNERS_SETTING):
            with pytest.raises(errors.InvalidParameterValue, match="List syntax is invalid"):
                conn.execute(f"""ALTER SYSTEM SET {setting} = '"unterminated'""")
        assert show(conn, DATABASES_SETTING) == ""


def test_writes_work_again_once_the_database_is_no_longer_listed(quota):
    with quota.tenant() as before:
        with listed(quota, DATABASES_SETTING, FROZEN_DB):
            wait_for_setting(before, DATABASES_SETTING, FROZEN_DB)
            stopped(before, "INSERT INTO items VALUES (1800, 'frozen')")
        wait_for_setting(before, DATABASES_SETTING, "")
        before.execute("INSERT INTO items VALUES (1800, 'an existing session')")
        with quota.tenant() as fresh:
            fresh.execute("INSERT INTO items VALUES (1801, 'a new session')")
            fresh.execute("CREATE TABLE quota_after (id int); DROP TABLE quota_after")
        before.execute("DELETE FROM items WHERE id IN (1800, 1801)")
