"""Issue 15: the guard stops writes for real in a database over its quota, and what still works there.

One cluster for the module, provisioned by the service with the guard. The panel's superuser
lists a database in ``pgpanel_guard.readonly_databases`` (``ALTER SYSTEM`` and a reload, as the
panel's ``panel.conf`` would); the tenant then writes as ``doadmin`` over TCP and TLS with its real
connection details: every statement that makes new data is refused. Every refusal sits next to
the legitimate action beside it, which must keep working: reads and the ways back under the quota
(DELETE then VACUUM, TRUNCATE, DROP), a foreign key's action, the panel's own superuser. The
tenant's ways round the stop: test_guard_quota_escapes.py; a role's tables:
test_guard_quota_owners.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors

from panel.clusters.engine import dbconn, guard
from tests.fixtures.write_stop import (
    DATABASES_SETTING,
    FROZEN_DB,
    OWNERS_SETTING,
    Quota,
    copy_in,
    count,
    frozen_database,
    listed,
    name,
    quota_cluster,
    seed_frozen_database,
    show,
    stopped,
    wait_for_setting,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture(scope="module")
def quota(django_db_setup: None, django_db_blocker: object) -> Iterator[Quota]:
    with quota_cluster(django_db_blocker, "quota-tenant", "db-guard-quota") as found:
        yield found


@pytest.fixture
def frozen_db(quota: Quota) -> Iterator[psycopg.Connection]:
    """``doadmin`` in FROZEN_DB, once the database is listed (the session opened before)."""
    with frozen_database(quota) as conn:
        yield conn


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
