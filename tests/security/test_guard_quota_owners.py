"""Issue 15: the guard stops writes for real into a role's tables when the role is over its quota.

One cluster for the module, provisioned by the service with the guard. The panel's superuser
lists a role in ``pgpanel_guard.readonly_owners`` (``ALTER SYSTEM`` and a reload, as the panel's
``panel.conf`` would); the tenant then attacks as ``doadmin`` and as the role itself over TCP and
TLS with their real connection details: writes into the role's tables (through a partitioned
parent, another role's view, rule or trigger too), new relations and ownership for the role.
Every refusal sits next to the legitimate action beside it, which must keep working: reads, the
ways back under the quota (DELETE then VACUUM, TRUNCATE), other roles' tables, the panel's own
superuser, and writes once the role is no longer listed. A database over its quota:
test_guard_quota_databases.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors

from tests.fixtures.write_stop import (
    FREE_DB,
    FREE_ROLE,
    FROZEN_ROLE,
    OWNERS_SETTING,
    ROLE_STOPPED,
    Quota,
    copy_in,
    count,
    listed,
    name,
    quota_cluster,
    stopped,
    wait_for_setting,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture(scope="module")
def quota(django_db_setup: None, django_db_blocker: object) -> Iterator[Quota]:
    with quota_cluster(django_db_blocker, "quota-owners", "db-guard-quota-owners") as found:
        yield found


@pytest.fixture
def frozen_role(quota: Quota) -> Iterator[psycopg.Connection]:
    """``doadmin`` in FREE_DB, once FROZEN_ROLE is listed."""
    with quota.tenant(FREE_DB) as conn, listed(quota, OWNERS_SETTING, FROZEN_ROLE):
        wait_for_setting(conn, OWNERS_SETTING, FROZEN_ROLE)
        yield conn


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
