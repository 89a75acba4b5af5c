"""Issue 10, rows 1-3 and item 1: the privilege guard, attacked for real as a tenant would.

One cluster for the module, provisioned by the service with the guard; the tenant connects as
``doadmin`` over TCP and TLS with the details the Overview shows. Every refusal sits next to the
legitimate action beside it, which must keep working.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from psycopg import errors, sql

from panel.clusters import services
from panel.clusters.engine import dbconn, guard, isolation, postgres
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster
from tests.fixtures.clusters import module_cluster

# django_db only so that the test database is set up: the module's fixture writes its rows.
pytestmark = [pytest.mark.integration, pytest.mark.django_db]

RESERVED_PREDEFINED = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")
PANEL_ROLES = (settings.PANEL_SUPERUSER, settings.PANEL_MONITOR_ROLE)
RESERVED_DETAIL = "is reserved by the control panel"
ROLE_GUARD_FILES = ("role_guard.c", "reserved_roles.c", "role_membership.c", "server_access_guard.c")


@dataclass(frozen=True)
class Guarded:
    cluster: Cluster
    details: ConnectionDetails


@pytest.fixture(scope="module")
def guarded(django_db_setup: None, django_db_blocker: object) -> Iterator[Guarded]:
    with module_cluster(django_db_blocker, "guard-tenant", "db-guard") as cluster:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            details = services.connection_details(cluster)
        with dbconn.admin_connection(cluster) as conn:
            # The monitor role may not be created by this branch's provisioning: make it as the
            # panel would, so that the attacks on it are real.
            if conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", [settings.PANEL_MONITOR_ROLE]
            ).fetchone():
                conn.execute(
                    sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(settings.PANEL_MONITOR_ROLE))
                )
            else:
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN IN ROLE pg_monitor").format(
                        sql.Identifier(settings.PANEL_MONITOR_ROLE)
                    )
                )
        with psycopg.connect(details.uri(), autocommit=True) as conn:
            conn.execute("CREATE TABLE guard_t (line text)")
        yield Guarded(cluster, details)


@pytest.fixture
def tenant(guarded: Guarded) -> Iterator[psycopg.Connection]:
    with psycopg.connect(guarded.details.uri(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def superuser(guarded: Guarded) -> Iterator[psycopg.Connection]:
    with dbconn.admin_connection(guarded.cluster) as conn:
        yield conn


def refused(conn: psycopg.Connection, statement: str, message: str, detail: str = RESERVED_DETAIL) -> None:
    """``statement`` fails with the guard's insufficient-privilege error saying ``message``."""
    with pytest.raises(errors.InsufficientPrivilege) as caught:
        conn.execute(statement)  # type: ignore[arg-type]
    diag = caught.value.diag
    assert message in (diag.message_primary or ""), diag.message_primary
    assert detail in (diag.message_detail or ""), diag.message_detail
    assert diag.source_file in ROLE_GUARD_FILES  # the role guard refused, not PostgreSQL on its own


def member_of(conn: psycopg.Connection, member: str, role: str) -> bool:
    return conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", [member, role]).fetchone()[0]


def role_exists(conn: psycopg.Connection, role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone() is not None


def name(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(3)}"


def test_the_tenant_is_doadmin_over_tls_with_createrole_and_the_guard_is_loaded(guarded, tenant, superuser):
    row = tenant.execute(
        "SELECT current_user, s.ssl, r.rolsuper, r.rolcreaterole FROM pg_stat_ssl s, pg_roles r "
        "WHERE s.pid = pg_backend_pid() AND r.rolname = current_user"
    ).fetchone()
    assert row == ("doadmin", True, False, True)
    reserved = tenant.execute("SHOW pgpanel_guard.reserved_roles").fetchone()[0]
    assert [part.strip().strip('"') for part in reserved.split(",")] == list(guard.reserved_roles())
    pid = postgres.postmaster_pid(guarded.cluster.pgdata)
    assert pid is not None and guard.is_loaded(pid)
    preloaded = superuser.execute("SHOW shared_preload_libraries").fetchone()[0]
    first, *others = [part.strip().strip('"') for part in preloaded.split(",")]
    library = Path(first)
    assert library == guard.library_path(guarded.cluster.version)
    assert others == ["pg_stat_statements"]  # the Queries tab's, beside the guard
    assert library.stat().st_mode & 0o777 == 0o644
    assert library.parent.stat().st_mode & 0o777 == 0o755


# --- rows 1-3: the reserved predefined roles ---------------------------------------------------------


@pytest.mark.parametrize("role", RESERVED_PREDEFINED)
def test_doadmin_cannot_grant_itself_a_reserved_role(tenant, role):
    refused(tenant, f"GRANT {role} TO doadmin", f'permission denied to grant role "{role}"')
    refused(tenant, f"GRANT {role} TO CURRENT_USER WITH ADMIN OPTION", f'grant role "{role}"')
    assert not member_of(tenant, "doadmin", role)


def test_doadmin_can_still_grant_an_ordinary_role(tenant):
    readers, app = name("readers"), name("app")
    tenant.execute(f"CREATE ROLE {readers}")
    tenant.execute(f"CREATE ROLE {app} LOGIN PASSWORD 'app-password-1'")
    tenant.execute(f"GRANT {readers} TO {app}")
    tenant.execute(f"GRANT pg_read_all_data TO {app}")  # predefined, but inside the database only
    assert member_of(tenant, app, readers)
    tenant.execute(f"REVOKE {readers} FROM {app}")
    assert not member_of(tenant, app, readers)
    tenant.execute(f"DROP ROLE {app}, {readers}")


def test_copy_from_a_program_is_refused(tenant):
    refused(
        tenant,
        "COPY guard_t FROM PROGRAM 'id -un'",
        "permission denied to COPY to or from an external program",
        "Running programs on the database server",
    )
    refused(
        tenant,
        "COPY (SELECT 1) TO PROGRAM 'touch /tmp/guard-program'",
        "external program",
        "Running programs on the database server",
    )
    assert not Path("/tmp/guard-program").exists()
    assert tenant.execute("SELECT count(*) FROM guard_t").fetchone() == (0,)


def test_copy_from_a_program_inside_a_function_is_refused(tenant):
    with pytest.raises(errors.InsufficientPrivilege, match="external program"):
        tenant.execute("DO $$ BEGIN EXECUTE 'COPY guard_t FROM PROGRAM ''id -un'''; END $$")


def test_copy_from_a_server_file_is_refused(tenant):
    refused(
        tenant,
        "COPY guard_t FROM '/etc/hostname'",
        "permission denied to COPY to or from a file on the server",
        "Reading and writing server files",
    )
    assert tenant.execute("SELECT count(*) FROM guard_t").fetchone() == (0,)


def test_copy_to_a_server_file_is_refused(tenant):
    target = Path(f"/tmp/guard-{secrets.token_hex(4)}")
    refused(tenant, f"COPY guard_t TO '{target}'", "a file on the server", "Reading and writing server files")
    refused(tenant, f"COPY (SELECT 'x') TO '{target}'", "a file on the server", "server files")
    assert not target.exists()


def test_copy_from_stdin_and_to_stdout_still_work(tenant):
    with tenant.cursor() as cur:
        with cur.copy("COPY guard_t (line) FROM STDIN") as copy:
            copy.write_row(["from the client"])
        lines = []
        with cur.copy("COPY guard_t TO STDOUT") as copy:
            lines = [bytes(chunk).decode() for chunk in copy]
    assert lines == ["from the client\n"]
    tenant.execute("TRUNCATE guard_t")


# --- row 2: a role created by doadmin -------------------------------------------------------------------


def test_a_role_created_by_doadmin_cannot_be_given_the_reserved_roles(tenant):
    x = name("x")
    tenant.execute(f"CREATE ROLE {x} LOGIN")
    try:
        refused(tenant, f"GRANT pg_execute_server_program TO {x}", 'grant role "pg_execute_server_program"')
        refused(tenant, f"GRANT pg_execute_server_program, pg_read_server_files TO {x}", "grant role")
        refused(tenant, f"GRANT pg_write_server_files TO {x}", 'grant role "pg_write_server_files"')
        refused(tenant, f"ALTER GROUP pg_read_server_files ADD USER {x}", 'grant role "pg_read_server_files"')
        for role in RESERVED_PREDEFINED:
            assert not member_of(tenant, x, role)
    finally:
        tenant.execute(f"DROP ROLE {x}")


def test_create_role_in_a_reserved_role_is_refused(tenant):
    y = name("y")
    refused(tenant, f"CREATE ROLE {y} IN ROLE pg_read_server_files", 'grant role "pg_read_server_files"')
    refused(tenant, f"CREATE ROLE {y} LOGIN IN GROUP doadmin, pg_execute_server_program", "grant role")
    refused(tenant, f"CREATE ROLE {y} ADMIN pgpanel_monitor", 'memberships of role "pgpanel_monitor"')
    assert not role_exists(tenant, y)
    tenant.execute(f"CREATE ROLE {y} LOGIN NOSUPERUSER NOREPLICATION IN ROLE pg_read_all_stats")
    assert member_of(tenant, y, "pg_read_all_stats")
    tenant.execute(f"DROP ROLE {y}")


def test_a_role_that_holds_a_reserved_role_cannot_be_handed_on(superuser, tenant):
    # Granted by the superuser (or before the guard): doadmin must not pass it on.
    legacy = name("legacy")
    superuser.execute(f"CREATE ROLE {legacy} IN ROLE pg_read_server_files")
    try:
        refused(
            tenant,
            f"GRANT {legacy} TO doadmin",
            f'grant role "{legacy}"',
            "which is reserved by the control panel",
        )
        assert not member_of(tenant, "doadmin", legacy)
    finally:
        superuser.execute(f"DROP ROLE {legacy}")


@pytest.mark.parametrize("attribute", ["SUPERUSER", "REPLICATION", "BYPASSRLS"])
def test_the_superuser_attributes_are_refused(tenant, attribute):
    x = name("x")
    tenant.execute(f"CREATE ROLE {x} LOGIN")
    try:
        refused(
            tenant,
            f"ALTER ROLE {x} {attribute}",
            f"permission denied to change the {attribute} attribute",
            "attributes are reserved by the control panel",
        )
        refused(tenant, f"ALTER ROLE doadmin WITH {attribute}", attribute, "attributes are reserved")
        refused(
            tenant,
            f"CREATE ROLE {x}_b {attribute}",
            f"create a role with the {attribute} attribute",
            "reserved",
        )
        flags = tenant.execute(
            "SELECT bool_or(rolsuper OR rolreplication OR rolbypassrls) FROM pg_roles "
            "WHERE rolname IN (%s, 'doadmin')",
            [x],
        ).fetchone()[0]
        assert flags is False
    finally:
        tenant.execute(f"DROP ROLE {x}")


def test_doadmin_keeps_managing_its_own_roles(tenant):
    app, renamed = name("app"), name("renamed")
    tenant.execute(f"CREATE ROLE {app} LOGIN PASSWORD 'app-password-1'")
    tenant.execute(f"ALTER ROLE {app} WITH PASSWORD 'app-password-2' CONNECTION LIMIT 5")
    tenant.execute(f"ALTER ROLE {app} SET work_mem = '8MB'")
    tenant.execute(f"ALTER ROLE {app} NOLOGIN CREATEDB")
    tenant.execute(f"COMMENT ON ROLE {app} IS 'the application'")
    tenant.execute(f"ALTER ROLE {app} RENAME TO {renamed}")
    limit, createdb = tenant.execute(
        "SELECT rolconnlimit, rolcreatedb FROM pg_roles WHERE rolname = %s", [renamed]
    ).fetchone()
    assert (limit, createdb) == (5, True)
    tenant.execute(f"GRANT {renamed} TO doadmin")
    tenant.execute(f"CREATE SCHEMA {renamed} AUTHORIZATION {renamed}")
    tenant.execute(f"CREATE TABLE {renamed}.t (id int)")
    tenant.execute(f"ALTER TABLE {renamed}.t OWNER TO {renamed}")
    tenant.execute(f"GRANT SELECT ON guard_t TO {renamed}")
    tenant.execute(f"REASSIGN OWNED BY {renamed} TO doadmin")
    tenant.execute(f"DROP OWNED BY {renamed}")
    tenant.execute(f"DROP ROLE {renamed}")
    assert not role_exists(tenant, renamed)
    tenant.execute(f"DROP SCHEMA {renamed} CASCADE")
    tenant.execute("ALTER ROLE CURRENT_USER SET statement_timeout = '1min'")
    tenant.execute("ALTER ROLE CURRENT_USER RESET statement_timeout")


def test_doadmin_keeps_creating_databases_and_trusted_extensions(guarded, tenant):
    database = name("guard_db")
    tenant.execute(f"CREATE DATABASE {database}")
    try:
        params = dict(guarded.details.params())
        with psycopg.connect(
            host=params["host"],
            port=params["port"],
            user=guarded.details.user,
            password=guarded.details.password,
            dbname=database,
            sslmode="require",
            autocommit=True,
        ) as conn:
            conn.execute("CREATE EXTENSION pgcrypto")
            conn.execute("CREATE EXTENSION hstore")
            digest = conn.execute("SELECT encode(digest('abc', 'sha256'), 'hex')").fetchone()[0]
            assert digest.startswith("ba7816bf")
            conn.execute("CREATE SCHEMA app AUTHORIZATION doadmin")
            conn.execute("CREATE TABLE app.t (id int)")
            conn.execute("GRANT USAGE ON SCHEMA app TO PUBLIC")
            conn.execute("ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO PUBLIC")
    finally:
        tenant.execute(f"DROP DATABASE {database} WITH (FORCE)")


# --- the panel's own roles ---------------------------------------------------------------------------


PANEL_ROLE_ATTACKS = [
    ("ALTER ROLE {r} PASSWORD 'stolen-password-1'", 'permission denied to alter role "{r}"'),
    ("ALTER ROLE {r} CONNECTION LIMIT 0", 'permission denied to alter role "{r}"'),
    ("ALTER ROLE {r} NOLOGIN", 'permission denied to alter role "{r}"'),
    ("ALTER ROLE {r} VALID UNTIL '2000-01-01'", 'permission denied to alter role "{r}"'),
    ("ALTER ROLE {r} SET search_path = public", 'permission denied to alter role "{r}"'),
    (
        "ALTER ROLE {r} IN DATABASE defaultdb SET search_path = public",
        'permission denied to alter role "{r}"',
    ),
    ("ALTER ROLE {r} RESET ALL", 'permission denied to alter role "{r}"'),
    ("ALTER ROLE {r} RENAME TO guard_renamed", 'permission denied to rename role "{r}"'),
    ("DROP ROLE {r}", 'permission denied to drop role "{r}"'),
    ("DROP ROLE IF EXISTS guard_nobody, {r}", 'permission denied to drop role "{r}"'),
    ("CREATE ROLE {r}", 'permission denied to create role "{r}"'),
    ("COMMENT ON ROLE {r} IS 'mine'", 'permission denied to comment on role "{r}"'),
    ("GRANT {r} TO doadmin", 'permission denied to grant role "{r}"'),
    ("REVOKE {r} FROM doadmin", 'permission denied to revoke role "{r}"'),
    ("GRANT doadmin TO {r}", 'permission denied to change the memberships of role "{r}"'),
    ("REVOKE pg_monitor FROM {r}", 'permission denied to change the memberships of role "{r}"'),
    ("REASSIGN OWNED BY doadmin TO {r}", 'permission denied to reassign objects to role "{r}"'),
    ("REASSIGN OWNED BY {r} TO doadmin", 'permission denied to reassign objects owned by role "{r}"'),
    ("DROP OWNED BY {r}", 'permission denied to drop objects owned by role "{r}"'),
    ("ALTER TABLE guard_t OWNER TO {r}", 'permission denied to give ownership to role "{r}"'),
    ("ALTER SCHEMA public OWNER TO {r}", 'permission denied to give ownership to role "{r}"'),
    ("CREATE SCHEMA guard_s AUTHORIZATION {r}", 'permission denied to give ownership to role "{r}"'),
    ("CREATE DATABASE guard_db OWNER {r}", 'permission denied to give ownership to role "{r}"'),
    ("GRANT SELECT ON guard_t TO {r}", 'permission denied to grant privileges to role "{r}"'),
    (
        "REVOKE CONNECT ON DATABASE defaultdb FROM {r}",
        'permission denied to revoke privileges from role "{r}"',
    ),
    ("ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO {r}", 'grant privileges to role "{r}"'),
]


@pytest.mark.parametrize("role", PANEL_ROLES)
@pytest.mark.parametrize(("statement", "message"), PANEL_ROLE_ATTACKS)
def test_doadmin_cannot_touch_the_panels_roles(tenant, role, statement, message):
    refused(tenant, statement.format(r=role), message.format(r=role))


def test_the_panels_roles_are_intact_after_the_attacks(superuser):
    row = superuser.execute(
        "SELECT rolcanlogin, rolconnlimit, rolvaliduntil, rolconfig FROM pg_roles WHERE rolname = %s",
        [settings.PANEL_MONITOR_ROLE],
    ).fetchone()
    assert row == (True, -1, None, None)
    assert member_of(superuser, settings.PANEL_MONITOR_ROLE, "pg_monitor")
    assert not member_of(superuser, "doadmin", settings.PANEL_MONITOR_ROLE)
    assert superuser.execute(
        "SELECT rolsuper FROM pg_roles WHERE rolname = %s", [settings.PANEL_SUPERUSER]
    ).fetchone() == (True,)


def test_the_guard_setting_cannot_be_changed_by_the_tenant(guarded, tenant):
    with pytest.raises(errors.CantChangeRuntimeParam):
        tenant.execute("SET pgpanel_guard.reserved_roles = ''")
    with pytest.raises(psycopg.Error):
        tenant.execute("ALTER ROLE doadmin SET pgpanel_guard.reserved_roles = ''")
    with pytest.raises(psycopg.Error):
        tenant.execute("ALTER DATABASE defaultdb SET pgpanel_guard.reserved_roles = ''")
    with pytest.raises(psycopg.OperationalError, match="cannot be changed"):
        psycopg.connect(guarded.details.uri(), options="-c pgpanel_guard.reserved_roles=").close()
    refused(
        tenant,
        "ALTER SYSTEM SET pgpanel_guard.reserved_roles = ''",
        "permission denied to run ALTER SYSTEM",
        "configuration is managed by the control panel",
    )


# --- ALTER SYSTEM, LOAD ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    ["ALTER SYSTEM SET archive_command = 'id > /tmp/guard-archive'", "ALTER SYSTEM RESET ALL"],
)
def test_alter_system_is_refused(tenant, statement):
    refused(tenant, statement, "permission denied to run ALTER SYSTEM", "managed by the control panel")


def test_session_settings_still_work(tenant):
    tenant.execute("SET work_mem = '16MB'")
    assert tenant.execute("SHOW work_mem").fetchone() == ("16MB",)
    with pytest.raises(errors.InsufficientPrivilege):  # PostgreSQL's own refusal stays
        tenant.execute("SET log_statement = 'none'")


@pytest.mark.parametrize("library", ["plpgsql", "$libdir/plugins/anything", "/tmp/guard-evil.so"])
def test_load_is_refused(tenant, library):
    refused(
        tenant,
        f"LOAD '{library}'",
        f'permission denied to load library "{library}"',
        "Loading libraries into the server is reserved",
    )


# --- the panel's own superuser is exempt ------------------------------------------------------------


def test_the_panels_superuser_still_does_the_reserved_things(superuser, guarded):
    helper = name("guard_helper")
    superuser.execute(sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(settings.PANEL_MONITOR_ROLE)))
    superuser.execute(f"CREATE ROLE {helper} IN ROLE pg_execute_server_program")
    superuser.execute(f"GRANT pg_read_server_files TO {helper}")
    assert member_of(superuser, helper, "pg_read_server_files")
    superuser.execute(f"REVOKE pg_read_server_files, pg_execute_server_program FROM {helper}")
    superuser.execute(f"DROP ROLE {helper}")
    superuser.execute("CREATE TEMP TABLE who (name text)")
    superuser.execute("COPY who FROM PROGRAM 'id -un'")
    assert superuser.execute("SELECT name FROM who").fetchone() == (isolation.os_user(guarded.cluster).name,)
    superuser.execute("LOAD 'plpgsql'")
    superuser.execute(
        sql.SQL("ALTER ROLE {} CONNECTION LIMIT -1").format(sql.Identifier(settings.PANEL_MONITOR_ROLE))
    )
