"""How pgBackRest logs in to a cluster: as a role of its own (``settings.PANEL_BACKUP_ROLE``) over
the cluster's socket, by peer authentication from the cluster's OS user (pg_hba.conf and
pg_ident.conf, ``panel.clusters.lib.pgconf``). No file holds a password for it, and the panel's
superuser password is never written where the cluster's OS user, or anything the server runs,
could read it: the passfile pgBackRest had is removed wherever it is found."""

from __future__ import annotations

import psycopg
from django.conf import settings
from psycopg import sql

from panel.clusters.face import dbconn, panel_roles
from panel.clusters.models import Cluster

# What pgBackRest calls in the maintenance database (PostgreSQL 15's names), granted to the backup
# role (they are revoked from PUBLIC).
BACKUP_FUNCTIONS = (
    "pg_catalog.pg_backup_start(text, boolean)",
    "pg_catalog.pg_backup_stop(boolean)",
    "pg_catalog.pg_switch_wal()",
    "pg_catalog.pg_create_restore_point(text)",
)
# Reading the server's settings (data_directory, archive_command…) and a fast checkpoint.
BACKUP_MEMBERSHIPS = ("pg_read_all_settings", "pg_checkpoint")


def ensure_backup_role(cluster: Cluster) -> None:
    """The backup role on the cluster's primary, created or repaired."""
    with dbconn.admin_connection(cluster) as conn:
        ensure_role(conn, settings.PANEL_BACKUP_ROLE)


def ensure_role(conn: psycopg.Connection, role: str) -> None:
    """Create or repair pgBackRest's role, as the superuser in the maintenance database: LOGIN with
    no password (it comes in by peer authentication only), the backup functions and
    ``BACKUP_MEMBERSHIPS``, nothing else: no other attribute (REPLICATION neither), no member."""
    ident = sql.Identifier(role)
    attributes = sql.SQL(
        "LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD NULL"
    )
    with conn.transaction():
        # Durable here, not waiting for a synchronous standby: there may be none yet (a cluster
        # taking its standbys on creates this role before they start), and they replay it anyway.
        conn.execute("SET LOCAL synchronous_commit = local")
        # A role of that name the panel did not make (a tenant's, from before the guard reserved
        # the name) is refused, not adopted: rights granted to it would be the tenant's.
        panel_roles.ensure(conn, role, attributes, keep=BACKUP_MEMBERSHIPS)
        for membership in BACKUP_MEMBERSHIPS:
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(membership), ident))
        for function in BACKUP_FUNCTIONS:
            conn.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(sql.SQL(function), ident))
        panel_roles.grant_maintenance_connect(conn, role)
