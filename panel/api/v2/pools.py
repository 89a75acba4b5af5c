"""``/v2/databases/{uuid}/pools``: connection pools, through the Pools tab's own services."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.responses import Status

from panel.api.models import ApiToken, Scope
from panel.api.services import resources
from panel.api.v2.auth import caller
from panel.api.v2.common import ERRORS, WRITE_ERRORS, Pagination, listed, owned_cluster, page_of
from panel.api.v2.errors import ApiError
from panel.api.v2.schemas import PoolCreateIn, PoolListOut, PoolOut, PoolUpdateIn
from panel.clusters.models import Cluster
from panel.pools.face import services as pool_services
from panel.pools.models import ConnectionPool

router = Router(tags=["databases"])
POOLS = "/{uuid:database_id}/pools"


def _pool(cluster: Cluster, name: str) -> ConnectionPool:
    found = cluster.pools.select_related("cluster__node").filter(name=name).first()
    if found is None:
        raise ApiError(404, f"No pool named {name!r} on this cluster.")
    return found


def _shown(pool: ConnectionPool, token: ApiToken) -> dict[str, Any]:
    return resources.pool(pool, with_password=token.has_scope(Scope.VIEW_CREDENTIALS))


@router.get(POOLS, response={200: PoolListOut, **ERRORS}, summary="List connection pools")
def list_pools(request: HttpRequest, database_id: uuid.UUID, pagination: Query[Pagination]) -> dict[str, Any]:
    user, token = caller(request, Scope.READ)
    cluster = owned_cluster(user, database_id)
    page = page_of(request, cluster.pools.select_related("cluster__node"), pagination)
    return listed("pools", page, lambda pool: _shown(pool, token))


@router.post(POOLS, response={201: PoolOut, **WRITE_ERRORS}, summary="Add a new connection pool")
def add_pool(request: HttpRequest, database_id: uuid.UUID, payload: PoolCreateIn) -> Status[dict[str, Any]]:
    user, token = caller(request, Scope.CREATE)
    cluster = owned_cluster(user, database_id)
    pool = pool_services.create_pool(
        cluster, payload.name, payload.db, payload.user or "", payload.mode, payload.size
    )
    return Status(201, {"pool": _shown(pool, token)})


@router.get(POOLS + "/{name}", response={200: PoolOut, **ERRORS}, summary="Retrieve a connection pool")
def get_pool(request: HttpRequest, database_id: uuid.UUID, name: str) -> dict[str, Any]:
    user, token = caller(request, Scope.READ)
    return {"pool": _shown(_pool(owned_cluster(user, database_id), name), token)}


@router.put(POOLS + "/{name}", response={204: None, **WRITE_ERRORS}, summary="Update a connection pool")
def update_pool(
    request: HttpRequest, database_id: uuid.UUID, name: str, payload: PoolUpdateIn
) -> Status[None]:
    # A full replacement: a user left out or "" makes it an inbound-user pool (godo sends "").
    user, _token = caller(request, Scope.UPDATE)
    pool = _pool(owned_cluster(user, database_id), name)
    pool_services.update_pool(pool, payload.db, payload.user or "", payload.mode, payload.size)
    return Status(204, None)


@router.delete(POOLS + "/{name}", response={204: None, **WRITE_ERRORS}, summary="Delete a connection pool")
def delete_pool(request: HttpRequest, database_id: uuid.UUID, name: str) -> Status[None]:
    user, _token = caller(request, Scope.DELETE)
    pool_services.delete_pool(_pool(owned_cluster(user, database_id), name))
    return Status(204, None)
