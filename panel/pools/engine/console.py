"""Queries to PgBouncer's admin console (the ``pgbouncer`` database), over its Unix socket.

The console speaks only the simple query protocol, hence psycopg's ``ClientCursor``. Results are
handed to the pure parsers in ``lib.admin_console``, which read columns by name.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from panel.clusters.face import dbconn
from panel.clusters.models import Cluster
from panel.pools.engine.disk import bouncer_files
from panel.pools.engine.rendering import ADMIN_ROLE, get_pooler
from panel.pools.lib.admin_console import (
    AdminConsoleError,
    ClientRow,
    DatabaseRow,
    PoolRow,
    StatsRow,
    parse_show_clients,
    parse_show_databases,
    parse_show_pools,
    parse_show_stats,
)
from panel.pools.lib.pgbouncer_ini import ADMIN_DATABASE
from panel.pools.models import Pooler

CONNECT_TIMEOUT = 5
# libpq takes whole seconds and waits at least 2 (0 would mean forever).
MIN_CONNECT_TIMEOUT = 2

Connection = psycopg.Connection[tuple[Any, ...]]


class ConsoleError(Exception):
    """The admin console did not answer or refused; the message is PgBouncer's own."""


def connect_timeout_seconds(seconds: float) -> int:
    """The whole seconds libpq is given to wait for the console: ``seconds`` rounded up, at least 2."""
    return max(MIN_CONNECT_TIMEOUT, math.ceil(seconds))


@contextmanager
def connect(
    socket_dir: Path, port: int, user: str, password: str, *, connect_timeout: float = CONNECT_TIMEOUT
) -> Iterator[Connection]:
    """A console connection, closed on leaving; psycopg errors become ``ConsoleError``.

    ``connect_timeout`` (seconds) bounds the connect only: see ``connect_timeout_seconds``.
    """
    try:
        # PgBouncer refuses startup parameters it does not know, ``options`` among them.
        with dbconn.connect(
            pin_search_path=False,
            host=str(socket_dir),
            port=port,
            dbname=ADMIN_DATABASE,
            user=user,
            password=password,
            connect_timeout=connect_timeout_seconds(connect_timeout),
            cursor_factory=psycopg.ClientCursor,
        ) as conn:
            yield conn
    except dbconn.DatabaseError as exc:
        raise ConsoleError(str(exc)) from None


def show(conn: Connection, what: str) -> tuple[list[str], Sequence[tuple[Any, ...]]]:
    cur = conn.execute(f"SHOW {what}")
    if cur.description is None:
        raise ConsoleError(f"SHOW {what} returned no result.")
    return [col.name for col in cur.description], cur.fetchall()


def _parsed(conn: Connection, what: str, parser: Any) -> Any:
    try:
        return parser(*show(conn, what))
    except AdminConsoleError as exc:
        raise ConsoleError(str(exc)) from None


def show_databases(conn: Connection) -> list[DatabaseRow]:
    return _parsed(conn, "DATABASES", parse_show_databases)


def show_pools(conn: Connection) -> list[PoolRow]:
    return _parsed(conn, "POOLS", parse_show_pools)


def show_stats(conn: Connection) -> list[StatsRow]:
    return _parsed(conn, "STATS", parse_show_stats)


def show_clients(conn: Connection) -> list[ClientRow]:
    return _parsed(conn, "CLIENTS", parse_show_clients)


def reconnect(conn: Connection) -> None:
    """RECONNECT closes every server connection once released: idle ones go at once."""
    conn.execute("RECONNECT")


def quote_name(name: str) -> str:
    """A database name as the console's command parser takes it: double-quoted, so that ``-`` and
    ``.`` in a pool name are part of the name (pool names never contain a double quote)."""
    if '"' in name:
        raise ConsoleError(f"A database name with a double quote cannot be named on the console: {name!r}")
    return f'"{name}"'


def reconnect_database(conn: Connection, name: str) -> None:
    """RECONNECT of one pool: its idle servers close at once, its active ones when released.

    Its clients stay connected; the pool opens new servers on demand.
    """
    conn.execute(f"RECONNECT {quote_name(name)}")


def pause(conn: Connection, *, timeout: float) -> bool:
    """PAUSE every pool: clients' queries wait, servers close once their query (transaction) ends.

    PAUSE answers only when every server is released, which a session pool's client may delay
    for as long as it stays: after ``timeout`` seconds this returns False with the pause still in
    force (new queries wait all the same); the connection is then busy and good only for closing.
    """
    pgconn = conn.pgconn
    pgconn.send_query(b"PAUSE")
    deadline = time.monotonic() + timeout
    while pgconn.is_busy():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        select.select([pgconn.socket], [], [], left)
        pgconn.consume_input()
    while (result := pgconn.get_result()) is not None:
        if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
            raise ConsoleError((result.error_message or b"PAUSE failed").decode(errors="replace"))
    return True


def resume(conn: Connection) -> None:
    """RESUME after ``pause``: the waiting clients get servers again (where the files now point)."""
    conn.execute("RESUME")


def reload(conn: Connection) -> None:
    """RELOAD re-reads both files; it answers success even for a broken file (verify after)."""
    conn.execute("RELOAD")


@contextmanager
def admin_console(cluster: Cluster, pooler: Pooler | None = None) -> Iterator[Connection]:
    """The console of the cluster's own PgBouncer, as its admin role, over the cluster's socket."""
    files = bouncer_files(cluster)
    password = (pooler or get_pooler(cluster)).admin_password
    with connect(files.socket_dir, files.port, ADMIN_ROLE, password) as conn:
        yield conn
