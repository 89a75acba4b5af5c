"""Users and databases of a cluster: one service function per action on the Users & Databases tab."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import psycopg
from django.conf import settings
from django.db import transaction

from panel.clusters import hooks
from panel.clusters.engine import dbconn, isolation
from panel.clusters.lib.names import (
    InvalidName,
    require_typed_name,
    validate_database_name,
    validate_role_name,
)
from panel.clusters.models import Cluster, ClusterStatus, Database, DatabaseUser, EventLevel
from panel.clusters.replicas.services import replica_build, replica_source, streaming
from panel.clusters.services import failures, new_password, transitions
from panel.clusters.standbys.services import remote_members
from panel.core import agent
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError

log = logging.getLogger(__name__)


def on_server(
    cluster: Cluster,
    change: Callable[[psycopg.Connection], object],
    *,
    what: str,
    name: str,
    field: str | None = None,
) -> None:
    """Make ``change`` of the user's ``what`` (``failures.DATABASE``, ``NEW_DATABASE``, ``USER``)
    named ``name`` on the serving cluster as the panel's superuser; PostgreSQL's refusal becomes a
    ServiceError (about ``field`` when given) in the panel's words, chosen by its SQLSTATE: the
    server's own (English, whatever the page's language) go to the log.
    A read-only replica's roles and databases are its source's: changed there, they follow."""
    if cluster.is_replica:
        raise ServiceError(
            N_("A read-only replica has its source's users and databases; change them on “%(source)s”."),
            field=field,
            code="replica.read_only",
            params={"source": cluster.replica_of.name if cluster.replica_of else ""},
        )
    transitions.require_serving(cluster)
    try:
        with dbconn.admin_connection(cluster) as conn:
            change(conn)
    except dbconn.DatabaseError as exc:
        raise failures.refused_change(cluster.pk, exc, what=what, name=name, field=field) from None


@on_node(timeout=60)
def add_database(cluster: Cluster, name: str) -> Database:
    try:
        validate_database_name(name)
    except InvalidName as exc:
        raise ServiceError.of(exc, "name") from None
    if cluster.databases.filter(name=name).exists():
        raise ServiceError(
            N_("A database named “%(name)s” already exists."),
            field="name",
            code="database.name_taken",
            params={"name": name},
        )
    on_server(
        cluster,
        lambda conn: dbconn.create_database(conn, name, cluster.admin_user),
        what=failures.NEW_DATABASE,
        name=name,
        field="name",
    )
    database = Database.objects.create(cluster=cluster, name=name, owner_name=cluster.admin_user)
    follow_on_replicas(cluster)
    transitions.log_event(cluster, "database-added", Message(N_("Database “%(name)s” added."), name=name))
    return database


@on_node(timeout=60)
def delete_database(cluster: Cluster, name: str, *, confirm_name: str | None = None) -> None:
    """``confirm_name``: the name the user typed, when the caller asks one (the web)."""
    _require_typed("database", name, confirm_name)
    database = _get_database(cluster, name)
    if database.is_protected:
        raise ServiceError(
            N_("“%(name)s” is the default database and cannot be deleted."),
            code="database.default_protected",
            params={"name": name},
        )
    _drop(cluster, database, lambda conn: dbconn.drop_database(conn, name))
    follow_on_replicas(cluster)
    transitions.log_event(cluster, "database-deleted", Message(N_("Database “%(name)s” deleted."), name=name))


def _drop(
    cluster: Cluster, row: Database | DatabaseUser, drop: Callable[[psycopg.Connection], object]
) -> None:
    """``drop`` ``row`` from the server, then the row, once no pool uses it: none of the
    cluster's, none of its replicas' (they serve the source's users and databases)."""
    database, user = (row.name, None) if isinstance(row, Database) else (None, row.name)
    for served in (cluster, *cluster.replicas.all()):
        hooks.pooler.ensure_not_used(served, database=database, user=user)
    what = failures.DATABASE if isinstance(row, Database) else failures.USER
    on_server(cluster, drop, what=what, name=row.name)
    row.delete()


def _require_typed(what: str, name: str, confirm_name: str | None) -> None:
    try:
        require_typed_name(what, name, confirm_name)
    except InvalidName as exc:
        raise ServiceError.of(exc, "confirm_name") from None


@on_node(timeout=30)
def add_user(cluster: Cluster, name: str) -> DatabaseUser:
    try:
        validate_role_name(name, settings.PANEL_ROLES)
    except InvalidName as exc:
        raise ServiceError.of(exc, "name") from None
    if cluster.users.filter(name=name).exists():
        raise ServiceError(
            N_("A user named “%(name)s” already exists."),
            field="name",
            code="user.name_taken",
            params={"name": name},
        )
    password = new_password()
    on_server(
        cluster,
        lambda conn: dbconn.create_role(conn, name, password),
        what=failures.USER,
        name=name,
        field="name",
    )
    try:
        user = DatabaseUser(cluster=cluster, name=name)
        user.password = password
        user.save()
        _roles_changed(cluster)
    except Exception:
        # Nothing half-made: a role the panel cannot record or map would break every later
        # change of the cluster's roles (issue 29).
        log.exception("adding the user %r to %s failed; undoing it", name, cluster.pk)
        _undo_user(cluster, name)
        raise ServiceError(
            N_("The user “%(name)s” could not be added; nothing was kept."),
            field="name",
            code="user.add_failed",
            params={"name": name},
        ) from None
    transitions.log_event(cluster, "user-added", Message(N_("User “%(name)s” added."), name=name))
    return user


def _undo_user(cluster: Cluster, name: str) -> None:
    cluster.users.filter(name=name).delete()
    try:
        with dbconn.admin_connection(cluster) as conn:
            dbconn.drop_role(conn, name)
    except dbconn.DatabaseError:
        log.exception("could not drop the role %r of %s", name, cluster.pk)
    try:
        _roles_changed(cluster)
    except Exception:
        log.exception("could not rewrite the authentication files of %s", cluster.pk)


@on_node(timeout=30)
def delete_user(cluster: Cluster, name: str, *, confirm_name: str | None = None) -> None:
    """``confirm_name``: the name the user typed, when the caller asks one (the web)."""
    _require_typed("user", name, confirm_name)
    user = get_user(cluster, name)
    if user.is_protected:
        raise ServiceError(
            N_("“%(name)s” is the admin user and cannot be deleted."),
            code="user.admin_protected",
            params={"name": name},
        )
    _drop(cluster, user, lambda conn: dbconn.drop_role(conn, name))
    _roles_changed(cluster)
    transitions.log_event(cluster, "user-deleted", Message(N_("User “%(name)s” deleted."), name=name))


@on_node(timeout=30)
def reset_password(cluster: Cluster, name: str) -> DatabaseUser:
    user = get_user(cluster, name)
    if not cluster.is_local and user.is_protected:
        raise ServiceError(
            N_("The admin password of an attached server is changed where the server runs."),
            code="user.attached_admin_password",
            params={},
        )
    password = new_password()
    with transaction.atomic():
        on_server(
            cluster, lambda conn: dbconn.set_password(conn, name, password), what=failures.USER, name=name
        )
        user.password = password
        user.save(update_fields=["password_encrypted"])
    hooks.pooler.reapply_config(cluster)  # PgBouncer's auth file holds the role's SCRAM secret
    follow_on_replicas(cluster)
    transitions.log_event(cluster, "password-reset", Message(N_("Password of “%(name)s” reset."), name=name))
    return user


def follow_on_replicas(source: Cluster) -> None:
    """The source's users and databases changed: its running replicas, once they replayed the
    change, get the same rows, peer map and PgBouncer auth file (a replica on another node from
    that node's agent). Never raises."""
    for replica in source.replicas.filter(status__in=ClusterStatus.SERVING).select_related(
        "replica_of", "node"
    ):
        if replica.node is not None and not replica.node.is_here:
            try:
                lsn = replica_source.current_lsn(source)
                agent.send(
                    f"{__name__}.follow_here", (replica, lsn), {}, timeout=30, queue=replica.node.agent_queue
                )
            except (ServiceError, EngineError) as exc:
                log.warning("replica %s did not follow its source's roles: %s", replica.pk, exc)
                _auth_error(replica, exc)
            continue
        # Behind or restarting: its rows follow anyway; its server has the roles once it replays.
        with contextlib.suppress(dbconn.DatabaseError):
            streaming.wait_replayed(replica)
        replica_build.follow_source_rows(replica)
        _roles_changed(replica, follow=False)


@on_node(timeout=30)
def follow_here(replica: Cluster, lsn: str) -> None:
    """``follow_on_replicas`` on a replica's own node, once it replayed up to ``lsn``."""
    with contextlib.suppress(dbconn.DatabaseError):
        streaming.wait_replayed(replica, target=lsn)
    replica_build.follow_source_rows(replica)
    _roles_changed(replica, follow=False)


def _roles_changed(cluster: Cluster, *, follow: bool = True) -> None:
    """After a role was added or removed: the server's peer map for PgBouncer, then PgBouncer's
    auth file (and the same on the cluster's replicas). Never raises: the role change already
    happened in PostgreSQL."""
    if follow:
        follow_on_replicas(cluster)
    try:
        isolation.refresh_server_auth(cluster)
        remote_members.push_auth(cluster)  # the role exists already: a refusal is an event
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        # A program's or the system's words name the cluster's files: the log's, not the event's.
        log.warning("the server authentication of %s was not updated: %s", cluster.pk, exc)
        _auth_error(cluster, exc)
    hooks.pooler.reapply_config(cluster)


def _auth_error(cluster: Cluster, exc: Exception) -> None:
    """The event of a role change the server's authentication (PgBouncer's login) did not follow;
    the caller logged the words of what failed."""
    transitions.log_event(
        cluster,
        "auth-error",
        Message(
            N_("Could not update how the server authenticates PgBouncer: %(reason)s"),
            reason=failures.reason(exc),
        ),
        EventLevel.ERROR,
    )


def get_user(cluster: Cluster, name: str) -> DatabaseUser:
    """The tenant's user of that name; a ServiceError when there is none, or when the name is one
    of the panel's own roles."""
    if name in settings.PANEL_ROLES:
        # A row left from before the name was refused (issue 37) names the panel's role, not
        # the tenant's: no password of it is reset, no role of that name dropped.
        raise ServiceError(
            N_("“%(name)s” is reserved; choose another user name."),
            code="user.name_reserved",
            params={"name": name},
        )
    try:
        return cluster.users.get(name=name)
    except DatabaseUser.DoesNotExist:
        raise DatabaseUser.not_found(name) from None


def _get_database(cluster: Cluster, name: str) -> Database:
    try:
        return cluster.databases.get(name=name)
    except Database.DoesNotExist:
        raise Database.not_found(name) from None
