"""``pg_allow_replication``: a tenant's user given REPLICATION for logical replication (change
data capture, a subscriber elsewhere), and only that: the privilege guard refuses such a role
every replication command but logical decoding's (no BASE_BACKUP, no physical streaming: they
would hand out the server's files), and refuses renaming it. The role is put on the guard's list
before it gets REPLICATION, and comes off the list only after losing it."""

from __future__ import annotations

import logging

from django.db import transaction
from psycopg import sql

from panel.clusters.face import dbconn, failures, isolation, require_local, roles, transitions
from panel.clusters.models import Cluster, DatabaseUser
from panel.core import runas
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.polling import wait_for
from panel.managed.lib import logical_replication as conf
from panel.managed.models import ReplicationUser

log = logging.getLogger(__name__)
GUARD_SETTING = "pgpanel_guard.logical_replication_roles"
RELOAD_TIMEOUT = 10.0


def logical_roles(cluster: Cluster) -> list[str]:
    return sorted(ReplicationUser.objects.filter(user__cluster=cluster).values_list("user__name", flat=True))


def server_config(cluster: Cluster) -> list[str]:
    """The hook run whenever a local cluster's configuration is written: ``replication.conf``."""
    if not cluster.is_local:
        return []
    runas.write_private_file(
        cluster.pgdata / conf.FILE, conf.render(logical_roles(cluster)), owner=isolation.os_user(cluster)
    )
    return [conf.FILE]


def is_allowed(user: DatabaseUser) -> bool:
    """Whether the grant stands: asked each time, unless a list fetched it with its users
    (``prefetch_related("users__replication")``)."""
    descriptor = DatabaseUser.replication
    if descriptor.is_cached(user):
        return descriptor.related.get_cached_value(user) is not None
    return ReplicationUser.objects.filter(user=user).exists()


def _reload(cluster: Cluster) -> None:
    """The guard's list rewritten and read by the server: new connections see it."""
    server_config(cluster)
    wanted = ",".join(logical_roles(cluster))

    def seen() -> bool:
        with dbconn.admin_connection(cluster) as conn:
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(GUARD_SETTING))).fetchone()
        listed = ",".join(
            sorted(part.strip().strip('"') for part in str(row[0] if row else "").split(",") if part)
        )
        return listed == wanted

    with dbconn.admin_connection(cluster) as conn:
        conn.execute("SELECT pg_reload_conf()")
    if not wait_for(seen, RELOAD_TIMEOUT, interval=0.1):
        raise ServiceError(
            N_("The server did not take the new replication settings in time; nothing was granted."),
            code="user.replication_not_applied",
            params={},
        )


def _alter(cluster: Cluster, name: str, attribute: str) -> None:
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} " + attribute).format(sql.Identifier(name)))


@on_node(timeout=60)
def set_replication(cluster: Cluster, name: str, allow: bool) -> bool:
    """Grant or take back ``pg_allow_replication``; returns the user's setting."""
    user = roles.get_user(cluster, name)
    if is_allowed(user) == allow:
        return allow
    require_local(cluster)  # an attached server's roles are its owner's business
    transitions.require_serving(cluster, fresh=True)
    try:
        if allow:
            ReplicationUser.objects.create(user=user)
            _reload(cluster)  # on the guard's list first ...
            _alter(cluster, name, "REPLICATION")  # ... then the attribute
        else:
            _alter(cluster, name, "NOREPLICATION")
            with transaction.atomic():
                ReplicationUser.objects.filter(user=user).delete()
            _reload(cluster)
    except (dbconn.DatabaseError, ServiceError) as exc:
        if allow:  # off the list again; the attribute was not given (it is the last step)
            ReplicationUser.objects.filter(user=user).delete()
            try:
                server_config(cluster)
            except OSError:
                log.warning("replication.conf of %s not restored", cluster.pk)
        if isinstance(exc, ServiceError):
            raise
        # The server's words (English, whatever the reader's language): the log's.
        raise failures.refused_change(cluster.pk, exc, what=failures.USER, name=name) from None
    transitions.log_event(
        cluster,
        "user-replication",
        Message(
            N_("User “%(name)s” may use logical replication now.")
            if allow
            else N_("User “%(name)s” may no longer use replication."),
            name=name,
        ),
    )
    return allow
