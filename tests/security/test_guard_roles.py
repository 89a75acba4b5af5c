"""Issue 10: the tenant keeps managing its own roles through the privilege guard, but gives none
of them a superuser's attribute and cannot touch the panel's own roles or the guard's setting;
attacked for real as ``doadmin`` would.

One cluster for the module, provisioned by the service with the guard; the tenant connects as
``doadmin`` over TCP and TLS with the details the Overview shows. Every refusal sits next to the
legitimate action beside it, which must keep working. The server's programs and files (rows 1-3):
test_guard_server_access.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.conf import settings
from psycopg import errors

from panel.clusters.engine import dbconn
from tests.fixtures.role_guard import (
    PANEL_ROLES,
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
    with guarded_cluster(django_db_blocker, "guard-roles", "db-guard-roles") as found:
        yield found


@pytest.fixture
def tenant(guarded: Guarded) -> Iterator[psycopg.Connection]:
    with psycopg.connect(guarded.details.uri(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def superuser(guarded: Guarded) -> Iterator[psycopg.Connection]:
    with dbconn.admin_connection(guarded.cluster) as conn:
        yield conn


# --- the tenant's own roles: no superuser's attribute, the rest still works --------------------------


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
