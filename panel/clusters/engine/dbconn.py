"""Connections the panel itself opens to a cluster, and SQL run through them.

Local clusters are reached over the Unix socket only: as the panel's superuser for what only a
superuser can do (roles, databases, secrets), and only in the maintenance database, which no
tenant can enter; as the monitor role (``PANEL_MONITOR_ROLE``, a member of ``pg_monitor`` and
nothing more) for collection and measurement, also inside tenants' databases. Attached servers are
reached with the admin credentials given when they were attached, a server about to be attached
with the credentials the user typed.

A tenant owns objects in its databases and may set their ``search_path``: an exact-match overload
of a function or operator, or a relation of the same name, in a schema searched before
``pg_catalog`` would run with the panel's rights (the CVE-2018-1058 pattern). So every connection
to PostgreSQL pins ``search_path`` to ``pg_catalog, pg_temp`` in the startup packet, which wins
over any per-database or per-role setting, and the panel's SQL names catalog functions and
relations with their schema as a second line of defence.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from psycopg import sql

from panel.clusters.lib.libpq import outside_client_params
from panel.clusters.lib.session import CLIENT_ENCODING, PINNED_OPTIONS, SEARCH_PATH_OPTION
from panel.clusters.models import Cluster, credentials
from panel.clusters.models.servers import server_host, server_port
from panel.clusters.standbys.engine import member_tls

CONNECT_TIMEOUT = 5
# The superuser's sessions log no statement text, whatever the cluster's owner set (say
# log_min_duration_statement = 0): what it runs carries secrets (ALTER ROLE … PASSWORD with a
# SCRAM verifier), and the owner reads the log on the Logs tab. Nor does pg_stat_statements keep
# their text, where a reader with pg_read_all_stats would see it. Superuser-only settings, so a
# startup option of the superuser's own; a tenant cannot change them for that role. (Without
# pg_stat_statements loaded its setting is a mere placeholder, accepted as such.)
QUIET_LOG_OPTIONS = (
    "-c log_statement=none -c log_min_duration_statement=-1 -c log_min_error_statement=panic"
    " -c log_duration=off -c pg_stat_statements.track=none"
)
MAINTENANCE_DATABASE = "postgres"


class DatabaseError(Exception):
    """PostgreSQL refused what the panel asked; the message is PostgreSQL's own."""

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate

    @property
    def out_of_connection_slots(self) -> bool:
        """Every connection slot but the superuser's reserved ones is taken."""
        # libpq keeps no SQLSTATE for a refusal during the connection: the text tells.
        return self.sqlstate == "53300" or any(
            text in str(self) for text in ("too many clients already", "remaining connection slots")
        )


def pg_message(exc: BaseException) -> str:
    """PostgreSQL's primary message (and detail) without libpq's connection preamble."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag else None
    if primary:
        detail = getattr(diag, "message_detail", None)
        return f"{primary} ({detail})" if detail else primary
    text = str(exc).strip()
    # libpq: 'connection failed: connection to server at "x", port n failed: FATAL:  reason'
    if "FATAL:" in text:
        text = text.split("FATAL:", 1)[1]
    return " ".join(text.split())


# What the panel's own sessions call themselves on the server (pg_stat_activity).
APPLICATION_NAME = "pgpanel"


def _open(params: dict[str, Any], connect_timeout: int) -> psycopg.Connection:
    try:
        return psycopg.connect(
            **{"client_encoding": CLIENT_ENCODING, **params},
            autocommit=True,
            connect_timeout=connect_timeout,
            application_name=APPLICATION_NAME,
        )
    except psycopg.Error as exc:
        raise DatabaseError(pg_message(exc), exc.sqlstate) from None


@contextmanager
def connect(
    *,
    pin_search_path: bool = True,
    unpinned_behind_pooler: bool = False,
    quiet_log: bool = False,
    session_settings: bool = True,
    connect_timeout: int = CONNECT_TIMEOUT,
    **params: Any,
) -> Iterator[psycopg.Connection]:
    """An autocommit connection with libpq ``params`` (and psycopg's, e.g. ``cursor_factory``);
    PostgreSQL's or PgBouncer's refusals become DatabaseError.

    ``search_path`` is pinned unless ``pin_search_path`` is false, which only PgBouncer's admin
    console needs: it refuses startup parameters it does not know. A server the user attached
    may sit behind such a pooler too; with ``unpinned_behind_pooler`` the connection is retried
    without the pin then (the credentials are the user's own, so the user's objects would gain
    nothing from running with them). ``quiet_log`` (the panel's superuser only: the settings are
    a superuser's) keeps the session's statements out of the server's log. The session's own
    settings (``lib/session.py``: timeouts, encoding, no preloaded library) are sent too, unless
    ``session_settings`` is false, for a session that must see the server's configuration.
    """
    if "options" in params:
        raise ValueError("the panel sends no libpq options but the pinned search_path")
    if pin_search_path:
        options = PINNED_OPTIONS if session_settings else SEARCH_PATH_OPTION
        options = f"{options} {QUIET_LOG_OPTIONS}" if quiet_log else options
        try:
            conn = _open({**params, "options": options}, connect_timeout)
        except DatabaseError as exc:
            if not (unpinned_behind_pooler and "unsupported startup parameter" in str(exc)):
                raise
            conn = _open(params, connect_timeout)
    else:
        conn = _open(params, connect_timeout)
    try:
        yield conn
    except psycopg.Error as exc:
        raise DatabaseError(pg_message(exc), exc.sqlstate) from None
    finally:
        conn.close()


class TenantDatabaseRefused(ValueError):
    """A superuser connection was asked for inside a database a tenant can write to."""


@contextmanager
def admin_connection(
    cluster: Cluster, dbname: str | None = None, *, quiet_log: bool = True, port: int | None = None
) -> Iterator[psycopg.Connection]:
    """An autocommit connection with the panel's maintenance rights on ``cluster`` (``port``: one
    member of a cluster with standbys; by default the primary).

    On a local cluster that is the superuser, so only into the maintenance database: the
    superuser never enters a tenant's database, where the tenant's objects could run with its
    rights. Reading inside a tenant's database is ``monitor_connection``'s job. Its statements
    stay out of the server's log (``QUIET_LOG_OPTIONS``) unless ``quiet_log`` is false, for a
    session that must see the server's configured settings (logging, timeouts) as a tenant's
    session does, and runs no secret.
    """
    if cluster.is_local:
        if dbname not in (None, MAINTENANCE_DATABASE):
            raise TenantDatabaseRefused(
                f"The panel's superuser does not connect to the tenant database {dbname!r}; "
                "use monitor_connection() to read there."
            )
        params: dict[str, Any] = {
            "host": str(cluster.socket_dir) if port else server_host(cluster),
            "port": port or server_port(cluster),
            "user": settings.PANEL_SUPERUSER,
            "password": credentials.superuser_password(cluster),
            "dbname": MAINTENANCE_DATABASE,
        }
        if not params["host"].startswith("/"):  # a primary on another node: its certificate too
            params.update(member_tls.panel_client_params(cluster))
        with connect(quiet_log=quiet_log, session_settings=quiet_log, **params) as conn:
            yield conn
    else:
        with connect(unpinned_behind_pooler=True, **_attached_params(cluster, dbname)) as conn:
            yield conn


STATEMENTS_EXTENSION = "pg_stat_statements"


def ensure_statements_extension(conn: psycopg.Connection) -> bool:
    """``CREATE EXTENSION IF NOT EXISTS pg_stat_statements`` in the connected database (in
    ``public``: the pinned search_path names no schema to create in); True when it was missing.

    The superuser's maintenance database is the one place: the extension is not trusted (only a
    superuser creates it), the superuser never enters a tenant's database, and its view there
    shows every database's statements. Its reset function stays the superuser's (the extension
    revokes it from PUBLIC)."""
    exists = conn.execute(
        "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = %s", [STATEMENTS_EXTENSION]
    ).fetchone()
    if exists:
        return False
    conn.execute(
        sql.SQL("CREATE EXTENSION IF NOT EXISTS {} SCHEMA public").format(
            sql.Identifier(STATEMENTS_EXTENSION)
        )
    )
    return True


# A template database of the panel's own: made by provisioning before any tenant role exists,
# owned by the superuser, nobody may connect to it once made; it holds pg_stat_statements, so
# that every database the panel creates from it has the extension (the view, its own statements'
# texts for the tenant, PostgreSQL's rules for the others'; the reset stays the superuser's).
STATEMENTS_TEMPLATE = "pgpanel_template"


@contextmanager
def statements_template_connection(cluster: Cluster) -> Iterator[psycopg.Connection]:
    """The superuser in the panel's template database, while provisioning makes it (a local
    cluster only; no tenant role exists yet, and no role may connect to it afterwards)."""
    if not cluster.is_local:
        raise TenantDatabaseRefused("only a cluster provisioned here has the panel's template database")
    params: dict[str, Any] = {
        "host": server_host(cluster),
        "port": server_port(cluster),
        "user": settings.PANEL_SUPERUSER,
        "password": credentials.superuser_password(cluster),
        "dbname": STATEMENTS_TEMPLATE,
    }
    with connect(**params) as conn:
        yield conn


def statements_template(conn: psycopg.Connection) -> str | None:
    """The panel's template database if it is the panel's: a template a superuser owns (a
    database of that name a tenant made is never used)."""
    row = conn.execute(
        "SELECT 1 FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles r ON r.oid = d.datdba "
        "WHERE d.datname = %s AND d.datistemplate AND NOT d.datallowconn AND r.rolsuper",
        [STATEMENTS_TEMPLATE],
    ).fetchone()
    return STATEMENTS_TEMPLATE if row else None


@contextmanager
def monitor_connection(cluster: Cluster, dbname: str | None = None) -> Iterator[psycopg.Connection]:
    """An autocommit connection for collection and measurement, in ``dbname`` (by default the
    maintenance database of a local cluster, the default database of an attached one).

    Local clusters: the monitor role, which can read every statistic and size but owns nothing
    and may change nothing. Attached servers: the admin credentials given (not our superuser).
    """
    if cluster.is_local:
        if not cluster.monitor_password_encrypted:
            # Clusters from before the monitor role get it from the next reconciler pass.
            raise DatabaseError(
                f"the monitoring role {settings.PANEL_MONITOR_ROLE} is not set up yet on this cluster"
            )
        params: dict[str, Any] = {
            "host": server_host(cluster),
            "port": server_port(cluster),
            "user": settings.PANEL_MONITOR_ROLE,
            "password": credentials.monitor_password(cluster),
            "dbname": dbname or MAINTENANCE_DATABASE,
        }
        with connect(**params) as conn:
            yield conn
    else:
        with connect(unpinned_behind_pooler=True, **_attached_params(cluster, dbname)) as conn:
            yield conn


def _attached_params(cluster: Cluster, dbname: str | None) -> dict[str, Any]:
    admin = cluster.users.get(name=cluster.admin_user)
    params: dict[str, Any] = {
        "host": cluster.host,
        "port": cluster.port,
        "user": cluster.admin_user,
        "password": admin.password,
        "dbname": dbname or cluster.default_database,
        "sslmode": cluster.sslmode,
        **outside_client_params(cluster.sslmode),  # no ~/.pgpass, no client certificate
    }
    if cluster.host_address:
        # The address attach checked: a later DNS answer (127.0.0.1) cannot move the connection.
        params["hostaddr"] = cluster.host_address
    return params


def scram_verifier(conn: psycopg.Connection, role: str, password: str) -> str:
    """Hash the password client-side so the plain text never reaches the server or its log."""
    return conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()


def create_role(conn: psycopg.Connection, role: str, password: str, *, admin: bool = False) -> None:
    options = sql.SQL("LOGIN CREATEDB CREATEROLE") if admin else sql.SQL("LOGIN")
    conn.execute(
        sql.SQL("CREATE ROLE {} WITH {} PASSWORD {}").format(
            sql.Identifier(role), options, sql.Literal(scram_verifier(conn, role, password))
        )
    )


def set_password(conn: psycopg.Connection, role: str, password: str) -> None:
    conn.execute(
        sql.SQL("ALTER ROLE {} WITH PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(scram_verifier(conn, role, password))
        )
    )


def drop_role(conn: psycopg.Connection, role: str) -> None:
    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def create_database(conn: psycopg.Connection, name: str, owner: str) -> None:
    """From the panel's template when the cluster has it (pg_stat_statements in it), else template1."""
    template = statements_template(conn)
    if template is None:
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner))
        )
        return
    conn.execute(
        sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(owner), sql.Identifier(template)
        )
    )


def drop_database(conn: psycopg.Connection, name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))


def list_databases(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(name, owner) of the databases the connected role may connect to."""
    # A database the role cannot enter (the system database here, rdsadmin on RDS…) would only
    # give connection details that fail.
    rows = conn.execute(
        "SELECT d.datname, pg_catalog.pg_get_userbyid(d.datdba) FROM pg_catalog.pg_database d "
        "WHERE NOT d.datistemplate AND d.datallowconn "
        "AND pg_catalog.has_database_privilege(d.oid, 'CONNECT') ORDER BY d.datname"
    ).fetchall()
    return [(name, owner) for name, owner in rows]


def revoke_memberships(conn: psycopg.Connection, roles: Sequence[str]) -> list[tuple[str, str]]:
    """Revoke every membership in ``roles`` held by a role that is not superuser; returns the
    (role, member) pairs revoked."""
    pairs = conn.execute(
        "SELECT r.rolname, m.rolname FROM pg_catalog.pg_auth_members a "
        "JOIN pg_catalog.pg_roles r ON r.oid = a.roleid "
        "JOIN pg_catalog.pg_roles m ON m.oid = a.member "
        "WHERE r.rolname = ANY(%s::pg_catalog.name[]) AND NOT m.rolsuper "
        "ORDER BY 1, 2",
        [list(roles)],
    ).fetchall()
    for role, member in pairs:
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(role), sql.Identifier(member)))
    return [(role, member) for role, member in pairs]


def demote_privileged_roles(conn: psycopg.Connection, *, keep: str, replication: str = "") -> list[str]:
    """Remove SUPERUSER, REPLICATION and BYPASSRLS from every role but ``keep`` and the bootstrap
    superuser (``replication``, the panel's replication role, keeps REPLICATION and nothing
    more); returns the roles changed."""
    names = [
        name
        for (name,) in conn.execute(
            "SELECT rolname FROM pg_catalog.pg_roles "
            "WHERE (rolsuper OR rolreplication OR rolbypassrls) "
            "AND rolname <> %s AND oid <> 10 "
            "AND NOT (rolname = %s AND NOT rolsuper AND NOT rolbypassrls) ORDER BY 1",
            [keep, replication],
        ).fetchall()
    ]
    for name in names:
        conn.execute(
            sql.SQL("ALTER ROLE {} NOSUPERUSER NOREPLICATION NOBYPASSRLS").format(sql.Identifier(name))
        )
    return names
