"""Issue 15: the guard stops writes for real in a database or on a role's tables over its quota.

One cluster for the module, provisioned by the service with the guard. The panel's superuser
lists a database in ``pgpanel_guard.readonly_databases`` or a role in
``pgpanel_guard.readonly_owners`` (``ALTER SYSTEM`` and a reload, as the panel's ``panel.conf``
would); the tenant then attacks as ``doadmin`` over TCP and TLS with its real connection details.
Every refusal sits next to the legitimate action beside it, which must keep working: reads and
the ways back under the quota (DELETE then VACUUM, TRUNCATE, DROP).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest
from django.conf import settings
from psycopg import errors

from panel.clusters import services
from panel.clusters.engine import dbconn, guard
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster, credentials
from tests.fixtures.clusters import module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

FROZEN_DB = "quota_db"
FREE_DB = "free_db"
FROZEN_ROLE = "quota_app"
FREE_ROLE = "free_app"
ROLE_PASSWORD = "quota-password-1"
DATABASES_SETTING = "pgpanel_guard.readonly_databases"
OWNERS_SETTING = "pgpanel_guard.readonly_owners"
HINT = (
    "Delete data (DELETE then VACUUM, TRUNCATE or DROP) to get back under the quota, "
    "or ask for a larger quota."
)
DATABASE_STOPPED = f'database "{FROZEN_DB}" is over its storage quota: writes are stopped'
ROLE_STOPPED = f'role "{FROZEN_ROLE}" is over its storage quota: writes to its tables are stopped'


@dataclass(frozen=True)
class Quota:
    cluster: Cluster
    details: ConnectionDetails

    def tenant(self, database: str = FROZEN_DB, **kwargs: object) -> psycopg.Connection:
        details = dataclasses.replace(self.details, database=database)
        return psycopg.connect(details.uri(), autocommit=True, **kwargs)  # type: ignore[arg-type]

    def as_role(self, role: str, database: str = FREE_DB) -> psycopg.Connection:
        details = dataclasses.replace(self.details, user=role, password=ROLE_PASSWORD, database=database)
        return psycopg.connect(details.uri(), autocommit=True)

    def superuser_in(self, database: str) -> psycopg.Connection:
        """The panel's superuser inside a tenant's database: only to show it is exempt."""
        cluster = self.cluster
        return psycopg.connect(
            host=str(cluster.socket_dir),
            port=cluster.port,
            user=settings.PANEL_SUPERUSER,
            password=credentials.superuser_password(cluster),
            dbname=database,
            autocommit=True,
        )


def seed_frozen_database(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE items (id int PRIMARY KEY, note text)")
    conn.execute("INSERT INTO items SELECT g, 'row ' || g FROM generate_series(1, 100) g")
    conn.execute("CREATE TABLE plain (id int, note text)")  # no view on it: ALTER TYPE would work
    conn.execute("INSERT INTO plain SELECT g, 'row ' || g FROM generate_series(1, 100) g")
    conn.execute("CREATE VIEW items_view AS SELECT * FROM items")
    conn.execute("CREATE MATERIALIZED VIEW items_mv AS SELECT count(*) AS n FROM items")
    conn.execute(
        "CREATE FUNCTION add_item(i int) RETURNS void LANGUAGE sql SECURITY DEFINER "
        "AS $$ INSERT INTO items VALUES (i, 'definer') $$"
    )
    conn.execute(f"GRANT ALL ON items TO {FREE_ROLE}")
    conn.execute("CREATE TABLE parent (id int PRIMARY KEY)")
    conn.execute("CREATE TABLE child_cascade (pid int REFERENCES parent ON DELETE CASCADE)")
    conn.execute("CREATE TABLE child_set_null (pid int REFERENCES parent ON DELETE SET NULL)")
    conn.execute("INSERT INTO parent VALUES (1), (2), (3)")
    conn.execute("INSERT INTO child_cascade VALUES (1), (3); INSERT INTO child_set_null VALUES (2), (3)")


def seed_owner_tables(conn: psycopg.Connection) -> None:
    """In FREE_DB: tables of the frozen role and of another, a partitioned table mixing both."""
    conn.execute(f"GRANT CREATE ON SCHEMA public TO {FROZEN_ROLE}, {FREE_ROLE}")
    conn.execute(f"CREATE TABLE frozen_t (id int, note text); ALTER TABLE frozen_t OWNER TO {FROZEN_ROLE}")
    conn.execute(f"CREATE TABLE free_t (id int, note text); ALTER TABLE free_t OWNER TO {FREE_ROLE}")
    conn.execute("CREATE TABLE parted (id int, note text) PARTITION BY RANGE (id)")
    conn.execute("CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100)")
    conn.execute("CREATE TABLE parted_high PARTITION OF parted FOR VALUES FROM (100) TO (200)")
    conn.execute(f"ALTER TABLE parted OWNER TO {FREE_ROLE}; ALTER TABLE parted_low OWNER TO {FREE_ROLE}")
    conn.execute(f"ALTER TABLE parted_high OWNER TO {FROZEN_ROLE}")
    conn.execute("CREATE MATERIALIZED VIEW frozen_mv AS SELECT 1 AS n")
    conn.execute(f"ALTER MATERIALIZED VIEW frozen_mv OWNER TO {FROZEN_ROLE}")
    conn.execute("INSERT INTO frozen_t SELECT g, 'seed' FROM generate_series(1, 10) g")
    conn.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {FROZEN_ROLE}, {FREE_ROLE}")


@pytest.fixture(scope="module")
def quota(django_db_setup: None, django_db_blocker: object) -> Iterator[Quota]:
    with module_cluster(django_db_blocker, "quota-tenant", "db-guard-quota") as cluster:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            quota = Quota(cluster, services.connection_details(cluster))
        with quota.tenant("defaultdb") as conn:
            conn.execute(f"CREATE DATABASE {FROZEN_DB}")
            conn.execute(f"CREATE DATABASE {FREE_DB}")
            for role in (FROZEN_ROLE, FREE_ROLE):
                conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{ROLE_PASSWORD}'")
                conn.execute(f"GRANT {role} TO doadmin")
        with quota.tenant(FROZEN_DB) as conn:
            seed_frozen_database(conn)
        with quota.tenant(FREE_DB) as conn:
            seed_owner_tables(conn)
        yield quota


def show(conn: psycopg.Connection, setting: str) -> str:
    return conn.execute(f"SHOW {setting}").fetchone()[0]


def wait_for_setting(conn: psycopg.Connection, setting: str, value: str) -> None:
    """A reload reaches a session at its next statement once the postmaster has passed it on."""
    deadline = time.monotonic() + 10
    while show(conn, setting) != value:
        if time.monotonic() > deadline:
            pytest.fail(f"{setting} is still {show(conn, setting)!r}, not {value!r}, 10 s after the reload")
        time.sleep(0.05)


def configure(quota: Quota, setting: str, value: str) -> None:
    """What the panel does: the server's configuration changed, then reloaded."""
    with dbconn.admin_connection(quota.cluster) as conn:
        if value:
            conn.execute(f"ALTER SYSTEM SET {setting} = '{value}'")
        else:
            conn.execute(f"ALTER SYSTEM RESET {setting}")
        conn.execute("SELECT pg_reload_conf()")
    with quota.tenant("defaultdb") as conn:
        wait_for_setting(conn, setting, value)


@contextmanager
def listed(quota: Quota, setting: str, value: str) -> Iterator[None]:
    configure(quota, setting, value)
    try:
        yield
    finally:
        configure(quota, setting, "")


@pytest.fixture
def frozen_db(quota: Quota) -> Iterator[psycopg.Connection]:
    """``doadmin`` in FROZEN_DB, once the database is listed (the session opened before)."""
    with quota.tenant() as conn, listed(quota, DATABASES_SETTING, FROZEN_DB):
        wait_for_setting(conn, DATABASES_SETTING, FROZEN_DB)
        yield conn


@pytest.fixture
def frozen_role(quota: Quota) -> Iterator[psycopg.Connection]:
    """``doadmin`` in FREE_DB, once FROZEN_ROLE is listed."""
    with quota.tenant(FREE_DB) as conn, listed(quota, OWNERS_SETTING, FROZEN_ROLE):
        wait_for_setting(conn, OWNERS_SETTING, FROZEN_ROLE)
        yield conn


def stopped(conn: psycopg.Connection, statement: str, message: str = DATABASE_STOPPED) -> None:
    """``statement`` is refused by the guard with the quota's disk_full error."""
    with pytest.raises(errors.DiskFull) as caught:
        conn.execute(statement)  # type: ignore[arg-type]
    diag = caught.value.diag
    assert diag.sqlstate == "53100"
    assert diag.message_primary == message
    assert "still work" in (diag.message_detail or "") or "cannot be" in (diag.message_detail or "")
    assert diag.message_hint == HINT
    assert diag.source_file == "write_stop.c"  # the write stop refused, not PostgreSQL on its own


def copy_in(conn: psycopg.Connection, statement: str, row: list[object]) -> None:
    """``COPY … FROM STDIN`` as psql's \\copy does it: the row goes over the wire."""
    with conn.cursor() as cur, cur.copy(statement) as copy:  # type: ignore[arg-type]
        copy.write_row(row)


def count(conn: psycopg.Connection, table: str = "items") -> int:
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def name(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(3)}"


# --- the build under test ---------------------------------------------------------------------------


def test_the_cluster_runs_this_build_of_the_guard_with_both_settings_empty(quota):
    pg_config = guard.pg_config_for(quota.cluster.version)
    library = guard.library_path(quota.cluster.version)
    stamp = (library.parent / guard.STAMP).read_text().strip()
    assert stamp == guard._digest(pg_config)  # built from this worktree's sources, not a stale copy
    with dbconn.admin_connection(quota.cluster) as conn:
        assert show(conn, "shared_preload_libraries") == f'"{library}", "pg_stat_statements"'
    with quota.tenant() as conn:
        assert show(conn, DATABASES_SETTING) == ""
        assert show(conn, OWNERS_SETTING) == ""
        conn.execute("INSERT INTO items VALUES (1000, 'writes work') ; DELETE FROM items WHERE id = 1000")


# --- readonly_databases: what is refused --------------------------------------------------------------


DML_STOPPED = [
    "INSERT INTO items VALUES (1001, 'new')",
    "INSERT INTO items VALUES (1, 'again') ON CONFLICT (id) DO UPDATE SET note = excluded.note",
    "INSERT INTO items VALUES (1, 'again') ON CONFLICT DO NOTHING",
    "UPDATE items SET note = 'changed' WHERE id = 1",
    "UPDATE items SET note = repeat('x', 1000)",
    "INSERT INTO items_view VALUES (1002, 'through a view')",
    "MERGE INTO items t USING (VALUES (1003, 'm')) s(id, note) ON t.id = s.id "
    "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.note)",
    "MERGE INTO items t USING (VALUES (1, 'm')) s(id, note) ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET note = s.note",
    "WITH moved AS (INSERT INTO items VALUES (1004, 'cte') RETURNING id) SELECT * FROM moved",
    "WITH gone AS (DELETE FROM items WHERE id = 100 RETURNING *) INSERT INTO items SELECT id + 2000, note FROM gone",
]


@pytest.mark.parametrize("statement", DML_STOPPED)
def test_writes_are_stopped_in_a_listed_database(frozen_db, statement):
    before = frozen_db.execute(
        "SELECT count(*), md5(string_agg(note, ',' ORDER BY id)) FROM items"
    ).fetchone()
    stopped(frozen_db, statement)
    after = frozen_db.execute("SELECT count(*), md5(string_agg(note, ',' ORDER BY id)) FROM items").fetchone()
    assert after == before


def test_copy_from_stdin_is_stopped_and_copy_to_stdout_works(frozen_db):
    with pytest.raises(errors.DiskFull, match="is over its storage quota"):
        copy_in(frozen_db, "COPY items FROM STDIN", [5000, "copied"])
    with frozen_db.cursor() as cur, cur.copy("COPY (SELECT note FROM items WHERE id = 1) TO STDOUT") as copy:
        assert [bytes(chunk).decode() for chunk in copy] == ["row 1\n"]
    assert frozen_db.execute("SELECT count(*) FROM items WHERE id = 5000").fetchone() == (0,)


UTILITY_STOPPED = [
    "CREATE TABLE {n} (id int)",
    "CREATE TEMP TABLE {n} (id int)",
    "CREATE UNLOGGED TABLE {n} (id int)",
    "CREATE TABLE {n} (LIKE items INCLUDING ALL)",
    "CREATE TABLE {n} AS SELECT * FROM items",
    "SELECT * INTO {n} FROM items",
    "CREATE MATERIALIZED VIEW {n} AS SELECT * FROM items",
    "EXPLAIN ANALYZE CREATE TABLE {n} AS SELECT * FROM items",
    "CREATE SEQUENCE {n}",
    "CREATE INDEX {n} ON items (note)",
    "CREATE UNIQUE INDEX {n} ON items (id, note)",
    "REFRESH MATERIALIZED VIEW items_mv",
    "CLUSTER items USING items_pkey",
    "ALTER TABLE plain ALTER COLUMN note TYPE varchar(200)",
    "ALTER TABLE plain ALTER COLUMN id TYPE bigint USING id * 1000000000",
    "ALTER TABLE items ADD COLUMN {n} text DEFAULT repeat('x', 100)",
    "ALTER TABLE items ADD COLUMN {n} float8 DEFAULT random()",
    "ALTER TABLE items ADD COLUMN {n} int GENERATED ALWAYS AS (id * 2) STORED",
    "ALTER TABLE items ADD CONSTRAINT {n} UNIQUE (id, note)",
    "ALTER TABLE plain SET UNLOGGED",
    "CREATE DATABASE {n}",
]


@pytest.mark.parametrize("statement", UTILITY_STOPPED)
def test_statements_that_make_new_data_are_stopped(frozen_db, statement):
    relations = count(frozen_db, "pg_class")
    stopped(frozen_db, statement.format(n=name("quota_new")))
    assert count(frozen_db, "pg_class") == relations


def test_reads_and_the_ways_back_under_the_quota_still_work(restore_frozen_db, frozen_db):
    assert count(frozen_db) == 100
    assert frozen_db.execute("SELECT n FROM items_mv").fetchone() == (100,)
    assert count(frozen_db, "items_view") == 100
    with frozen_db.transaction():  # a row lock asks for UPDATE rights but writes no data
        assert frozen_db.execute("SELECT id FROM items WHERE id = 1 FOR UPDATE").fetchone() == (1,)
        frozen_db.execute("SELECT id FROM items WHERE id = 2 FOR NO KEY UPDATE")
    frozen_db.execute("DELETE FROM items WHERE id > 90")
    frozen_db.execute("MERGE INTO items t USING (VALUES (90)) s(id) ON t.id = s.id WHEN MATCHED THEN DELETE")
    frozen_db.execute("WITH gone AS (DELETE FROM items WHERE id = 89 RETURNING id) SELECT * FROM gone")
    assert count(frozen_db) == 88
    frozen_db.execute("VACUUM items")
    frozen_db.execute("VACUUM (FULL, ANALYZE) items")
    frozen_db.execute("ANALYZE items")
    frozen_db.execute("REINDEX TABLE items")
    frozen_db.execute("ALTER TABLE plain ADD COLUMN extra text")  # no rewrite, no new data
    frozen_db.execute("ALTER TABLE plain RENAME COLUMN extra TO spare")
    frozen_db.execute("ALTER TABLE plain DROP COLUMN spare")
    frozen_db.execute("CREATE VIEW quota_recent AS SELECT * FROM items WHERE id > 50")
    frozen_db.execute("DROP VIEW quota_recent")
    frozen_db.execute("DROP MATERIALIZED VIEW items_mv")
    frozen_db.execute("TRUNCATE items")
    assert count(frozen_db) == 0
    frozen_db.execute("DROP TABLE items CASCADE")  # the view and the function's table go with it
    stopped(frozen_db, "CREATE TABLE items (id int PRIMARY KEY, note text)")


@pytest.fixture
def restore_frozen_db(quota):
    """Puts FROZEN_DB's objects back after a test that deleted them (set up before ``frozen_db``,
    so torn down after it: the database is no longer listed by then)."""
    yield
    with quota.tenant() as conn:
        conn.execute("DROP TABLE IF EXISTS items, plain, parent, child_cascade, child_set_null CASCADE")
        conn.execute("DROP MATERIALIZED VIEW IF EXISTS items_mv")
        conn.execute("DROP FUNCTION IF EXISTS add_item, quota_fill")
        seed_frozen_database(conn)


def test_deletes_work_whatever_the_foreign_keys_do(restore_frozen_db, frozen_db):
    # The keys' actions run an UPDATE of the child (SET NULL) even when no child row matches.
    frozen_db.execute("DELETE FROM parent WHERE id = 1")  # ON DELETE CASCADE: its child rows go too
    frozen_db.execute("DELETE FROM parent WHERE id = 2")  # ON DELETE SET NULL: the child row stays
    assert frozen_db.execute("SELECT pid FROM child_set_null ORDER BY pid").fetchall() == [(3,), (None,)]
    assert frozen_db.execute("SELECT pid FROM child_cascade").fetchall() == [(3,)]
    stopped(frozen_db, "UPDATE parent SET id = 30 WHERE id = 3")
    stopped(frozen_db, "UPDATE child_set_null SET pid = 3 WHERE pid IS NULL")
    frozen_db.execute("TRUNCATE parent CASCADE")
    assert [count(frozen_db, t) for t in ("parent", "child_cascade", "child_set_null")] == [0, 0, 0]


GROW_ITEMS = "UPDATE items SET note = repeat(md5(random()::text), 1000)"
FILL_TRIGGER = (
    "CREATE TRIGGER quota_fill {} UPDATE ON child_set_null FOR EACH ROW EXECUTE FUNCTION quota_fill()"
)
FOREIGN_KEY_ACTION_ABUSES = {  # user code the child's UPDATE by the key's action runs
    "a BEFORE trigger updating another table": [
        f"CREATE FUNCTION quota_fill() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {GROW_ITEMS}; RETURN NEW; END $$",
        FILL_TRIGGER.format("BEFORE"),
    ],
    "a BEFORE trigger filling the row": [
        "CREATE FUNCTION quota_fill() RETURNS trigger LANGUAGE plpgsql "
        "AS $$ BEGIN NEW.note := repeat(md5(random()::text), 1000); RETURN NEW; END $$",
        FILL_TRIGGER.format("BEFORE"),
    ],
    "an AFTER trigger updating another table": [  # fired once the action is over: refused as ever
        f"CREATE FUNCTION quota_fill() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {GROW_ITEMS}; RETURN NEW; END $$",
        FILL_TRIGGER.format("AFTER"),
    ],
    "a CHECK constraint's function updating another table": [
        f"CREATE FUNCTION quota_fill(int) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN {GROW_ITEMS}; RETURN true; END $$",
        "ALTER TABLE child_set_null ADD CONSTRAINT quota_fill CHECK (quota_fill(pid)) NOT VALID",
    ],
}


@pytest.mark.parametrize("setup", FOREIGN_KEY_ACTION_ABUSES.values(), ids=FOREIGN_KEY_ACTION_ABUSES.keys())
def test_user_code_run_by_a_foreign_keys_action_does_not_write_past_the_stop(
    restore_frozen_db, frozen_db, setup
):
    """ON DELETE SET NULL updates the child in a context only the referential integrity code sets,
    and the guard lets that UPDATE of the key through; the user code it runs is in the same
    context, and what it writes (another table, the row itself filled) is refused, with the
    DELETE that ran it."""
    frozen_db.execute("ALTER TABLE child_set_null ADD COLUMN note text")  # no data: allowed
    for statement in setup:
        frozen_db.execute(statement)
    sizes = "SELECT pg_total_relation_size('items') + pg_total_relation_size('child_set_null')"
    before = frozen_db.execute(sizes).fetchone()
    stopped(frozen_db, "DELETE FROM parent WHERE id = 2")
    assert frozen_db.execute(sizes).fetchone() == before
    frozen_db.execute("DROP FUNCTION quota_fill CASCADE")  # beside: the action alone still works
    frozen_db.execute("DELETE FROM parent WHERE id = 2")
    assert frozen_db.execute("SELECT pid FROM child_set_null ORDER BY pid").fetchall() == [(3,), (None,)]


def test_a_foreign_keys_set_default_writes_no_default_past_the_stop(quota):
    """ON DELETE SET DEFAULT writes the keys' defaults, whatever they are: a composite key
    MATCH SIMPLE with a NULL in it needs no parent row. With a default on a key the DELETE that
    would write it is refused; without one the action sets NULL and goes through."""
    with quota.tenant() as conn:
        conn.execute("CREATE TABLE quota_keyed (a int, b text, UNIQUE (a, b))")
        conn.execute("INSERT INTO quota_keyed VALUES (1, 'k'), (2, 'k')")
        conn.execute(
            "CREATE TABLE quota_defaulted (a int, b text, "
            "FOREIGN KEY (a, b) REFERENCES quota_keyed (a, b) ON DELETE SET DEFAULT)"
        )
        conn.execute("INSERT INTO quota_defaulted SELECT g % 2 + 1, 'k' FROM generate_series(1, 50) g")
        try:
            with listed(quota, DATABASES_SETTING, FROZEN_DB):
                wait_for_setting(conn, DATABASES_SETTING, FROZEN_DB)
                conn.execute(
                    "CREATE FUNCTION quota_big() RETURNS text LANGUAGE sql VOLATILE "
                    "AS $$ SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 20000) $$"
                )
                conn.execute("ALTER TABLE quota_defaulted ALTER COLUMN b SET DEFAULT quota_big()")
                size = "SELECT pg_total_relation_size('quota_defaulted')"
                before = conn.execute(size).fetchone()
                stopped(conn, "DELETE FROM quota_keyed WHERE a = 1")
                assert conn.execute(size).fetchone() == before
                conn.execute("ALTER TABLE quota_defaulted ALTER COLUMN b DROP DEFAULT")  # beside: no default
                conn.execute("DELETE FROM quota_keyed WHERE a = 1")
                assert conn.execute("SELECT count(*) FROM quota_defaulted WHERE a IS NULL").fetchone() == (
                    25,
                )
        finally:
            conn.execute("DROP TABLE quota_defaulted, quota_keyed; DROP FUNCTION IF EXISTS quota_big()")


def test_the_panels_superuser_still_writes_in_a_listed_database(quota, frozen_db):
    with quota.superuser_in(FROZEN_DB) as conn:
        conn.execute("INSERT INTO items VALUES (7000, 'by the panel')")
        conn.execute("DELETE FROM items WHERE id = 7000")


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


# --- readonly_owners ----------------------------------------------------------------------------------


OWNER_WRITES_STOPPED = [
    "INSERT INTO frozen_t VALUES (11, 'new')",
    "UPDATE frozen_t SET note = 'changed'",
    "INSERT INTO parted VALUES (150, 'routed to the frozen partition')",
    "UPDATE parted SET note = 'through the parent'",
    "INSERT INTO parted_high VALUES (151, 'straight in')",
    "WITH x AS (INSERT INTO frozen_t VALUES (12, 'cte') RETURNING 1) SELECT * FROM x",
]


@pytest.mark.parametrize("statement", OWNER_WRITES_STOPPED)
def test_writes_into_a_listed_roles_tables_are_stopped_whoever_runs_them(quota, frozen_role, statement):
    before = count(frozen_role, "frozen_t"), count(frozen_role, "parted")
    stopped(frozen_role, statement, ROLE_STOPPED)  # doadmin
    with quota.as_role(FROZEN_ROLE) as conn:  # the owner itself
        stopped(conn, statement, ROLE_STOPPED)
    assert (count(frozen_role, "frozen_t"), count(frozen_role, "parted")) == before


def test_copy_into_a_listed_roles_table_is_stopped(frozen_role):
    with pytest.raises(errors.DiskFull, match=ROLE_STOPPED):
        copy_in(frozen_role, "COPY frozen_t FROM STDIN", [20, "copied"])
    copy_in(frozen_role, "COPY free_t FROM STDIN", [20, "copied"])  # another owner's table: fine
    frozen_role.execute("DELETE FROM free_t")


OWNER_UTILITY_STOPPED = [
    f"SET ROLE {FROZEN_ROLE}; CREATE TABLE {{n}} (id int)",
    f"SET ROLE {FROZEN_ROLE}; CREATE TABLE {{n}} AS SELECT * FROM free_t",
    f"SET ROLE {FROZEN_ROLE}; CREATE MATERIALIZED VIEW {{n}} AS SELECT 1",
    f"SET ROLE {FROZEN_ROLE}; CREATE SEQUENCE {{n}}",
    "CREATE INDEX {n} ON frozen_t (id)",
    "REFRESH MATERIALIZED VIEW frozen_mv",
    "ALTER TABLE frozen_t ALTER COLUMN note TYPE varchar(300)",
    f"ALTER TABLE free_t OWNER TO {FROZEN_ROLE}",
    f"ALTER TABLE frozen_t OWNER TO {FREE_ROLE}",
    f"REASSIGN OWNED BY {FROZEN_ROLE} TO {FREE_ROLE}",
    f"REASSIGN OWNED BY {FREE_ROLE} TO {FROZEN_ROLE}",
]


@pytest.mark.parametrize("statement", OWNER_UTILITY_STOPPED)
def test_a_listed_role_gets_no_new_relations_and_no_ownership(frozen_role, statement):
    owned = frozen_role.execute(
        "SELECT count(*) FROM pg_class WHERE relowner = %s::regrole", [FROZEN_ROLE]
    ).fetchone()
    try:
        stopped(frozen_role, statement.format(n=name("quota_rel")), ROLE_STOPPED)
    finally:
        frozen_role.execute("RESET ROLE")
    assert (
        frozen_role.execute(
            "SELECT count(*) FROM pg_class WHERE relowner = %s::regrole", [FROZEN_ROLE]
        ).fetchone()
        == owned
    )
    assert frozen_role.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'free_t'").fetchone() == (
        FREE_ROLE,
    )


def owned_by(conn: psycopg.Connection, role: str) -> int:
    return conn.execute("SELECT count(*) FROM pg_class WHERE relowner = %s::regrole", [role]).fetchone()[0]


def test_statements_on_a_parent_that_go_on_into_a_listed_roles_partition_are_stopped(frozen_role):
    """``parted`` is FREE_ROLE's, its partition ``parted_high`` FROZEN_ROLE's: an index or a rewrite
    of the parent is made in every partition too, and belongs to the partition's owner."""
    owned = owned_by(frozen_role, FROZEN_ROLE)
    stopped(frozen_role, "CREATE INDEX quota_parted_idx ON parted (note)", ROLE_STOPPED)
    stopped(frozen_role, "ALTER TABLE parted ALTER COLUMN note TYPE varchar(300)", ROLE_STOPPED)
    stopped(frozen_role, "ALTER TABLE parted ADD COLUMN quota_r float8 DEFAULT random()", ROLE_STOPPED)
    stopped(frozen_role, "ALTER TABLE parted ADD CONSTRAINT quota_parted_key UNIQUE (id, note)", ROLE_STOPPED)
    assert owned_by(frozen_role, FROZEN_ROLE) == owned
    assert frozen_role.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'parted_high'::regclass AND attname = 'note'"
    ).fetchone() == ("text",)
    # Beside: the other partition on its own, and the parent ONLY (no partition's index made).
    frozen_role.execute("CREATE INDEX quota_low_idx ON parted_low (note)")
    frozen_role.execute("CREATE INDEX quota_only_idx ON ONLY parted (note)")
    frozen_role.execute("DROP INDEX quota_low_idx, quota_only_idx")
    assert owned_by(frozen_role, FROZEN_ROLE) == owned


def test_another_roles_view_rule_or_trigger_does_not_write_into_a_listed_roles_table(frozen_role):
    """Objects of FREE_ROLE that write into FROZEN_ROLE's table: the rewriter (an updatable view,
    a ``DO INSTEAD`` rule) and a trigger's function run the write through the executor's check,
    as the object's owner; moving the table to another schema or under another parent does not
    take it away from its owner's quota."""
    frozen_role.execute(f"SET ROLE {FREE_ROLE}")
    try:
        frozen_role.execute("CREATE VIEW quota_into_frozen AS SELECT * FROM frozen_t")
        frozen_role.execute("CREATE TABLE quota_ruled (id int, note text)")
        frozen_role.execute(
            "CREATE RULE quota_redirect AS ON INSERT TO quota_ruled "
            "DO INSTEAD INSERT INTO frozen_t VALUES (NEW.*)"
        )
        frozen_role.execute("CREATE TABLE quota_triggered (id int, note text)")
        frozen_role.execute(
            "CREATE FUNCTION quota_copy_row() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER "
            "AS $$ BEGIN INSERT INTO frozen_t VALUES (NEW.id, NEW.note); RETURN NEW; END $$"
        )
        frozen_role.execute(
            "CREATE TRIGGER quota_copy AFTER INSERT ON quota_triggered "
            "FOR EACH ROW EXECUTE FUNCTION quota_copy_row()"
        )
        frozen_role.execute("CREATE TABLE quota_parent (id int, note text) PARTITION BY RANGE (id)")
    finally:
        frozen_role.execute("RESET ROLE")
    try:
        before = count(frozen_role, "frozen_t")
        stopped(frozen_role, "INSERT INTO quota_into_frozen VALUES (40, 'a view')", ROLE_STOPPED)
        stopped(frozen_role, "UPDATE quota_into_frozen SET note = 'a view'", ROLE_STOPPED)
        stopped(frozen_role, "INSERT INTO quota_ruled VALUES (41, 'a rule')", ROLE_STOPPED)
        stopped(frozen_role, "INSERT INTO quota_triggered VALUES (42, 'a trigger')", ROLE_STOPPED)
        frozen_role.execute("CREATE SCHEMA quota_elsewhere")
        frozen_role.execute("ALTER TABLE frozen_t SET SCHEMA quota_elsewhere")  # no data: allowed
        stopped(frozen_role, "INSERT INTO quota_elsewhere.frozen_t VALUES (43, 'moved')", ROLE_STOPPED)
        frozen_role.execute("ALTER TABLE quota_elsewhere.frozen_t SET SCHEMA public")
        frozen_role.execute(
            "ALTER TABLE quota_parent ATTACH PARTITION frozen_t FOR VALUES FROM (0) TO (1000)"
        )
        stopped(frozen_role, "INSERT INTO quota_parent VALUES (44, 'attached')", ROLE_STOPPED)
        frozen_role.execute("ALTER TABLE quota_parent DETACH PARTITION frozen_t")
        assert count(frozen_role, "frozen_t") == before
        # Beside: the same objects without a listed role's table behind them still write.
        frozen_role.execute(
            "DROP RULE quota_redirect ON quota_ruled; DROP TRIGGER quota_copy ON quota_triggered"
        )
        frozen_role.execute(
            "INSERT INTO quota_ruled VALUES (41, 'no rule'); INSERT INTO quota_triggered VALUES (42, 'x')"
        )
        assert count(frozen_role, "quota_ruled") == count(frozen_role, "quota_triggered") == 1
    finally:
        frozen_role.execute(
            "DROP VIEW quota_into_frozen; DROP TABLE quota_ruled, quota_triggered, quota_parent; "
            "DROP FUNCTION quota_copy_row(); DROP SCHEMA quota_elsewhere"
        )


def test_a_schema_made_for_a_listed_role_gets_no_table_of_its(frozen_role):
    schema = name("quota_schema")
    stopped(
        frozen_role,
        f"CREATE SCHEMA {schema} AUTHORIZATION {FROZEN_ROLE} CREATE TABLE t (id int)",
        ROLE_STOPPED,
    )
    frozen_role.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {FROZEN_ROLE}")  # no data: fine
    frozen_role.execute(f"DROP SCHEMA {schema}")


def test_a_listed_role_cannot_be_renamed_away_from_its_quota(frozen_role):
    stopped(frozen_role, f"ALTER ROLE {FROZEN_ROLE} RENAME TO quota_renamed", ROLE_STOPPED)


def test_a_listed_roles_tables_can_still_be_read_and_emptied(quota, frozen_role):
    assert count(frozen_role, "frozen_t") == 10
    frozen_role.execute("DELETE FROM frozen_t WHERE id > 5")
    frozen_role.execute("VACUUM (FULL, ANALYZE) frozen_t")
    frozen_role.execute("TRUNCATE parted_high")
    with quota.as_role(FROZEN_ROLE) as conn:
        assert count(conn, "frozen_t") == 5
        conn.execute("DELETE FROM frozen_t")
        conn.execute("VACUUM frozen_t")
        conn.execute("ANALYZE frozen_t")
    frozen_role.execute("INSERT INTO free_t VALUES (1, 'another owner')")  # beside: still works
    frozen_role.execute("INSERT INTO parted_low VALUES (1, 'the free partition')")
    frozen_role.execute(f"SET ROLE {FREE_ROLE}")
    try:
        frozen_role.execute("CREATE TABLE quota_free_new (id int)")
        frozen_role.execute("DROP TABLE quota_free_new")
    finally:
        frozen_role.execute("RESET ROLE")
    frozen_role.execute("DELETE FROM free_t; DELETE FROM parted")
    # Through the parent, PostgreSQL checks the parent only and routes rows later: with one
    # partition frozen, the guard refuses every insert through the parent (the free partition
    # itself takes rows, as above).
    stopped(frozen_role, "INSERT INTO parted VALUES (1, 'the free partition')", ROLE_STOPPED)


def test_the_panels_superuser_still_writes_into_a_listed_roles_tables(quota, frozen_role):
    with quota.superuser_in(FREE_DB) as conn:
        conn.execute("INSERT INTO frozen_t VALUES (100, 'by the panel')")
        conn.execute("DELETE FROM frozen_t WHERE id = 100")


def test_writes_work_again_once_the_role_is_no_longer_listed(quota):
    with quota.as_role(FROZEN_ROLE) as before:
        with listed(quota, OWNERS_SETTING, FROZEN_ROLE):
            wait_for_setting(before, OWNERS_SETTING, FROZEN_ROLE)
            stopped(before, "INSERT INTO frozen_t VALUES (30, 'frozen')", ROLE_STOPPED)
        wait_for_setting(before, OWNERS_SETTING, "")
        before.execute("INSERT INTO frozen_t VALUES (30, 'an existing session')")
        with quota.tenant(FREE_DB) as fresh:
            fresh.execute("INSERT INTO frozen_t VALUES (31, 'a new session')")
        before.execute("DELETE FROM frozen_t WHERE id IN (30, 31)")
