"""``/v2/databases/{uuid}/pools``: connection pools, through the Pools tab's own services."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.responses import Status

from panel.api.models import ApiToken, Scope
from panel.api.services import resources
from panel.api.v2.common import ERRORS, WRITE_ERRORS, Pagination, listed, named, page_of, scoped_cluster
from panel.api.v2.schemas import PoolCreateIn, PoolListOut, PoolOut, PoolUpdateIn
from panel.clusters.models import Cluster
from panel.pools.face import services as pool_services
from panel.pools.models import ConnectionPool

router = Router(tags=["databases"])
POOLS = "/{uuid:database_id}/pools"


def _pool(cluster: Cluster, name: str) -> ConnectionPool:
    return named(cluster.pools.select_related("cluster__node"), name, "pool")


def _shown(pool: ConnectionPool, token: ApiToken) -> dict[str, Any]:
    return resources.pool(pool, with_password=token.has_scope(Scope.VIEW_CREDENTIALS))


@router.get(POOLS, response={200: PoolListOut, **ERRORS}, summary="List connection pools")
def list_pools(request: HttpRequest, database_id: uuid.UUID, pagination: Query[Pagination]) -> dict[str, Any]:
    cluster, token = scoped_cluster(request, database_id, Scope.READ)
    page = page_of(request, cluster.pools.select_related("cluster__node"), pagination)
    return listed("pools", page, lambda pool: _shown(pool, token))


@router.post(POOLS, response={201: PoolOut, **WRITE_ERRORS}, summary="Add a new connection pool")
def add_pool(request: HttpRequest, database_id: uuid.UUID, payload: PoolCreateIn) -> Status[dict[str, Any]]:
    cluster, token = scoped_cluster(request, database_id, Scope.CREATE)
    pool = pool_services.create_pool(
        cluster, payload.name, payload.db, payload.user or "", payload.mode, payload.size
    )
    return Status(201, {"pool": _shown(pool, token)})


@router.get(POOLS + "/{name}", response={200: PoolOut, **ERRORS}, summary="Retrieve a connection pool")
def get_pool(request: HttpRequest, database_id: uuid.UUID, name: str) -> dict[str, Any]:
    cluster, token = scoped_cluster(request, database_id, Scope.READ)
    return {"pool": _shown(_pool(cluster, name), token)}


@router.put(POOLS + "/{name}", response={204: None, **WRITE_ERRORS}, summary="Update a connection pool")
def update_pool(
    request: HttpRequest, database_id: uuid.UUID, name: str, payload: PoolUpdateIn
) -> Status[None]:
    # A full replacement: a user left out or "" makes it an inbound-user pool (godo sends "").
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    pool = _pool(cluster, name)
    pool_services.update_pool(pool, payload.db, payload.user or "", payload.mode, payload.size)
    return Status(204, None)


@router.delete(POOLS + "/{name}", response={204: None, **WRITE_ERRORS}, summary="Delete a connection pool")
def delete_pool(request: HttpRequest, database_id: uuid.UUID, name: str) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.DELETE)
    pool_services.delete_pool(_pool(cluster, name))
    return Status(204, None)
