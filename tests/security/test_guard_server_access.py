"""Issue 10, rows 1-3: through the privilege guard a tenant reaches no program and no file of the
server, attacked for real as ``doadmin`` would.

One cluster for the module, provisioned by the service with the guard; the tenant connects as
``doadmin`` over TCP and TLS with the details the Overview shows. The reserved predefined roles
(``pg_execute_server_program``, ``pg_read_server_files``, ``pg_write_server_files``) cannot be
granted, ``COPY`` to or from a program or a server file, ``ALTER SYSTEM`` and ``LOAD`` are refused.
Every refusal sits next to the legitimate action beside it, which must keep working, and the
panel's own superuser still does all of it. The tenant's other roles: test_guard_roles.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from psycopg import errors, sql

from panel.clusters.engine import dbconn, guard, isolation, postgres
from tests.fixtures.role_guard import (
    RESERVED_PREDEFINED,
    Guarded,
    guarded_cluster,
    member_of,
    name,
    refused,
    role_exists,
)

# django_db only so that the test database is set up: the module's fixture writes its rows.
pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture(scope="module")
def guarded(django_db_setup: None, django_db_blocker: object) -> Iterator[Guarded]:
    with guarded_cluster(django_db_blocker, "guard-tenant", "db-guard") as found:
        yield found


@pytest.fixture
def tenant(guarded: Guarded) -> Iterator[psycopg.Connection]:
    with psycopg.connect(guarded.details.uri(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def superuser(guarded: Guarded) -> Iterator[psycopg.Connection]:
    with dbconn.admin_connection(guarded.cluster) as conn:
        yield conn


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
