"""Provisioning a local cluster, as one pipeline that reads top to bottom:

    claim → prepare → build the guard → initdb → certificates → configure → start
          → roles and default database → record

``provision_cluster`` (the worker's task) claims a cluster in ``creating`` and runs ``STEPS`` in
order; each step is a function of this module that does one thing and reports its progress
first. A step that fails ends the pipeline: the server is stopped, the cluster marked ``error``
with the step's reason and an event, and ``create.retry_cluster`` queues it again from the top
(``prepare`` clears what a failed attempt left).

The server's own configuration (``write_server_config``) is also what start and restart write
again, and ``clear_reserved`` what the reconciler runs on clusters older than the guard.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import psutil
import psycopg
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from psycopg import sql

from panel import crypto
from panel.clusters import hooks
from panel.clusters.engine import dbconn, guard, isolation, panel_roles, pgdata_template, postgres
from panel.clusters.lib import tls, tunables
from panel.clusters.lib.pgconf import ServerSettings, loads_guard, render_temp_file_limit, temp_file_limit_kb
from panel.clusters.lib.plans import SUPERUSER_RESERVED_CONNECTIONS
from panel.clusters.models import Cluster, ClusterStatus, Database, DatabaseUser, EventLevel
from panel.clusters.replicas.services import streaming
from panel.clusters.services import failures, transitions
from panel.clusters.services.create import new_password
from panel.clusters.standbys.services import ha, remote_members
from panel.core import runas
from panel.core.errors import N_, Message, ServiceError, message_to_text
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

INCLUDE_LINE = "include_if_exists = 'panel.conf'"
# The owner's configuration (lib/tunables), included at the end of panel.conf.
SETTINGS_FILE = "settings.conf"


@dataclass
class Provisioning:
    """What the steps hand on to each other."""

    cluster: Cluster
    # Set by the first step (ensure_cluster_user); "" until then, as it always was.
    user: runas.OsUser = cast(runas.OsUser, "")
    superuser_password: str = ""
    admin_password: str = ""

    @property
    def timeout(self) -> float:
        return settings.PANEL_COMMAND_TIMEOUT


def provision_cluster(cluster_id: uuid.UUID | str) -> Cluster:
    """Run the pipeline on a cluster waiting in ``creating``; on failure mark it ``error``."""
    claimed = Cluster.objects.filter(pk=cluster_id, status=ClusterStatus.CREATING, progress=0).update(
        progress=1, progress_message=_("Starting"), updated_at=timezone.now()
    )
    cluster = Cluster.objects.get(pk=cluster_id)
    if not claimed:
        return cluster  # another worker has it, or it is not waiting to be created
    job = Provisioning(cluster)
    at = ""
    try:
        for percent, label, step in STEPS:
            if label:
                at = label
                transitions.set_progress(cluster, percent, label)  # the msgid: the page translates it
            step(job)
    except Exception as exc:
        fail(cluster, exc, at)
    return cluster


def prepare(job: Provisioning) -> None:
    """A clean slate (what a failed attempt left is removed) and the cluster's own system user,
    which runs its processes and owns its files."""
    cluster = job.cluster
    assert cluster.plan is not None
    job.superuser_password = new_password()
    cluster.superuser_password_encrypted = crypto.encrypt(job.superuser_password)
    cluster.save(update_fields=["superuser_password_encrypted"])
    if cluster.is_ha:
        ha.stop_members(cluster)
    postgres.kill(cluster.pgdata)
    postgres.remove_data(cluster.data_root)
    job.user = isolation.ensure_cluster_user(cluster)


def prepare_copy(cluster: Cluster, source: Cluster) -> runas.OsUser:
    """``prepare`` for a cluster made from ``source``'s data (a read-only replica, a restore): the
    panel's roles arrive with that data, so their passwords are the source's until changed; a
    clean slate; the cluster's own system user."""
    cluster.superuser_password_encrypted = source.superuser_password_encrypted
    cluster.monitor_password_encrypted = source.monitor_password_encrypted
    cluster.save(update_fields=["superuser_password_encrypted", "monitor_password_encrypted", "updated_at"])
    postgres.kill(cluster.pgdata)
    postgres.remove_data(cluster.data_root)
    return isolation.ensure_cluster_user(cluster)


def build_guard(job: Provisioning) -> None:
    """First of the real work, so that missing build tools fail the creation before the rest."""
    guard.ensure_built(job.cluster.version)


def init_data_directory(job: Provisioning) -> None:
    cluster = job.cluster
    pgdata_template.initdb(
        cluster.version,
        cluster.pgdata,
        settings.PANEL_SUPERUSER,
        job.superuser_password,
        user=job.user,
        timeout=job.timeout,
    )


def write_certificates(job: Provisioning) -> None:
    cluster = job.cluster
    # Every node holding a member has an entry of the cluster (entry_points): a client checking
    # the name (verify-full) may reach it at any of their addresses.
    entries = [
        a for m in cluster.members.select_related("node") for a in (m.node.address, m.node.private_address)
    ]
    hosts = list(
        dict.fromkeys(
            [
                cluster.public_host,
                settings.PANEL_PUBLIC_HOST,
                *filter(None, entries),
                "localhost",
                "127.0.0.1",
                "::1",
            ]
        )
    )
    certs = tls.generate(cluster.name, hosts)
    runas.write_private_file(cluster.pgdata / "server.crt", certs.server_cert_pem, owner=job.user)
    runas.write_private_file(cluster.pgdata / "server.key", certs.server_key_pem, owner=job.user)
    runas.write_private_file(cluster.pgdata / "ca.crt", certs.ca_cert_pem, owner=job.user)
    cluster.ca_certificate = certs.ca_cert_pem
    cluster.save(update_fields=["ca_certificate"])


def configure(job: Provisioning) -> None:
    write_server_config(job.cluster)


def start_server(job: Provisioning) -> None:
    cluster = job.cluster
    runas.make_private_dir(cluster.socket_dir, job.user)
    if cluster.is_ha:
        # Patroni takes the data directory over as the primary, then copies the standbys from it.
        ha.start_members(cluster, job.user, job.timeout)
        return
    isolation.start_server(cluster, job.user, job.timeout)


def wait_for_standbys(job: Provisioning) -> None:
    """A cluster with standbys is online once every standby streams from the primary."""
    cluster = job.cluster
    if cluster.is_ha and not ha.wait_healthy(cluster, job.timeout):
        raise EngineError(f"The standbys did not catch up with the primary within {job.timeout:.0f} s.")


def create_roles(job: Provisioning) -> None:
    """The tenant's admin user and default database; the monitor role the collector logs in as.
    Only the panel's superuser maintains the system database (and the monitor reads there)."""
    cluster = job.cluster
    job.admin_password = new_password()
    monitor_password = new_password()
    cluster.monitor_password_encrypted = crypto.encrypt(monitor_password)
    cluster.save(update_fields=["monitor_password_encrypted"])
    make_statements_template(cluster)  # before any tenant role exists
    with dbconn.admin_connection(cluster) as conn:
        dbconn.create_role(conn, cluster.admin_user, job.admin_password, admin=True)
        dbconn.create_database(conn, cluster.default_database, cluster.admin_user)
        conn.execute("REVOKE CONNECT ON DATABASE postgres FROM PUBLIC")
        panel_roles.ensure_monitor_role(conn, settings.PANEL_MONITOR_ROLE, monitor_password)
        dbconn.ensure_statements_extension(conn)  # the Queries tab reads it (panel/insights)


def make_statements_template(cluster: Cluster) -> bool:
    """The panel's template database with pg_stat_statements (``dbconn.STATEMENTS_TEMPLATE``),
    closed to every connection once made; the databases the panel creates are copies of it.
    False when a database of that name exists already (then it is only used if it is the
    panel's: ``dbconn.statements_template``).

    Provisioning makes it before any tenant role exists. On a cluster from before, a tenant may
    connect in the instant before CONNECT is revoked, but can create nothing in it (no CREATE on
    the database; its public schema is the superuser's), only temporary objects of its own
    session, which is ended before the database is used."""
    template = sql.Identifier(dbconn.STATEMENTS_TEMPLATE)
    with dbconn.admin_connection(cluster) as conn:
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(template))
        except psycopg.errors.DuplicateDatabase:
            return False
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(template))
    with dbconn.statements_template_connection(cluster) as conn:
        dbconn.ensure_statements_extension(conn)
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(template)
        )
        conn.execute(
            "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_catalog.pg_backend_pid()",
            [dbconn.STATEMENTS_TEMPLATE],
        )
    return True


def ensure_statements(cluster: Cluster) -> list[str]:
    """What a cluster from before pg_stat_statements lacks (the extension in the maintenance
    database, the panel's template database), made; returns what was made."""
    made = []
    with dbconn.admin_connection(cluster) as conn:
        if dbconn.ensure_statements_extension(conn):
            made.append(dbconn.STATEMENTS_EXTENSION)
    if cluster.is_local and make_statements_template(cluster):
        made.append(dbconn.STATEMENTS_TEMPLATE)
    return made


def record(job: Provisioning) -> None:
    """The panel's rows for what ``create_roles`` made, then online."""
    cluster = job.cluster
    admin = DatabaseUser(cluster=cluster, name=cluster.admin_user, is_protected=True)
    admin.password = job.admin_password
    with transaction.atomic():
        admin.save()
        Database.objects.create(
            cluster=cluster, name=cluster.default_database, owner_name=cluster.admin_user, is_protected=True
        )
    isolation.refresh_server_auth(cluster)  # PgBouncer may log in as the admin user
    try:  # members on other nodes read the same lines (they started before the admin user's row)
        remote_members.push_auth(cluster)
    except EngineError as exc:  # that node's reconciler writes them from the rows (ha_roles)
        log.warning("pg_ident.conf of %s not pushed to its other nodes: %s", cluster.pk, exc)
    transitions.mark_online(cluster)
    transitions.log_event(
        cluster, "online", Message(N_("Cluster is online on port %(port)s."), port=cluster.port)
    )
    hooks.after_provision(cluster)


# (progress in %, what the page shows while the step runs, the step); no label: progress unchanged.
# The labels are msgids: a failure names its step in the reader's language (failures.provisioning).
STEPS: tuple[tuple[int, str, Callable[[Provisioning], None]], ...] = (
    (1, "", prepare),
    (5, N_("Building the privilege guard"), build_guard),
    (10, N_("Initialising the data directory (initdb)"), init_data_directory),
    (40, N_("Generating TLS certificates"), write_certificates),
    (50, N_("Writing the configuration"), configure),
    (60, N_("Starting PostgreSQL"), start_server),
    (80, N_("Creating the admin user and the default database"), create_roles),
    (90, N_("Waiting for the standbys"), wait_for_standbys),
    (100, "", record),
)


def fail(cluster: Cluster, exc: Exception, step: str = "") -> None:
    """End a failed pipeline: nothing left running, a coded sentence on the page and in the
    events (which step, what to do), the program's or server's own words in the log only.
    Anything but an expected failure is a bug, logged with its traceback."""
    if not isinstance(exc, EngineError | dbconn.DatabaseError | OSError | ServiceError):
        log.exception("provisioning %s crashed", cluster.pk)
    failed = failures.provisioning(cluster.pk, cluster.version, step, exc)
    if cluster.is_ha:
        ha.stop_members(cluster)
    postgres.kill(cluster.pgdata)
    transitions.mark_error(cluster, message_to_text(failed))
    transitions.log_event(cluster, "error", failed, EventLevel.ERROR)


# --- the server's configuration ------------------------------------------------------------


def guard_configured(cluster: Cluster) -> bool:
    """Whether the cluster's panel.conf loads the privilege guard as this panel renders it."""
    try:
        text = (cluster.pgdata / "panel.conf").read_text()
    except OSError:
        return False
    return loads_guard(text, (str(guard.library_path(cluster.version)),), guard.reserved_roles())


def owner_settings(cluster: Cluster) -> str:
    """settings.conf: the owner's configuration, then what the plan bounds whatever it says
    (temporary files: a tenth of the plan's disk per session, or the owner's value if lower)."""
    owner_temp = tunables.effective(cluster.config).get("temp_file_limit", -1)
    disk = cluster.plan.disk_bytes if cluster.plan is not None else 0
    limit = temp_file_limit_kb(disk, owner_temp if isinstance(owner_temp, int) else -1)
    return tunables.render(cluster.config) + render_temp_file_limit(limit)


def write_server_config(cluster: Cluster) -> bool:
    """Write panel.conf (with the privilege guard, built first if needed, and the plan's limits),
    settings.conf (the owner's configuration, which panel.conf includes) and pg_hba.conf.

    Returns True when panel.conf did not load the guard before: a new cluster, or one created
    before the guard existed, whose roles the caller then clears (``clear_reserved``).
    pg_hba.conf and pg_ident.conf are written too; every file belongs to the cluster's user."""
    user = isolation.os_user(cluster)
    plan = cluster.plan
    assert plan is not None
    library = guard.ensure_built(cluster.version)
    had_guard = guard_configured(cluster)
    conf = ServerSettings(
        port=int(cluster.port or 0),
        listen_addresses=settings.PANEL_LISTEN_ADDRESSES,
        socket_dir=str(cluster.socket_dir),
        max_connections=plan.max_connections,
        superuser_reserved_connections=SUPERUSER_RESERVED_CONNECTIONS,
        shared_buffers_bytes=plan.shared_buffers_bytes(psutil.virtual_memory().total),
        log_dir=str(cluster.log_file.parent),
        preload_libraries=(str(library),),
        reserved_roles=guard.reserved_roles(),
        # The apps' files (archiving, panel.backups) after the owner's: theirs win.
        includes=(SETTINGS_FILE, *streaming.standby_files(cluster), *hooks.server_config(cluster)),
        max_slot_wal_keep_mb=plan.disk_bytes // 10 // 1024**2,
    )
    runas.make_private_dir(cluster.log_file.parent, user)
    runas.write_private_file(cluster.pgdata / SETTINGS_FILE, owner_settings(cluster), owner=user)
    runas.write_private_file(cluster.pgdata / "panel.conf", conf.render(), owner=user)
    isolation.write_auth_config(cluster, user)
    main_conf = cluster.pgdata / "postgresql.conf"
    text = main_conf.read_text()
    if INCLUDE_LINE not in text:
        runas.write_private_file(main_conf, text.rstrip("\n") + "\n\n" + INCLUDE_LINE + "\n", owner=user)
    return not had_guard


def clear_reserved(cluster: Cluster) -> list[str]:
    """Take away from a running cluster's roles what the guard now refuses to give: membership
    in the reserved roles, and SUPERUSER/REPLICATION/BYPASSRLS on any role but the panel's own
    superuser (granted before the guard was loaded). Each change is a cluster event."""
    notes: list[str] = []
    with dbconn.admin_connection(cluster) as conn:
        for role in dbconn.demote_privileged_roles(
            conn, keep=settings.PANEL_SUPERUSER, replication=settings.PANEL_REPLICATION_ROLE
        ):
            transitions.log_event(
                cluster,
                "guard-demoted",
                Message(
                    N_(
                        "Role “%(role)s” lost SUPERUSER, REPLICATION and BYPASSRLS: only the panel's own "
                        "superuser may hold them."
                    ),
                    role=role,
                ),
                EventLevel.WARNING,
            )
            notes.append(f"demoted {role}")
        for role, member in dbconn.revoke_memberships(conn, guard.reserved_roles()):
            transitions.log_event(
                cluster,
                "guard-revoked",
                Message(
                    N_(
                        "Membership of “%(member)s” in the reserved role “%(role)s” was revoked: only the "
                        "panel's own superuser may grant it."
                    ),
                    member=member,
                    role=role,
                ),
                EventLevel.WARNING,
            )
            notes.append(f"revoked {role} from {member}")
    return notes
