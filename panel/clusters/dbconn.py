"""Connections the panel itself opens to a cluster, and SQL run through them.

Local clusters are reached as the panel's superuser over the Unix socket only; attached servers
with the admin credentials given when they were attached, and a server about to be attached with
the credentials the user typed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from psycopg import sql

from panel.clusters.models import Cluster

CONNECT_TIMEOUT = 5


class DatabaseError(Exception):
    """PostgreSQL refused what the panel asked; the message is PostgreSQL's own."""


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


@contextmanager
def connect(*, connect_timeout: int = CONNECT_TIMEOUT, **params: Any) -> Iterator[psycopg.Connection]:
    """An autocommit connection with libpq ``params`` (and psycopg's, e.g. ``cursor_factory``);
    PostgreSQL's or PgBouncer's refusals become DatabaseError."""
    try:
        conn = psycopg.connect(
            **params, autocommit=True, connect_timeout=connect_timeout, application_name="pgpanel"
        )
    except psycopg.Error as exc:
        raise DatabaseError(pg_message(exc)) from None
    try:
        yield conn
    except psycopg.Error as exc:
        raise DatabaseError(pg_message(exc)) from None
    finally:
        conn.close()


@contextmanager
def admin_connection(cluster: Cluster, dbname: str | None = None) -> Iterator[psycopg.Connection]:
    """An autocommit connection with the panel's maintenance rights on ``cluster``."""
    if cluster.is_local:
        params = {
            "host": str(cluster.socket_dir),
            "port": cluster.port,
            "user": settings.PANEL_SUPERUSER,
            "password": cluster.superuser_password,
            "dbname": dbname or "postgres",
        }
    else:
        admin = cluster.users.get(name=cluster.admin_user)
        params = {
            "host": cluster.host,
            "port": cluster.port,
            "user": cluster.admin_user,
            "password": admin.password,
            "dbname": dbname or cluster.default_database,
            "sslmode": cluster.sslmode,
        }
    with connect(**params) as conn:
        yield conn


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
    conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner)))


def drop_database(conn: psycopg.Connection, name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))


def list_databases(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(name, owner) of the databases the connected role may connect to."""
    # A database the role cannot enter (the system database here, rdsadmin on RDS…) would only
    # give connection details that fail.
    rows = conn.execute(
        "SELECT d.datname, pg_get_userbyid(d.datdba) FROM pg_database d "
        "WHERE NOT d.datistemplate AND d.datallowconn "
        "AND has_database_privilege(d.oid, 'CONNECT') ORDER BY d.datname"
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


def demote_privileged_roles(conn: psycopg.Connection, *, keep: str) -> list[str]:
    """Remove SUPERUSER, REPLICATION and BYPASSRLS from every role but ``keep`` and the bootstrap
    superuser; returns the roles changed."""
    names = [
        name
        for (name,) in conn.execute(
            "SELECT rolname FROM pg_catalog.pg_roles "
            "WHERE (rolsuper OR rolreplication OR rolbypassrls) "
            "AND rolname <> %s AND oid <> 10 ORDER BY 1",
            [keep],
        ).fetchall()
    ]
    for name in names:
        conn.execute(
            sql.SQL("ALTER ROLE {} NOSUPERUSER NOREPLICATION NOBYPASSRLS").format(sql.Identifier(name))
        )
    return names
