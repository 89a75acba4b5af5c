"""One function per user action on clusters, called by views, commands and tasks alike.

Attaching an existing server lives in ``attach``, the reconciler in ``reconciler``.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import socket
import uuid
from dataclasses import dataclass

import psutil
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel import crypto
from panel.clusters import dbconn, hooks, isolation
from panel.clusters.engine import guard, postgres
from panel.clusters.lib import tls
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.lib.names import InvalidName, validate_cluster_name
from panel.clusters.lib.pgconf import ServerSettings, loads_guard
from panel.clusters.lib.plans import SUPERUSER_RESERVED_CONNECTIONS, get_plan
from panel.clusters.models import (
    Cluster,
    ClusterKind,
    ClusterStatus,
    Database,
    DatabaseUser,
    EventLevel,
)
from panel.core import runas
from panel.core.errors import ServiceError
from panel.core.runas import EngineError
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)

INCLUDE_LINE = "include_if_exists = 'panel.conf'"


def new_password() -> str:
    return secrets.token_urlsafe(18)


def default_cluster_name() -> str:
    return f"db-postgresql-local-{secrets.randbelow(90000) + 10000}"


def available_versions() -> list[str]:
    return list(postgres.installed_versions())


# --- ports -------------------------------------------------------------------------------


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def allocate_ports() -> tuple[int, int]:
    """The lowest free (server, pooler) pair of the configured range."""
    first, last = settings.PANEL_PORT_RANGE
    taken: set[int] = set()
    for port, pooler in Cluster.objects.filter(kind=ClusterKind.LOCAL).values_list("port", "pooler_port"):
        taken.update(p for p in (port, pooler) if p)
    for port in range(first, last, 2):
        pooler = port + 1
        if port in taken or pooler in taken:
            continue
        if _port_free(port) and _port_free(pooler):
            return port, pooler
    raise ServiceError(
        _(
            "No free ports are left in the range %(first)s–%(last)s; delete a cluster or widen PANEL_PORT_RANGE."
        )
        % {"first": first, "last": last}
    )


# --- create, provision --------------------------------------------------------------------


def create_cluster(
    owner: AbstractBaseUser, *, name: str, plan_slug: str, version: str | None = None, enqueue: bool = True
) -> Cluster:
    """Record a new local cluster and queue its provisioning (or leave it for the caller)."""
    try:
        validate_cluster_name(name)
    except InvalidName as exc:
        raise ServiceError(str(exc), field="name") from None
    try:
        get_plan(plan_slug)
    except ValueError as exc:
        raise ServiceError(str(exc), field="plan") from None
    versions = available_versions()
    if not versions:
        raise ServiceError(postgres.MISSING_BINARIES, field="version")
    version = version or versions[0]
    if version not in versions:
        raise ServiceError(
            _("PostgreSQL %(v)s is not installed here; choose one of %(all)s.")
            % {"v": version, "all": ", ".join(versions)},
            field="version",
        )
    if Cluster.objects.filter(owner=owner, name=name).exists():
        raise ServiceError(_("You already have a cluster named “%(name)s”.") % {"name": name}, field="name")
    for _attempt in range(5):
        port, pooler_port = allocate_ports()
        try:
            with transaction.atomic():
                cluster = Cluster.objects.create(
                    owner=owner,
                    name=name,
                    kind=ClusterKind.LOCAL,
                    version=version,
                    plan_slug=plan_slug,
                    status=ClusterStatus.CREATING,
                    progress=0,
                    progress_message=_("Queued"),
                    host="127.0.0.1",
                    port=port,
                    pooler_port=pooler_port,
                )
            break
        except IntegrityError:
            if Cluster.objects.filter(owner=owner, name=name).exists():
                raise ServiceError(
                    _("You already have a cluster named “%(name)s”.") % {"name": name}, field="name"
                ) from None
            continue  # another request took the same ports: allocate again
    else:
        raise ServiceError(_("Could not allocate ports for the cluster; try again."))
    cluster.log_event(
        "created",
        _("Cluster requested: plan %(plan)s, PostgreSQL %(v)s, port %(port)s.")
        % {"plan": plan_slug, "v": version, "port": port},
    )
    if enqueue:
        try:
            enqueue_task("panel.clusters.tasks.provision", str(cluster.pk))
        except ServiceError:
            cluster.delete()
            raise
    return cluster


def provision_cluster(cluster_id: uuid.UUID | str) -> Cluster:
    """Do the provisioning of a cluster in state ``creating``; on failure mark it ``error``."""
    claimed = Cluster.objects.filter(pk=cluster_id, status=ClusterStatus.CREATING, progress=0).update(
        progress=1, progress_message=_("Starting"), updated_at=timezone.now()
    )
    cluster = Cluster.objects.get(pk=cluster_id)
    if not claimed:
        return cluster  # another worker has it, or it is not waiting to be created
    timeout = settings.PANEL_COMMAND_TIMEOUT
    try:
        plan = cluster.plan
        assert plan is not None
        superuser_password = new_password()
        cluster.superuser_password_encrypted = crypto.encrypt(superuser_password)
        cluster.save(update_fields=["superuser_password_encrypted"])
        postgres.kill(cluster.pgdata)
        postgres.remove_data(cluster.data_root)
        # Its processes run as a system user of its own, which owns its files (root only).
        user = isolation.ensure_cluster_user(cluster)

        # First, so that missing build tools fail the creation before anything else is done.
        cluster.set_progress(5, _("Building the privilege guard"))
        guard.ensure_built(cluster.version)

        cluster.set_progress(10, _("Initialising the data directory (initdb)"))
        postgres.initdb(
            cluster.version,
            cluster.pgdata,
            settings.PANEL_SUPERUSER,
            superuser_password,
            user=user,
            timeout=timeout,
        )

        cluster.set_progress(40, _("Generating TLS certificates"))
        hosts = [settings.PANEL_PUBLIC_HOST, "localhost", "127.0.0.1", "::1"]
        certs = tls.generate(cluster.name, hosts)
        runas.write_private_file(cluster.pgdata / "server.crt", certs.server_cert_pem, owner=user)
        runas.write_private_file(cluster.pgdata / "server.key", certs.server_key_pem, owner=user)
        runas.write_private_file(cluster.pgdata / "ca.crt", certs.ca_cert_pem, owner=user)
        cluster.ca_certificate = certs.ca_cert_pem
        cluster.save(update_fields=["ca_certificate"])

        cluster.set_progress(50, _("Writing the configuration"))
        write_server_config(cluster)

        cluster.set_progress(60, _("Starting PostgreSQL"))
        runas.make_private_dir(cluster.socket_dir, user)
        postgres.start(cluster.version, cluster.pgdata, cluster.log_file, user=user, timeout=timeout)

        cluster.set_progress(80, _("Creating the admin user and the default database"))
        admin_password = new_password()
        monitor_password = new_password()
        cluster.monitor_password_encrypted = crypto.encrypt(monitor_password)
        cluster.save(update_fields=["monitor_password_encrypted"])
        with dbconn.admin_connection(cluster) as conn:
            dbconn.create_role(conn, cluster.admin_user, admin_password, admin=True)
            dbconn.create_database(conn, cluster.default_database, cluster.admin_user)
            # Only the panel's superuser maintains the system database (and the monitor reads there).
            conn.execute("REVOKE CONNECT ON DATABASE postgres FROM PUBLIC")
            dbconn.ensure_monitor_role(conn, settings.PANEL_MONITOR_ROLE, monitor_password)
        admin = DatabaseUser(cluster=cluster, name=cluster.admin_user, is_protected=True)
        admin.password = admin_password
        with transaction.atomic():
            admin.save()
            Database.objects.create(
                cluster=cluster,
                name=cluster.default_database,
                owner_name=cluster.admin_user,
                is_protected=True,
            )
        isolation.refresh_server_auth(cluster)  # PgBouncer may log in as the admin user
        cluster.mark_online()
        cluster.log_event("online", _("Cluster is online on port %(port)s.") % {"port": cluster.port})
    except Exception as exc:
        # Expected failures (a program's or PostgreSQL's own words) are shown as they are;
        # anything else is a bug, logged with its traceback, and still ends in a visible error.
        expected = isinstance(exc, EngineError | dbconn.DatabaseError | OSError)
        reason = str(exc) or type(exc).__name__
        if not expected:
            log.exception("provisioning %s crashed", cluster.pk)
            reason = _("Internal error while provisioning (%(type)s): %(reason)s") % {
                "type": type(exc).__name__,
                "reason": reason,
            }
        log.warning("provisioning %s failed: %s", cluster.pk, reason)
        postgres.kill(cluster.pgdata)
        cluster.mark_error(reason)
        cluster.log_event(
            "error", _("Provisioning failed: %(reason)s") % {"reason": reason}, EventLevel.ERROR
        )
    return cluster


def guard_configured(cluster: Cluster) -> bool:
    """Whether the cluster's panel.conf loads the privilege guard as this panel renders it."""
    try:
        text = (cluster.pgdata / "panel.conf").read_text()
    except OSError:
        return False
    return loads_guard(text, (str(guard.library_path(cluster.version)),), guard.reserved_roles())


def write_server_config(cluster: Cluster) -> bool:
    """Write panel.conf (with the privilege guard, built first if needed) and pg_hba.conf.

    Returns True when panel.conf did not load the guard before: a new cluster, or one created
    before the guard existed, whose roles the caller then clears (``clear_reserved``).
    pg_hba.conf and pg_ident.conf are written too; every file belongs to the cluster's user."""
    user = cluster.os_user()
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
    )
    runas.make_private_dir(cluster.log_file.parent, user)
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
        for role in dbconn.demote_privileged_roles(conn, keep=settings.PANEL_SUPERUSER):
            cluster.log_event(
                "guard-demoted",
                _(
                    "Role “%(role)s” lost SUPERUSER, REPLICATION and BYPASSRLS: only the panel's own "
                    "superuser may hold them."
                )
                % {"role": role},
                EventLevel.WARNING,
            )
            notes.append(f"demoted {role}")
        for role, member in dbconn.revoke_memberships(conn, guard.reserved_roles()):
            cluster.log_event(
                "guard-revoked",
                _(
                    "Membership of “%(member)s” in the reserved role “%(role)s” was revoked: only the "
                    "panel's own superuser may grant it."
                )
                % {"member": member, "role": role},
                EventLevel.WARNING,
            )
            notes.append(f"revoked {role} from {member}")
    return notes


def retry_cluster(cluster: Cluster, *, enqueue: bool = True) -> Cluster:
    """Provision again a cluster whose creation failed."""
    if cluster.status != ClusterStatus.ERROR or not cluster.is_local or cluster.online_since is not None:
        raise ServiceError(_("Only a cluster whose creation failed can be retried."))
    previous = {"error_message": cluster.error_message, "progress": cluster.progress}
    # QuerySet.update() skips auto_now: without updated_at the reconciler would take the job,
    # queued a moment ago, for one stuck since the row last changed.
    updated = Cluster.objects.filter(pk=cluster.pk, status=ClusterStatus.ERROR).update(
        status=ClusterStatus.CREATING,
        progress=0,
        progress_message=_("Queued"),
        error_message="",
        updated_at=timezone.now(),
    )
    if not updated:
        raise ServiceError(_("The cluster changed meanwhile; reload the page."))
    if enqueue:
        try:
            enqueue_task("panel.clusters.tasks.provision", str(cluster.pk))
        except ServiceError:
            # Nothing was retried: keep showing why the creation failed.
            Cluster.objects.filter(pk=cluster.pk).update(
                status=ClusterStatus.ERROR, progress_message="", updated_at=timezone.now(), **previous
            )
            cluster.refresh_from_db()
            raise
    cluster.refresh_from_db()
    cluster.log_event("retry", _("Provisioning retried."))
    return cluster


# --- start, stop, restart, delete ---------------------------------------------------------

ACTIONS = ("start", "stop", "restart")


def _require_local(cluster: Cluster) -> None:
    if not cluster.is_local:
        raise ServiceError(_("The panel does not run this attached server; manage it where it runs."))


def request_action(cluster: Cluster, action: str) -> Cluster:
    """Mark the cluster busy and queue ``action`` for a worker (the web's way)."""
    _require_local(cluster)
    if action not in ACTIONS:
        raise ServiceError(_("Unknown action %(a)s.") % {"a": action})
    allowed = {
        "start": {ClusterStatus.STOPPED, ClusterStatus.DEGRADED},
        "stop": {ClusterStatus.ONLINE, ClusterStatus.DEGRADED},
        "restart": {ClusterStatus.ONLINE, ClusterStatus.DEGRADED},
    }[action]
    busy = ClusterStatus.STOPPING if action == "stop" else ClusterStatus.STARTING
    previous = cluster.status
    if not Cluster.objects.filter(pk=cluster.pk, status__in=allowed).update(
        status=busy, updated_at=timezone.now()
    ):
        raise ServiceError(
            _("The cluster is %(status)s; it cannot %(action)s now.")
            % {"status": cluster.get_status_display().lower(), "action": action}
        )
    try:
        enqueue_task("panel.clusters.tasks.cluster_action", str(cluster.pk), action)
    except ServiceError:
        Cluster.objects.filter(pk=cluster.pk).update(status=previous, updated_at=timezone.now())
        raise
    cluster.refresh_from_db()
    return cluster


def perform_action(cluster: Cluster, action: str) -> Cluster:
    """Start, stop or restart in the foreground (tasks and the command line)."""
    _require_local(cluster)
    timeout = settings.PANEL_COMMAND_TIMEOUT
    guard_added = False
    try:
        user = cluster.os_user()
        if action in {"start", "restart"}:
            # Before stopping: a guard that cannot be built leaves a running cluster running.
            guard_added = write_server_config(cluster)
        if action in {"stop", "restart"}:
            cluster.mark(ClusterStatus.STOPPING)
            if action == "stop":
                # On restart PgBouncer stays up: its clients reconnect once the server is back.
                hooks.pooler.stop_pgbouncer(cluster)
            postgres.stop(cluster.version, cluster.pgdata, user=user, timeout=timeout)
            cluster.mark(ClusterStatus.STOPPED)
            if action == "stop":
                cluster.log_event("stopped", _("Cluster stopped."))
        if action in {"start", "restart"}:
            cluster.mark(ClusterStatus.STARTING)
            runas.make_private_dir(cluster.socket_dir, user)
            postgres.start(cluster.version, cluster.pgdata, cluster.log_file, user=user, timeout=timeout)
            if guard_added:
                clear_reserved(cluster)
                cluster.log_event("guard-installed", _("The privilege guard is now loaded."))
            cluster.mark_online()
            hooks.pooler.refresh_auth(cluster)  # starts PgBouncer again if the cluster has pools
            cluster.log_event(
                "restarted" if action == "restart" else "started",
                _("Cluster restarted.") if action == "restart" else _("Cluster started."),
            )
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        running = postgres.postmaster_pid(cluster.pgdata) is not None
        cluster.status = ClusterStatus.DEGRADED if running else ClusterStatus.STOPPED
        cluster.error_message = str(exc)
        cluster.save(update_fields=["status", "error_message", "updated_at"])
        cluster.log_event(
            "error",
            _("Could not %(action)s: %(reason)s") % {"action": action, "reason": exc},
            EventLevel.ERROR,
        )
        raise ServiceError(str(exc)) from None
    return cluster


def delete_cluster(cluster: Cluster, *, confirm_name: str) -> None:
    """Stop the server, remove its files and forget it. The typed name must match."""
    if confirm_name != cluster.name:
        raise ServiceError(
            _("Type the cluster name “%(name)s” to confirm.") % {"name": cluster.name}, field="confirm_name"
        )
    if cluster.is_local:
        Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.STOPPING, updated_at=timezone.now())
        hooks.pooler.stop_pgbouncer(cluster)
        try:
            postgres.stop(
                cluster.version, cluster.pgdata, user=cluster.os_user(), timeout=30, mode="immediate"
            )
        except EngineError:
            postgres.kill(cluster.pgdata)
        postgres.kill(cluster.pgdata)
        isolation.kill_leftover_processes(cluster)
        postgres.remove_data(cluster.data_root)
        try:
            isolation.remove_cluster_user(cluster)
        except EngineError as exc:
            # The cluster is gone; a leftover system user owns nothing and runs nothing.
            log.warning("deleting cluster %s: %s", cluster.pk, exc)
    cluster.delete()


# --- what the cluster page shows -------------------------------------------------------------


@dataclass(frozen=True)
class Overview:
    """Live figures for the overview tab; None where unknown (stopped, unreachable)."""

    data_size_bytes: int | None
    started_at: dt.datetime | None


def overview(cluster: Cluster) -> Overview:
    """The overview's size and start time. While the Insights collector's last collection (every
    15 s) is recent they come from it, so a page load neither walks PGDATA nor connects to an
    attached server that may not answer; they are measured here only when there is none (a
    cluster just created, the collector not running)."""
    last = hooks.metrics.latest(cluster)
    if cluster.is_local:
        started = postgres.started_at(cluster.pgdata)
        if not last.stale:
            size = last.get("disk_used_bytes")
        # While a job rewrites PGDATA, walking its thousands of files costs more than a figure
        # that is stale a moment later; the page fetches its tab again when the job ends.
        elif not cluster.is_busy and cluster.pgdata.exists():
            size = postgres.directory_size(cluster.pgdata)
        else:
            size = None
        return Overview(
            None if size is None else int(size),
            dt.datetime.fromtimestamp(started, dt.UTC) if started else None,
        )
    if not last.stale:
        sizes = [value for (metric, _labels), value in last.values.items() if metric == "db_size_bytes"]
        return Overview(int(sum(sizes)) if sizes else None, hooks.metrics.server_started_at(cluster))
    try:
        with dbconn.monitor_connection(cluster) as conn:
            # pg_database_size() raises for a database the role may not connect to, which
            # would lose the whole figure: count the ones it can see.
            row = conn.execute(
                "SELECT pg_catalog.sum(pg_catalog.pg_database_size(oid))::bigint, "
                "pg_catalog.pg_postmaster_start_time() FROM pg_catalog.pg_database "
                "WHERE pg_catalog.has_database_privilege(oid, 'CONNECT')"
            ).fetchone()
    except (dbconn.DatabaseError, DatabaseUser.DoesNotExist):
        return Overview(None, None)
    return Overview(int(row[0]) if row and row[0] is not None else None, row[1] if row else None)


def connection_details(
    cluster: Cluster, *, user: str | None = None, database: str | None = None
) -> ConnectionDetails:
    """The details a client uses; unknown user or database names are a ServiceError."""
    user_name = user or cluster.admin_user
    db_name = database or cluster.default_database
    try:
        db_user = cluster.users.get(name=user_name)
    except DatabaseUser.DoesNotExist:
        raise ServiceError(
            _("No user named “%(name)s” on this cluster.") % {"name": user_name}, field="user"
        ) from None
    if not cluster.databases.filter(name=db_name).exists():
        raise ServiceError(
            _("No database named “%(name)s” on this cluster.") % {"name": db_name}, field="database"
        )
    host = settings.PANEL_PUBLIC_HOST if cluster.is_local else cluster.host
    sslmode = "require" if cluster.is_local else cluster.sslmode
    return ConnectionDetails(db_user.name, db_user.password, host, int(cluster.port or 0), db_name, sslmode)
