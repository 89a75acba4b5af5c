"""The cluster side of a migration: the subscriptions, and the role that owns them.

PostgreSQL 15 lets only a superuser create a subscription, and a subscription's changes are
applied with its owner's rights: a trigger the tenant marks ``ENABLE ALWAYS`` would run as that
owner. So the subscriptions have an owner of their own, ``PANEL_MIGRATION_ROLE``
(``pgpanel_migrate``, reserved by the privilege guard: no tenant can alter it, grant it, set its
password or own what it owns): created SUPERUSER (LOGIN, which the replication workers need to
start as it, but with no password: nobody logs in as it),
it creates the subscriptions disabled (their slots are made on the source then), is demoted to an
ordinary role with rights on the migrated tables only, and only then are the subscriptions
enabled: no row is applied, not even the first copy, with a superuser's rights. The role owns
nothing else and is dropped with the subscriptions (one migration per cluster at a time).

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

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.core import runas
from panel.migrate.lib import source as source_lib

log = logging.getLogger(__name__)


@contextmanager
def superuser_in(cluster: Cluster, dbname: str) -> Iterator[psycopg.Connection]:
    """The panel's superuser in one of the cluster's databases (see the module's docstring)."""
    with dbconn.connect(
        quiet_log=True,
        host=str(cluster.socket_dir),
        port=cluster.port,
        user=settings.PANEL_SUPERUSER,
        password=cluster.superuser_password,
        dbname=dbname,
    ) as conn:
        yield conn


def passfile(cluster: Cluster, name: str) -> Path:
    return cluster.data_root / f"{name}.pgpass"


def write_passfile(cluster: Cluster, name: str, password: str) -> Path:
    path = passfile(cluster, name)
    runas.write_private_file(path, source_lib.pgpass_line(password), owner=cluster.os_user())
    return path


def remove_passfile(cluster: Cluster, name: str) -> None:
    passfile(cluster, name).unlink(missing_ok=True)


def create_role(cluster: Cluster, role: str) -> None:
    """The subscriptions' owner, superuser for now (one left by a crashed migration is reused)."""
    with dbconn.admin_connection(cluster) as conn:
        exists = conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(sql.SQL(verb + " ROLE {} SUPERUSER LOGIN PASSWORD NULL").format(sql.Identifier(role)))


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
    """The role loses SUPERUSER and gets the rights a subscriber needs on the migrated tables;
    then the subscriptions start."""
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(role)))
    for dbname, name in subscriptions.items():
        with superuser_in(cluster, dbname) as conn:
            schemas = [
                schema
                for (schema,) in conn.execute(
                    "SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname NOT IN "
                    "('pg_catalog', 'information_schema', 'pg_toast') AND nspname NOT LIKE 'pg\\_%'"
                ).fetchall()
            ]
            for schema in schemas:
                conn.execute(
                    sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                        sql.Identifier(schema), sql.Identifier(role)
                    )
                )
                conn.execute(
                    sql.SQL(
                        "GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA {} TO {}"
                    ).format(sql.Identifier(schema), sql.Identifier(role))
                )
            conn.execute(sql.SQL("ALTER SUBSCRIPTION {} ENABLE").format(sql.Identifier(name)))


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
        if conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            return
    for dbname in databases:
        try:
            with superuser_in(cluster, dbname) as conn:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        except dbconn.DatabaseError as exc:
            log.warning("revoking %s in %s failed: %s", role, dbname, exc)
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
