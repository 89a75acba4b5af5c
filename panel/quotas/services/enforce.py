"""Writes stopped for real: the guard's lists in the cluster's ``quota.conf`` (a file only the
panel writes; ``PGC_SIGHUP`` settings no session can change), a reload, and the sessions that
were in a write transaction in what was just stopped ended (PgBouncer opens new ones)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings

from panel.clusters.face import dbconn, isolation
from panel.clusters.face import services as cluster_services
from panel.clusters.lib.pgconf import QUOTA_FILE, render_quota_conf
from panel.clusters.models import Cluster
from panel.core import runas

log = logging.getLogger(__name__)

INCLUDE = f"include_if_exists = '{QUOTA_FILE}'"
END_WRITERS = """
SELECT pg_catalog.pg_terminate_backend(a.pid)
FROM pg_catalog.pg_stat_activity a
WHERE a.pid <> pg_catalog.pg_backend_pid() AND a.backend_xid IS NOT NULL
  AND a.usename <> %(superuser)s
  AND (a.datname = ANY(%(databases)s) OR a.usename = ANY(%(roles)s))
"""


def write_and_reload(cluster: Cluster, databases: Sequence[str], owners: Sequence[str]) -> bool:
    """Make the server stop writes in ``databases`` and on ``owners``' relations (and only
    there); True when something changed. Raises EngineError, dbconn.DatabaseError, OSError."""
    text = render_quota_conf(databases, owners)
    path = cluster.pgdata / QUOTA_FILE
    try:
        if path.read_text() == text and INCLUDE in (cluster.pgdata / "panel.conf").read_text():
            return False
    except FileNotFoundError:
        pass
    if INCLUDE not in (cluster.pgdata / "panel.conf").read_text():
        # A cluster made before quotas: its panel.conf gets the include (same settings otherwise).
        cluster_services.write_server_config(cluster)
    runas.write_private_file(path, text, owner=isolation.os_user(cluster))
    isolation.reload_server_config(cluster)
    return True


def end_writers(cluster: Cluster, databases: Sequence[str], roles: Sequence[str]) -> int:
    """End the sessions holding a write transaction in ``databases`` or as ``roles``: their
    transaction could otherwise go on writing past the stop. Returns how many."""
    if not databases and not roles:
        return 0
    with dbconn.admin_connection(cluster) as conn:
        rows = conn.execute(
            END_WRITERS,
            {"superuser": settings.PANEL_SUPERUSER, "databases": list(databases), "roles": list(roles)},
        ).fetchall()
    return sum(1 for (ended,) in rows if ended)


def applied_lists(cluster: Cluster) -> tuple[str, str]:
    """What the server's new sessions see (SHOW), for the tests and the report."""
    with dbconn.admin_connection(cluster) as conn:
        databases = conn.execute("SHOW pgpanel_guard.readonly_databases").fetchone()
        owners = conn.execute("SHOW pgpanel_guard.readonly_owners").fetchone()
    return (databases[0] if databases else "", owners[0] if owners else "")
