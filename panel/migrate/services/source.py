"""The source server: where the panel may connect, the checks before a migration starts, and
what it does there (publications, the lag, sequence values).

The host is resolved once, when the migration starts, and every address is checked
(``panel.clusters.services.destinations``: loopback, link-local, unspecified, multicast and
reserved addresses, every address of this machine and of the registered nodes, on any port),
unless it lies in ``PANEL_MIGRATION_SOURCE_NETWORKS``; the panel's own cluster ports are refused
even then. Every later connection, the cluster's subscription included, goes to the recorded
address (``hostaddr``), checked again before the panel connects. The server must ask for a password (libpq's ``require_auth``, and
``PQconnectionUsedPassword`` on the connection that succeeded): a server that trusts whoever
connects from the panel's machine is not one a tenant may point the panel at.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, cast

import psycopg
from django.conf import settings
from django.core.cache import cache
from psycopg import sql

from panel.clusters.face import attach, dbconn, destinations, failures
from panel.clusters.lib import libpq
from panel.clusters.lib.hosts import InvalidHost, validate_host
from panel.core.errors import N_, ServiceError
from panel.env import env_int
from panel.migrate.lib import source as source_lib
from panel.migrate.lib.source import Source

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10
# The window of PANEL_MIGRATION_RATE (starts that reach the network, per account).
RATE_SECONDS = env_int("PANEL_MIGRATION_RATE_SECONDS", 600, minimum=1)


def _allowed_networks() -> list[destinations.Network]:
    return destinations.networks(settings.PANEL_MIGRATION_SOURCE_NETWORKS)


def _refused(address: object) -> ServiceError:
    # The setting that would allow it is the operator's: the log names it, the tenant reads what to do.
    log.info("migration source %s refused: not public, not in PANEL_MIGRATION_SOURCE_NETWORKS", address)
    return ServiceError(
        N_(
            "The panel does not migrate from %(address)s, a private address: use the source's "
            "public address, or ask the panel's operator to allow that network."
        ),
        field="host",
        code="migration.host_forbidden",
        params={"address": str(address)},
    )


def count_attempt(account_id: object) -> None:
    """Count one start that reaches the network; refuse it when the account used up its window."""
    key = f"migration-attempts:{account_id}"
    window = RATE_SECONDS
    now = time.time()
    recent = [t for t in cache.get(key, []) if now - t < window]
    if len(recent) >= settings.PANEL_MIGRATION_RATE:
        raise ServiceError(
            N_("Too many migration attempts from this account. Try again in %(minutes)s minutes."),
            code="migration.rate_limited",
            params={"minutes": int(window - (now - min(recent))) // 60 + 1},
        )
    cache.set(key, [*recent, now], window)


def canonical_host(source: Source) -> str:
    try:
        return validate_host(source.host)
    except InvalidHost as exc:
        raise ServiceError.of(exc, "host") from None


def resolve_allowed(source: Source) -> str:
    """The one address of ``source.host`` (canonical) the migration will use; a ServiceError on
    the host field when it cannot be resolved or may not be reached."""
    host = source.host
    try:
        return destinations.checked_address(host, source.port, allowed=_allowed_networks())
    except destinations.Unresolved as exc:
        raise exc.refusal(field="host", code="migration.host_unresolved") from None
    except destinations.Refused as exc:
        log.info("migration source %s:%s refused: %s", host, source.port, exc)
        raise _refused(exc.address) from None


def connection_params(source: Source, address: str, dbname: str | None = None) -> dict[str, Any]:
    """libpq parameters (the password apart) for the source at its checked address."""
    return {
        "host": source.host,
        "hostaddr": address,
        "port": source.port,
        "user": source.username,
        "dbname": dbname or source.dbname,
        "sslmode": source.sslmode,
    }


@contextmanager
def connect(
    source: Source, address: str, password: str, dbname: str | None = None
) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the source; a ServiceError with PostgreSQL's words when it
    cannot be had, when the server let the user in without asking for the password, or when a
    statement sent there fails (``migration.source_refused``)."""
    try:
        # Checked again: the operator's networks or the nodes may have changed since the start.
        destinations.check([ipaddress.ip_address(address)], source.port, allowed=_allowed_networks())
    except destinations.Refused as exc:
        log.info("migration source %s:%s refused: %s", source.host, source.port, exc)
        raise _refused(exc.address) from None
    with ExitStack() as stack:
        try:
            conn = stack.enter_context(
                dbconn.connect(
                    unpinned_behind_pooler=True,
                    connect_timeout=CONNECT_TIMEOUT,
                    password=password,
                    require_auth=attach.PASSWORD_METHODS,
                    **cast(dict[str, Any], libpq.outside_client_params(source.sslmode)),
                    **connection_params(source, address, dbname),
                )
            )
        except dbconn.DatabaseError as exc:
            # libpq's words are English and may name the panel's files (its CA bundle): the log's.
            log.info("migration source %s:%s unreachable: %s", source.host, source.port, exc)
            reason = failures.connecting(exc, user=source.username, database=dbname, sslmode=source.sslmode)
            raise ServiceError(
                N_("Could not connect to the source server: %(reason)s"),
                code="migration.source_unreachable",
                params={"reason": reason},
            ) from None
        if not attach.password_was_used(conn):
            raise ServiceError(
                N_(
                    "The source server let the user in without asking for a password; the panel "
                    "migrates only from a server that asks for one."
                ),
                field="password",
                code="migration.source_no_password",
                params={},
            )
        try:
            yield conn
        except (psycopg.Error, dbconn.DatabaseError) as exc:
            raise ServiceError(
                N_("The source server refused: %(reason)s"),
                code="migration.source_refused",
                params={"reason": dbconn.pg_message(exc) if isinstance(exc, psycopg.Error) else str(exc)},
            ) from None


def preflight(conn: psycopg.Connection, source: Source) -> list[str]:
    """The checks a source must pass; returns the databases to copy."""
    wal_level = conn.execute("SHOW wal_level").fetchone()[0]  # type: ignore[index]
    if wal_level != "logical":
        raise ServiceError(
            N_(
                "The source server has wal_level = %(level)s; logical replication needs wal_level = "
                "logical (set it in postgresql.conf and restart the source)."
            ),
            code="migration.source_wal_level",
            params={"level": wal_level},
        )
    row = conn.execute(
        "SELECT rolsuper, rolreplication FROM pg_catalog.pg_roles WHERE rolname = current_user"
    ).fetchone()
    superuser, replication = bool(row and row[0]), bool(row and row[1])
    if not (superuser or replication):
        raise ServiceError(
            N_(
                "The user “%(user)s” may not replicate on the source server: give it the REPLICATION "
                "attribute (ALTER ROLE … REPLICATION) or use a superuser."
            ),
            field="username",
            code="migration.source_rights",
            params={"user": source.username},
        )
    found = [
        name
        for (name,) in conn.execute(
            "SELECT datname FROM pg_catalog.pg_database WHERE datallowconn AND NOT datistemplate"
        ).fetchall()
    ]
    missing = sorted(set(source.ignore_dbs) - set(found))
    if missing:
        raise ServiceError(
            N_("The source server has no database “%(name)s” to leave out."),
            field="ignore_dbs",
            code="migration.ignore_unknown",
            params={"name": missing[0]},
        )
    databases = source_lib.databases_to_migrate(found, source.ignore_dbs)
    if not databases:
        raise ServiceError(
            N_("There is no database to migrate: every database of the source is left out."),
            field="ignore_dbs",
            code="migration.nothing_to_migrate",
            params={},
        )
    for name in databases:
        source_lib.check_name(name, "ignore_dbs")
    return databases


USER_TABLES = """
SELECT n.nspname, c.relname, pg_catalog.pg_has_role(c.relowner, 'USAGE')
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY 1, 2
"""


def tables(conn: psycopg.Connection, dbname: str) -> list[tuple[str, str]]:
    """The tables a publication of this database lists; a ServiceError when the user owns
    some not (PostgreSQL 15 lets only a table's owner, or a superuser, publish it)."""
    rows = conn.execute(USER_TABLES).fetchall()
    superuser = conn.execute(
        "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user"
    ).fetchone()
    not_owned = [f"{schema}.{table}" for schema, table, owns in rows if not owns]
    if not_owned and not (superuser and superuser[0]):
        raise ServiceError(
            N_(
                "The user may not publish the table %(table)s of the database “%(database)s” on the "
                "source: only a table's owner or a superuser can."
            ),
            field="username",
            code="migration.source_rights",
            params={"table": not_owned[0], "database": dbname},
        )
    return [(schema, table) for schema, table, _owns in rows]


def create_publication(conn: psycopg.Connection, name: str, relations: list[tuple[str, str]]) -> None:
    listed = sql.SQL(", ").join(sql.Identifier(schema, table) for schema, table in relations)
    conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(sql.Identifier(name), listed))


def drop_publication(conn: psycopg.Connection, name: str) -> None:
    conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(name)))


def current_lsn(conn: psycopg.Connection) -> str:
    return str(conn.execute("SELECT pg_catalog.pg_current_wal_lsn()").fetchone()[0])  # type: ignore[index]


def slot_lag(conn: psycopg.Connection, slot: str, since: str | None = None) -> int | None:
    """How many bytes of the source's WAL the slot's subscriber has not confirmed: since the
    source's current position, or ``since`` (a cut-over's mark). None: no such slot."""
    row = conn.execute(
        "SELECT pg_catalog.pg_wal_lsn_diff(coalesce(%s::pg_lsn, pg_catalog.pg_current_wal_lsn()), confirmed_flush_lsn)"
        " FROM pg_catalog.pg_replication_slots WHERE slot_name = %s",
        (since, slot),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return max(0, int(row[0]))


def sequences(conn: psycopg.Connection) -> list[tuple[str, str, int]]:
    """The source's sequences that were used, with their last value."""
    return [
        (schema, name, int(value))
        for schema, name, value in conn.execute(
            "SELECT schemaname, sequencename, last_value FROM pg_catalog.pg_sequences"
            " WHERE last_value IS NOT NULL ORDER BY 1, 2"
        ).fetchall()
    ]
