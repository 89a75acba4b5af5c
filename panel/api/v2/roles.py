"""``/v2/databases/{uuid}/users`` and ``…/dbs``: a cluster's users and databases, through the
Users & Databases tab's own services."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.responses import Status

from panel.api.models import ApiToken, Scope
from panel.api.services import resources
from panel.api.v2.common import ERRORS, WRITE_ERRORS, Pagination, listed, named, page_of, scoped_cluster
from panel.api.v2.schemas import (
    DbIn,
    DbListOut,
    DbOut,
    UserCreateIn,
    UserListOut,
    UserOut,
    UserUpdateIn,
)
from panel.clusters.face import roles
from panel.clusters.models import Cluster, Database, DatabaseUser
from panel.core.errors import ServiceError
from panel.managed.face import logical_replication

router = Router(tags=["databases"])
USERS = "/{uuid:database_id}/users"
DBS = "/{uuid:database_id}/dbs"


def _user(cluster: Cluster, name: str) -> DatabaseUser:
    return named(cluster.users.all(), name, "user")


def _db(cluster: Cluster, name: str) -> Database:
    return named(cluster.databases.all(), name, "database")


def _shown(user: DatabaseUser, token: ApiToken) -> dict[str, Any]:
    return resources.user(user, with_password=token.has_scope(Scope.VIEW_CREDENTIALS))


# --- users ---------------------------------------------------------------------------------------


@router.get(USERS, response={200: UserListOut, **ERRORS}, summary="List all database users")
def list_users(request: HttpRequest, database_id: uuid.UUID, pagination: Query[Pagination]) -> dict[str, Any]:
    cluster, token = scoped_cluster(request, database_id, Scope.READ)
    page = page_of(request, cluster.users.order_by("created_at", "name"), pagination)
    return listed("users", page, lambda row: _shown(row, token))


@router.post(USERS, response={201: UserOut, **WRITE_ERRORS}, summary="Add a database user")
def add_user(request: HttpRequest, database_id: uuid.UUID, payload: UserCreateIn) -> Status[dict[str, Any]]:
    cluster, token = scoped_cluster(request, database_id, Scope.CREATE)
    added = roles.add_user(cluster, payload.name)
    if payload.settings is not None and payload.settings.pg_allow_replication:
        try:
            logical_replication.set_replication(cluster, added.name, True)
        except ServiceError:
            roles.delete_user(cluster, added.name)  # nothing half-made
            raise
    return Status(201, {"user": _shown(added, token)})


@router.get(
    USERS + "/{name}", response={200: UserOut, **ERRORS}, summary="Retrieve an existing database user"
)
def get_user(request: HttpRequest, database_id: uuid.UUID, name: str) -> dict[str, Any]:
    cluster, token = scoped_cluster(request, database_id, Scope.READ)
    return {"user": _shown(_user(cluster, name), token)}


@router.put(USERS + "/{name}", response={201: UserOut, **WRITE_ERRORS}, summary="Update a database user")
def update_user(
    request: HttpRequest, database_id: uuid.UUID, name: str, payload: UserUpdateIn
) -> Status[dict[str, Any]]:
    # The one setting is pg_allow_replication (logical replication only: the privilege guard's
    # rule). 201, as the managed service answers (its client takes only 201, 404 and 422).
    cluster, token = scoped_cluster(request, database_id, Scope.UPDATE)
    row = _user(cluster, name)
    logical_replication.set_replication(cluster, row.name, payload.settings.pg_allow_replication)
    return Status(201, {"user": _shown(row, token)})


@router.post(
    USERS + "/{name}/reset_auth",
    response={200: UserOut, **WRITE_ERRORS},
    summary="Reset a database user's password",
)
def reset_auth(request: HttpRequest, database_id: uuid.UUID, name: str) -> dict[str, Any]:
    # The body ({} from the client; mysql_settings on other engines) has nothing for PostgreSQL.
    # A user that is not there is the service's own refusal (user.not_found: a 404).
    cluster, token = scoped_cluster(request, database_id, Scope.UPDATE)
    return {"user": _shown(roles.reset_password(cluster, name), token)}


@router.delete(USERS + "/{name}", response={204: None, **WRITE_ERRORS}, summary="Remove a database user")
def delete_user(request: HttpRequest, database_id: uuid.UUID, name: str) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.DELETE)
    roles.delete_user(cluster, name)  # user.not_found: a 404
    return Status(204, None)


# --- databases -----------------------------------------------------------------------------------


@router.get(DBS, response={200: DbListOut, **ERRORS}, summary="List all databases")
def list_dbs(request: HttpRequest, database_id: uuid.UUID, pagination: Query[Pagination]) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    page = page_of(request, cluster.databases.order_by("created_at", "name"), pagination)
    return listed("dbs", page, resources.db)


@router.post(DBS, response={201: DbOut, **WRITE_ERRORS}, summary="Add a new database")
def add_db(request: HttpRequest, database_id: uuid.UUID, payload: DbIn) -> Status[dict[str, Any]]:
    cluster, _token = scoped_cluster(request, database_id, Scope.CREATE)
    added = roles.add_database(cluster, payload.name)
    return Status(201, {"db": resources.db(added)})


@router.get(DBS + "/{name}", response={200: DbOut, **ERRORS}, summary="Retrieve an existing database")
def get_db(request: HttpRequest, database_id: uuid.UUID, name: str) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    return {"db": resources.db(_db(cluster, name))}


@router.delete(DBS + "/{name}", response={204: None, **WRITE_ERRORS}, summary="Delete a database")
def delete_db(request: HttpRequest, database_id: uuid.UUID, name: str) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.DELETE)
    roles.delete_database(cluster, name)  # database.not_found: a 404
    return Status(204, None)
