"""The cluster side of a migration: the subscriptions, and the role that owns them.

PostgreSQL 15 lets only a superuser create a subscription, and a subscription's changes are
applied with its owner's rights: a trigger the tenant marks ``ENABLE ALWAYS`` would run as that
owner. So the subscriptions have an owner of their own, ``PANEL_MIGRATION_ROLE``
(``pgpanel_migrate``, reserved by the privilege guard: no tenant can alter it, grant it, set its
password or own what it owns): created SUPERUSER (LOGIN, which the replication workers need to
start as it, but with no password: nobody logs in as it),
it creates the subscriptions disabled (their slots are made on the source then), is demoted to an
ordinary role with the apply's rights on the subscribed tables only, and only then are the
subscriptions enabled: no row is applied, not even the first copy, with a superuser's rights. The
role owns nothing else and is dropped with the subscriptions (one migration per cluster at a
time). Once demoted it can no longer touch them: the privilege guard refuses every statement on a
subscription to any role but a superuser, so a tenant's trigger fired by the apply (which runs as
this role) cannot point a subscription elsewhere (``ALTER SUBSCRIPTION … CONNECTION``); every
later statement on them (ENABLE, DISABLE, DROP) is the panel's superuser's.

The panel's superuser enters the tenant's databases here, which it does nowhere else
(``dbconn.admin_connection`` refuses to): subscriptions live in a database. Only statements that
run no function of the tenant's are sent (CREATE/ALTER/DROP SUBSCRIPTION, GRANT, setval on
qualified names), with the pinned search_path and out of the server's log.

The source's password reaches the subscription through a 0600 password file of the cluster's
system user (``passfile=`` in the connection string), never in the catalogue.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from django.conf import settings
from psycopg import sql

from panel.clusters.face import dbconn, isolation, member_tls, panel_roles
from panel.clusters.models import Cluster, credentials
from panel.clusters.models.servers import server_host, server_port
from panel.core import runas
from panel.core.errors import N_, ServiceError
from panel.migrate.lib import source as source_lib

log = logging.getLogger(__name__)


@contextmanager
def superuser_in(cluster: Cluster, dbname: str) -> Iterator[psycopg.Connection]:
    """The panel's superuser in one of the cluster's databases (see the module's docstring), on
    the server itself: with standbys the cluster's port is HAProxy's, and the subscriptions live
    on the primary member, which listens on a port of its own (``models.servers.server_port``)."""
    with dbconn.connect(
        quiet_log=True,
        host=server_host(cluster),
        port=server_port(cluster),
        user=settings.PANEL_SUPERUSER,
        password=credentials.superuser_password(cluster),
        dbname=dbname,
        **({} if server_host(cluster).startswith("/") else member_tls.panel_client_params(cluster)),
    ) as conn:
        yield conn


def passfile(cluster: Cluster, name: str) -> Path:
    return cluster.data_root / f"{name}.pgpass"


def write_passfile(cluster: Cluster, name: str, password: str) -> Path:
    path = passfile(cluster, name)
    runas.write_private_file(path, source_lib.pgpass_line(password), owner=isolation.os_user(cluster))
    return path


def remove_passfile(cluster: Cluster, name: str) -> None:
    passfile(cluster, name).unlink(missing_ok=True)


def create_role(cluster: Cluster, role: str) -> None:
    """The subscriptions' owner, superuser for now (one left by a crashed migration is reused;
    a role of that name the panel did not make is refused with NotPanelRole, never made superuser)."""
    with dbconn.admin_connection(cluster) as conn, conn.transaction():
        exists = panel_roles.claim(conn, role)
        verb = "ALTER" if exists else "CREATE"
        conn.execute(sql.SQL(verb + " ROLE {} SUPERUSER LOGIN PASSWORD NULL").format(sql.Identifier(role)))
        if not exists:
            panel_roles.mark(conn, role)


def create_subscription(
    cluster: Cluster, dbname: str, role: str, name: str, conninfo: str, publication: str
) -> None:
    """A disabled subscription owned by ``role`` (still superuser), its slot made on the source."""
    with superuser_in(cluster, dbname) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("CREATE SUBSCRIPTION {} CONNECTION {} PUBLICATION {} WITH (enabled = false)").format(
                sql.Identifier(name), sql.Literal(conninfo), sql.Identifier(publication)
            )
        )
        conn.execute("RESET ROLE")


def demote_and_enable(cluster: Cluster, role: str, subscriptions: dict[str, str]) -> None:
    """The role loses SUPERUSER and gets what the apply needs on the tables its subscriptions
    replicate (USAGE on their schemas; SELECT, which PostgreSQL 15 checks for an UPDATE's key,
    INSERT, UPDATE, DELETE and TRUNCATE on them; nothing on any other relation); then the
    subscriptions start. A tenant's trigger fired by the apply runs as this role: it must hold
    nothing the tenant lacks, and the privilege guard refuses it every statement on a
    subscription."""
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(role)))
    grantee = sql.Identifier(role)
    for dbname, name in subscriptions.items():
        with superuser_in(cluster, dbname) as conn:
            # The subscription listed its tables when it was created (disabled, but connected).
            relations = conn.execute(
                "SELECT n.nspname, c.relname FROM pg_catalog.pg_subscription_rel r"
                " JOIN pg_catalog.pg_subscription s ON s.oid = r.srsubid"
                " JOIN pg_catalog.pg_class c ON c.oid = r.srrelid"
                " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                " WHERE s.subname = %s ORDER BY 1, 2",
                (name,),
            ).fetchall()
            for schema in sorted({schema for schema, _table in relations}):
                conn.execute(
                    sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), grantee)
                )
            if relations:
                conn.execute(
                    sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON TABLE {} TO {}").format(
                        sql.SQL(", ").join(sql.Identifier(schema, table) for schema, table in relations),
                        grantee,
                    )
                )
            if not owner_is_refused(conn, role, name):
                raise ServiceError(
                    N_(
                        "The cluster runs a privilege guard from before subscriptions were guarded; "
                        "restart the cluster, then start the migration again."
                    ),
                    code="migration.guard_outdated",
                    params={},
                )
            conn.execute(sql.SQL("ALTER SUBSCRIPTION {} ENABLE").format(sql.Identifier(name)))


def owner_is_refused(conn: psycopg.Connection, role: str, name: str) -> bool:
    """Whether the server refuses ``role`` (the subscription's owner, no longer superuser) a
    statement on its subscription ``name``. A running server keeps the guard it started with
    until it restarts: one from before the subscription rule lets the owner change the
    connection, and then no row may be applied as that role. Nothing is changed either way."""
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("COMMENT ON SUBSCRIPTION {} IS NULL").format(sql.Identifier(name)))
    except psycopg.errors.InsufficientPrivilege:
        return True
    return False


def table_states(cluster: Cluster, dbname: str, name: str) -> tuple[int, int]:
    """(tables ready, tables in all) of a subscription: ready once the first copy is done."""
    with superuser_in(cluster, dbname) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE r.srsubstate = 'r'), count(*) FROM pg_catalog.pg_subscription_rel r"
            " JOIN pg_catalog.pg_subscription s ON s.oid = r.srsubid WHERE s.subname = %s",
            (name,),
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def errors_seen(cluster: Cluster, name: str) -> int:
    """How many times the subscription's workers failed (PostgreSQL 15's statistics)."""
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT apply_error_count + sync_error_count FROM pg_catalog.pg_stat_subscription_stats"
            " WHERE subname = %s",
            (name,),
        ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def set_sequences(cluster: Cluster, dbname: str, values: list[tuple[str, str, int]]) -> None:
    """The source's sequence values onto the cluster's sequences of the same names."""
    with superuser_in(cluster, dbname) as conn:
        for schema, name, value in values:
            conn.execute(
                "SELECT pg_catalog.setval(r, %s, true) FROM pg_catalog.to_regclass("
                "pg_catalog.format('%%I.%%I', %s::text, %s::text)) AS r WHERE r IS NOT NULL",
                (value, schema, name),
            )


def drop_subscription(cluster: Cluster, dbname: str, name: str) -> bool:
    """Drop the subscription and, when the source answers, its slot there; True when the slot
    had to be left on the source."""
    ident = sql.Identifier(name)
    with superuser_in(cluster, dbname) as conn:
        if (
            conn.execute("SELECT 1 FROM pg_catalog.pg_subscription WHERE subname = %s", (name,)).fetchone()
            is None
        ):
            return False
        try:
            conn.execute(sql.SQL("DROP SUBSCRIPTION {}").format(ident))
            return False
        except psycopg.Error as exc:
            log.warning("dropping subscription %s with its slot failed: %s", name, dbconn.pg_message(exc))
        conn.execute(sql.SQL("ALTER SUBSCRIPTION {} DISABLE").format(ident))
        conn.execute(sql.SQL("ALTER SUBSCRIPTION {} SET (slot_name = NONE)").format(ident))
        conn.execute(sql.SQL("DROP SUBSCRIPTION {}").format(ident))
        return True


def drop_role(cluster: Cluster, role: str, databases: list[str]) -> None:
    """Revoke what the role was granted in each database, then drop it."""
    with dbconn.admin_connection(cluster) as conn:
        if not panel_roles.claim(conn, role):  # no such role; somebody else's raises NotPanelRole
            return
    for dbname in databases:
        try:
            with superuser_in(cluster, dbname) as conn:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        except dbconn.DatabaseError as exc:
            log.warning("revoking %s in %s failed: %s", role, dbname, exc)
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
