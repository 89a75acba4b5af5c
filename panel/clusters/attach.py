"""Attaching an existing PostgreSQL server: the panel records it and manages its users and
databases, but never runs it."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters import dbconn
from panel.clusters.lib.names import InvalidName, validate_cluster_name
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Database, DatabaseUser
from panel.clusters.services import ServiceError


@dataclass(frozen=True)
class ExternalServer:
    """What a user types to attach an existing server."""

    host: str
    port: int
    user: str
    password: str
    database: str
    sslmode: str


def attach_cluster(owner: AbstractBaseUser, *, name: str, server: ExternalServer) -> Cluster:
    """Test the connection, then record an existing server the panel will not run itself."""
    try:
        validate_cluster_name(name)
    except InvalidName as exc:
        raise ServiceError(str(exc), field="name") from None
    if Cluster.objects.filter(owner=owner, name=name).exists():
        raise ServiceError(_("You already have a cluster named “%(name)s”.") % {"name": name}, field="name")
    try:
        with dbconn.connect(
            unpinned_behind_pooler=True,
            host=server.host,
            port=server.port,
            user=server.user,
            password=server.password,
            dbname=server.database,
            sslmode=server.sslmode,
        ) as conn:
            version_num = conn.info.server_version
            databases = dbconn.list_databases(conn)
    except dbconn.DatabaseError as exc:
        raise ServiceError(_("Could not connect: %(reason)s") % {"reason": exc}) from None
    with transaction.atomic():
        cluster = Cluster.objects.create(
            owner=owner,
            name=name,
            kind=ClusterKind.EXTERNAL,
            version=str(version_num // 10000),
            status=ClusterStatus.ONLINE,
            progress=100,
            host=server.host,
            port=server.port,
            sslmode=server.sslmode,
            admin_user=server.user,
            default_database=server.database,
            online_since=timezone.now(),
        )
        admin = DatabaseUser(cluster=cluster, name=server.user, is_protected=True)
        admin.password = server.password
        admin.save()
        for db_name, db_owner in databases:
            Database.objects.create(
                cluster=cluster, name=db_name, owner_name=db_owner, is_protected=db_name == server.database
            )
        cluster.log_event(
            "attached", _("Attached %(host)s:%(port)s.") % {"host": server.host, "port": server.port}
        )
    return cluster
