"""What a cluster's storage is made of right now, read from the server itself: each database's
size, the space and relations each role owns in each database, the data directory's size
(every database plus the WAL), and the database time the readings took."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from panel.clusters import dbconn
from panel.clusters.models import Cluster

DATABASE_SIZES = """
SELECT datname, pg_catalog.pg_database_size(oid)
FROM pg_catalog.pg_database WHERE datallowconn AND NOT datistemplate
"""
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


@dataclass
class Usage:
    """One measurement of a cluster."""

    database_bytes: dict[str, int] = field(default_factory=dict)
    database_relations: dict[str, int] = field(default_factory=dict)
    role_bytes: dict[str, int] = field(default_factory=dict)
    role_relations: dict[str, int] = field(default_factory=dict)
    data_dir_bytes: int = 0
    database_ms: float = 0.0  # time spent in the server's queries, connections not counted


def measure(cluster: Cluster, databases: list[str]) -> Usage:
    """Read the sizes of ``cluster``: the server-wide figures as the panel's superuser in the
    maintenance database, the per-owner ones as the monitor role in each of ``databases`` (the
    superuser never enters a tenant's database). Raises dbconn.DatabaseError."""
    usage = Usage()
    role_bytes: dict[str, int] = defaultdict(int)
    role_relations: dict[str, int] = defaultdict(int)
    with dbconn.admin_connection(cluster) as conn:
        started = time.perf_counter()
        sizes = conn.execute(DATABASE_SIZES).fetchall()
        wal = conn.execute(WAL_SIZE).fetchone()
        usage.database_ms += (time.perf_counter() - started) * 1000
    usage.database_bytes = {name: int(size) for name, size in sizes}
    usage.data_dir_bytes = sum(usage.database_bytes.values()) + int(wal[0] if wal else 0)
    for name in databases:
        if name not in usage.database_bytes:
            continue
        with dbconn.monitor_connection(cluster, name) as conn:
            started = time.perf_counter()
            rows = conn.execute(OWNED).fetchall()
            usage.database_ms += (time.perf_counter() - started) * 1000
        usage.database_relations[name] = sum(int(count) for _owner, _size, count in rows)
        for owner, size, count in rows:
            role_bytes[owner] += int(size or 0)
            role_relations[owner] += int(count)
    usage.role_bytes = dict(role_bytes)
    usage.role_relations = dict(role_relations)
    return usage
