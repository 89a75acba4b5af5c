"""What a cluster's storage is made of right now, read from the server itself: each database's
size, the space and relations each role owns in each database, the data directory's size
(every database plus the WAL), and the database time the readings took."""

from __future__ import annotations

import logging
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field

import psycopg
from django.conf import settings
from psycopg import sql

from panel.clusters.face import dbconn
from panel.clusters.models import Cluster
from panel.quotas.lib import blindness

log = logging.getLogger(__name__)

# Every database but PostgreSQL's two templates and the panel's own (which no tenant can write):
# one a tenant made a template, or closed to connections, still counts (its files are there).
MEASURED = """
datname NOT IN ('template0', 'template1')
AND NOT (datname = %(panel_template)s AND datistemplate AND NOT datallowconn
         AND pg_catalog.pg_get_userbyid(datdba) = %(superuser)s)
"""
DATABASE_SIZES = (
    f"SELECT datname, pg_catalog.pg_database_size(oid) FROM pg_catalog.pg_database WHERE {MEASURED}"
)
# Space: every relation with storage (tables, indexes, TOAST, sequences, materialized views),
# main fork + free space map + visibility map, by owner (TOAST and indexes belong to the table's
# owner). Relations (the "files"): the same without TOAST's own relations.
OWNED = """
SELECT pg_catalog.pg_get_userbyid(c.relowner),
       sum(pg_catalog.pg_relation_size(c.oid) + pg_catalog.pg_relation_size(c.oid, 'fsm')
           + pg_catalog.pg_relation_size(c.oid, 'vm'))::bigint,
       count(*) FILTER (WHERE n.nspname <> 'pg_toast')
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'm', 'i', 'I', 't', 'S')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
GROUP BY 1
"""
WAL_SIZE = "SELECT coalesce(sum(size), 0)::bigint FROM pg_catalog.pg_ls_waldir()"
# The cheap way, when the measuring process can read the data directory (the node agent, root or
# the clusters' own user): the catalogue says which file is whose, the files say how big. One
# query without a size function (which opens and locks every relation): ~1,000 relations cost a
# few milliseconds of the server's time instead of tens.
FILES = """
SELECT pg_catalog.pg_get_userbyid(c.relowner), c.relfilenode, n.nspname <> 'pg_toast'
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'm', 'i', 'I', 't', 'S')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
"""
# A relation's files in base/<database oid>: <filenode>[_fsm|_vm|_init][.<segment>], and
# t<backend>_<filenode>… for temporary relations.
_FILE = re.compile(r"(?:t\d+_)?(\d+)(?:_fsm|_vm|_init)?(?:\.\d+)?")


@dataclass
class Usage:
    """One measurement of a cluster."""

    database_bytes: dict[str, int] = field(default_factory=dict)
    database_relations: dict[str, int] = field(default_factory=dict)
    role_bytes: dict[str, int] = field(default_factory=dict)
    role_relations: dict[str, int] = field(default_factory=dict)
    data_dir_bytes: int = 0
    database_ms: float = 0.0  # time spent in the server's queries, connections not counted
    # Databases whose catalogue could not be read (why, in PostgreSQL's words): what roles own
    # there is unknown, and the quotas that depend on it keep their last figures (fail closed).
    blind: dict[str, str] = field(default_factory=dict)


DATABASES = f"SELECT datname, oid FROM pg_catalog.pg_database WHERE {MEASURED}"
# The monitor role's CONNECT on each database, granted again by the superuser where a tenant's
# REVOKE … FROM PUBLIC took it away; the guard refuses a REVOKE from the monitor role itself.
UNGRANTED = f"""
SELECT datname FROM pg_catalog.pg_database
WHERE {MEASURED} AND NOT pg_catalog.has_database_privilege(%(monitor)s, oid, 'CONNECT')
"""


def measure(cluster: Cluster, databases: list[str] | None = None) -> Usage:
    """Read the sizes of ``cluster``: from its files where this process can read its data
    directory (the node agent can), else from the server's size functions; the catalogues as the
    panel's superuser in the maintenance database and as the monitor role in each of
    ``databases`` (the superuser never enters a tenant's database). By default every database
    the server has, those the tenant made with SQL too: a role's relations there count against
    its quota. A database the monitor role may not enter (its owner revoked CONNECT) counts with
    its size; the monitor role's CONNECT is granted again first, so only what the tenant can
    still do (a connection limit of 0…) leaves one in ``Usage.blind``. Raises
    dbconn.DatabaseError."""
    usage = Usage()
    role_bytes: dict[str, int] = defaultdict(int)
    role_relations: dict[str, int] = defaultdict(int)
    base = cluster.pgdata / "base"
    with dbconn.admin_connection(cluster) as conn:
        started = time.perf_counter()
        params = {
            "panel_template": dbconn.STATEMENTS_TEMPLATE,
            "superuser": settings.PANEL_SUPERUSER,
            "monitor": settings.PANEL_MONITOR_ROLE,
        }
        oids = {name: int(oid) for name, oid in conn.execute(DATABASES, params).fetchall()}
        for (name,) in conn.execute(UNGRANTED, params).fetchall():
            try:
                conn.execute(
                    sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                        sql.Identifier(name), sql.Identifier(settings.PANEL_MONITOR_ROLE)
                    )
                )
            except psycopg.Error as exc:  # a lock a tenant holds on it (lock_timeout): blind there only
                log.warning("quotas: CONNECT on %s in %s not granted again: %s", name, cluster.pk, exc)
        usage.database_ms += (time.perf_counter() - started) * 1000
        files = (
            {name: _file_sizes(str(base / str(oid))) for name, oid in oids.items()}
            if cluster.is_local
            else {}
        )
        if files and all(sizes is not None for sizes in files.values()):
            usage.database_bytes = {
                name: sum(sizes.values()) for name, sizes in files.items() if sizes is not None
            }
            usage.data_dir_bytes = _tree_size(str(cluster.pgdata))
        else:
            files = {}
            started = time.perf_counter()
            sizes = conn.execute(DATABASE_SIZES, params).fetchall()
            wal = conn.execute(WAL_SIZE).fetchone()
            usage.database_ms += (time.perf_counter() - started) * 1000
            usage.database_bytes = {name: int(size) for name, size in sizes}
            usage.data_dir_bytes = sum(usage.database_bytes.values()) + int(wal[0] if wal else 0)
    for name in usage.database_bytes if databases is None else databases:
        if name not in usage.database_bytes:
            continue
        try:
            with dbconn.monitor_connection(cluster, name) as conn:
                started = time.perf_counter()
                if files.get(name) is not None:
                    rows = _owned(conn.execute(FILES).fetchall(), files[name])  # type: ignore[arg-type]
                else:  # the data directory is not readable here: the server's size functions
                    rows = [(owner, int(size or 0), int(count)) for owner, size, count in conn.execute(OWNED)]
                usage.database_ms += (time.perf_counter() - started) * 1000
        except dbconn.DatabaseError as exc:
            log.warning("quotas: %s in %s not measured by owner: %s", name, cluster.pk, exc)
            usage.blind[name] = blindness.reason_code(exc.sqlstate, str(exc))  # the text: the log only
            continue
        usage.database_relations[name] = sum(int(count) for _owner, _size, count in rows)
        for owner, size, count in rows:
            role_bytes[owner] += int(size or 0)
            role_relations[owner] += int(count)
    usage.role_bytes = dict(role_bytes)
    usage.role_relations = dict(role_relations)
    return usage


def _owned(rows: list[tuple[str, int, bool]], sizes: dict[int, int]) -> list[tuple[str, int, int]]:
    """(owner, bytes, relations) from the catalogue's (owner, filenode, counted) and the files."""
    owned: dict[str, list[int]] = {}
    for owner, filenode, counted in rows:
        row = owned.setdefault(owner, [0, 0])
        row[0] += sizes.get(int(filenode), 0) if filenode else 0
        row[1] += 1 if counted else 0
    return [(owner, size, count) for owner, (size, count) in owned.items()]


def _tree_size(top: str) -> int:
    """Bytes of every file under ``top`` (the whole data directory: what the plan's disk holds)."""
    total = 0
    stack = [top]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue
        except (FileNotFoundError, PermissionError):
            continue
    return total


def _file_sizes(directory: str) -> dict[int, int] | None:
    """Bytes per filenode in a database's directory; None when it cannot be read."""
    sizes: dict[int, int] = {}
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                match = _FILE.fullmatch(entry.name)
                if match is None:
                    continue
                try:
                    size = entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:  # dropped meanwhile
                    continue
                node = int(match.group(1))
                sizes[node] = sizes.get(node, 0) + size
    except OSError:
        return None
    return sizes
