"""One function per user action on a cluster's online migration (the page, the API, ``manage.py
migration`` and the task call the same ones): start, run (the task's body), status, stop.

Start checks what can be checked at once (the cluster serves, none runs, the fields, where the
source is, that it answers, asks for the password, has wal_level = logical, and that the user may
replicate and publish its tables), records the migration and sends the task; the task copies
each database's schema, publishes its tables on the source and subscribes the cluster to them.
Stop cuts over once the cluster has caught up (sequence values copied, subscriptions and
publications dropped) or, before every table is copied, cancels. Whatever fails on the way
undoes what the migration made: its subscriptions, publications, role, password file and the
databases it created.
"""

from __future__ import annotations

import dataclasses
import logging

from django.conf import settings
from django.db import IntegrityError, transaction

from panel.clusters.face import dbconn, ha, postgres, roles, transitions
from panel.clusters.lib import refusals
from panel.clusters.models import Cluster, DatabaseUser
from panel.clusters.models.servers import server_host
from panel.core import taskqueue
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError
from panel.migrate.engine import schema
from panel.migrate.lib import source as source_lib
from panel.migrate.lib.source import InvalidSource, Source
from panel.migrate.models import ACTIVE, MigrationStatus, OnlineMigration
from panel.migrate.services import source as remote
from panel.migrate.services import target

log = logging.getLogger(__name__)

TASK = "panel.migrate.tasks.run_migration"
SCHEMA_TIMEOUT = 600
TASK_TIME_LIMIT = 3600
STATEMENT_FAILED = N_(
    "A statement on the cluster or on the source failed while the migration was set up. Check "
    "that the source still accepts this user and password, then start again; the panel's log "
    "holds the details for an administrator."
)


def latest(cluster: Cluster) -> OnlineMigration | None:
    return OnlineMigration.objects.filter(cluster=cluster).order_by("-created_at").first()


def _require_local(cluster: Cluster) -> None:
    if not cluster.is_local:
        raise ServiceError(
            N_("Online migration copies into a cluster the panel runs, not into an attached server."),
            code="migration.attached_unsupported",
            params={},
        )
    transitions.require_serving(cluster)
    if cluster.is_ha:
        ha.refresh_members(cluster)  # Patroni's primary now, not the last one recorded
    if server_host(cluster) != str(cluster.socket_dir):
        # The subscriptions run on the primary and read the source's password from a file
        # on the cluster's node, which a member on another node cannot.
        raise ServiceError(
            N_(
                "The cluster's primary member runs on another node; online migration needs it on "
                "the cluster's own node. Switch over to a member there first."
            ),
            code="migration.primary_elsewhere",
            params={},
        )


def _already_running() -> ServiceError:
    return ServiceError(
        N_("A migration into this cluster is already running; stop it first."),
        code="migration.already_running",
        params={},
    )


@on_node(timeout=90)
def start_migration(
    cluster: Cluster,
    *,
    host: str,
    port: int,
    dbname: str,
    username: str,
    password: str,
    disable_ssl: bool = False,
    ignore_dbs: list[str] | None = None,
    enqueue: bool = True,
) -> OnlineMigration:
    """Check the source and start migrating it into ``cluster`` (see the module's docstring)."""
    _require_local(cluster)
    if OnlineMigration.objects.filter(cluster=cluster, status__in=ACTIVE).exists():
        raise _already_running()
    try:
        source = source_lib.check(
            Source(
                host=host,
                port=port,
                dbname=dbname,
                username=username,
                disable_ssl=bool(disable_ssl),
                ignore_dbs=tuple(ignore_dbs or ()),
            )
        )
    except InvalidSource as exc:
        raise ServiceError.of(exc) from None
    if not password:
        raise ServiceError(
            N_("Enter the source user's password."),
            field="password",
            code="migration.password_required",
            params={},
        )
    source = dataclasses.replace(source, host=remote.canonical_host(source))
    remote.count_attempt(cluster.owner_id)
    address = remote.resolve_allowed(source)
    with remote.connect(source, address, password) as conn:
        databases = remote.preflight(conn, source)
    for name in databases:
        with remote.connect(source, address, password, name) as conn:
            remote.tables(conn, name)
    migration = OnlineMigration(
        cluster=cluster, host=source.host, address=address, port=source.port, dbname=source.dbname,
        username=source.username, disable_ssl=source.disable_ssl, ignore_dbs=list(source.ignore_dbs),
        databases=databases,
    )  # fmt: skip
    migration.password = password
    try:
        with transaction.atomic():
            migration.save()
            transitions.log_event(
                cluster,
                "migration-started",
                Message(
                    N_("Online migration from %(host)s:%(port)s started."), host=source.host, port=source.port
                ),
            )
    except IntegrityError:  # one started meanwhile (the constraint of one active migration)
        raise _already_running() from None
    if enqueue:
        try:
            taskqueue.enqueue_task(
                TASK, str(migration.pk), queue=cluster.work_queue, time_limit=TASK_TIME_LIMIT
            )
        except ServiceError:
            migration.delete()
            raise
    return migration


def run_migration(migration_id: str) -> None:
    """The task's body: copy, publish, subscribe; on any failure undo and record the error."""
    migration = OnlineMigration.objects.select_related("cluster").filter(pk=migration_id).first()
    if migration is None or migration.status != MigrationStatus.RUNNING or migration.subscriptions:
        return
    cluster = migration.cluster
    try:
        _set_up(migration)
    except Canceled:
        # Stopped from the page, the API or the command line while it was being set up: what
        # was made since the stop's own clean-up goes too.
        _undo(migration, drop_created=True)
    except (ServiceError, EngineError, dbconn.DatabaseError) as exc:
        detail = exc.message if isinstance(exc, ServiceError) else str(exc)
        log.warning("migration %s into %s failed: %s", migration.pk, cluster.name, detail)
        # A server's own words can name paths of the panel's machines (a socket directory, the
        # source's password file): the user reads a plain reason, the panel's log the detail.
        # pg_dump's and pg_restore's lines (an EngineError) are about the user's own objects
        # ("relation … already exists"): they stay, without the paths they name.
        if isinstance(exc, ServiceError):
            reason = detail
        elif isinstance(exc, EngineError):
            reason = refusals.without_paths(detail)
        else:
            reason = str(Message(STATEMENT_FAILED))
        _undo(migration, drop_created=True)
        migration.refresh_from_db()
        if migration.is_active:
            migration.finish(MigrationStatus.ERROR, reason)
            transitions.log_event(cluster, "migration-failed", Message(N_("Online migration failed: %(reason)s"), reason=reason),
                              level="error")  # fmt: skip


class Canceled(Exception):
    """The migration was stopped while its set-up ran."""


def _progress(migration: OnlineMigration, text: str) -> None:
    """Record the step about to start; Canceled when the migration was stopped meanwhile."""
    migration.progress_message = text[:200]
    still = OnlineMigration.objects.filter(pk=migration.pk, status=MigrationStatus.RUNNING).update(
        progress_message=migration.progress_message
    )
    if not still:
        raise Canceled


def _set_up(migration: OnlineMigration) -> None:
    cluster, source, name = migration.cluster, migration.source, migration.name
    if cluster.is_ha:
        ha.refresh_members(cluster)  # the subscriptions go to the primary as Patroni has it now
    password = migration.password
    admin = DatabaseUser.objects.get(cluster=cluster, name=cluster.admin_user)
    bindir = postgres.bindir_for(cluster.version)
    existing = set(cluster.databases.values_list("name", flat=True))
    published: dict[str, list[tuple[str, str]]] = {}
    for dbname in migration.databases:
        _progress(migration, f"schema:{dbname}")
        if dbname not in existing:
            roles.add_database(cluster, dbname)
            migration.created_databases = [*migration.created_databases, dbname]
            migration.save(update_fields=["created_databases"])
        with remote.connect(source, migration.address, password, dbname) as conn:
            published[dbname] = remote.tables(conn, dbname)
        schema.copy_schema(
            bindir,
            source=source_lib.conninfo(remote.connection_params(source, migration.address, dbname)),
            source_password=password,
            target=source_lib.conninfo(
                {
                    "host": "127.0.0.1",
                    "port": cluster.port,
                    "user": admin.name,
                    "dbname": dbname,
                    "sslmode": "require",
                }
            ),
            target_password=admin.password,
            timeout=SCHEMA_TIMEOUT,
        )
        if published[dbname]:
            with remote.connect(source, migration.address, password, dbname) as conn:
                remote.create_publication(conn, name, published[dbname])
            migration.publications = [*migration.publications, dbname]
            migration.save(update_fields=["publications"])
    _progress(migration, "subscribing")
    passfile = target.write_passfile(cluster, name, password)
    target.create_role(cluster, settings.PANEL_MIGRATION_ROLE)
    for index, dbname in enumerate(migration.databases):
        if not published[dbname]:
            continue
        _progress(migration, "subscribing")
        subscription = f"{name}_{index}"
        params = remote.connection_params(source, migration.address, dbname)
        conninfo = source_lib.conninfo({**params, "passfile": str(passfile), "connect_timeout": 10})
        target.create_subscription(
            cluster, dbname, settings.PANEL_MIGRATION_ROLE, subscription, conninfo, name
        )
        migration.subscriptions = {**migration.subscriptions, dbname: subscription}
        migration.save(update_fields=["subscriptions"])
    target.demote_and_enable(cluster, settings.PANEL_MIGRATION_ROLE, migration.subscriptions)
    _progress(migration, "rows")


def _undo(migration: OnlineMigration, *, drop_created: bool) -> list[str]:
    """Remove what the migration made (best effort, each step on its own); notes for the log."""
    cluster, source, name = migration.cluster, migration.source, migration.name
    notes: list[str] = []
    for dbname, subscription in migration.subscriptions.items():
        try:
            if target.drop_subscription(cluster, dbname, subscription):
                notes.append(f"slot {subscription} left on the source")
        except dbconn.DatabaseError as exc:
            notes.append(f"subscription {subscription}: {exc}")
    try:
        target.drop_role(cluster, settings.PANEL_MIGRATION_ROLE, list(migration.subscriptions))
    except dbconn.DatabaseError as exc:
        notes.append(f"role {settings.PANEL_MIGRATION_ROLE}: {exc}")
    target.remove_passfile(cluster, name)
    password = migration.password
    for dbname in migration.publications:
        try:
            with remote.connect(source, migration.address, password, dbname) as conn:
                remote.drop_publication(conn, name)
        except ServiceError as exc:
            notes.append(f"publication in {dbname}: {exc.message}")
    if drop_created:
        for dbname in migration.created_databases:
            try:
                roles.delete_database(cluster, dbname)
            except ServiceError as exc:
                notes.append(f"database {dbname}: {exc.message}")
    for note in notes:
        log.warning("migration %s clean-up: %s", migration.pk, note)
    return notes


def before_teardown(cluster: Cluster) -> None:
    """A cluster deleted while a migration runs: its slots and publications on the source go
    first (a slot left there would hold the source's WAL for ever)."""
    for migration in OnlineMigration.objects.filter(cluster=cluster, status__in=ACTIVE):
        _undo(migration, drop_created=False)
        migration.finish(MigrationStatus.CANCELED)
