"""``/v2/databases/{uuid}/replicas``: read-only replicas in the managed service's shape, through
the clusters' own replica services (the same ones as the Overview and ``manage.py replica``)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.responses import Status

from panel.api.models import ApiToken, Scope
from panel.api.services import databases as shapes
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.api.v2.schemas import Connection
from panel.clusters.face import replicas
from panel.clusters.models import Cluster

router = Router(tags=["databases"])
REPLICAS = "/{uuid:database_id}/replicas"


class ReplicaCreateIn(Schema):
    name: str
    size: str | None = None
    region: str | None = None
    tags: list[str] | None = None
    private_network_uuid: str | None = None
    storage_size_mib: int | None = None


class Replica(Schema):
    id: uuid.UUID
    name: str
    region: str
    status: str
    size: str
    created_at: dt.datetime
    tags: list[str]
    storage_size_mib: int
    connection: Connection
    private_connection: Connection


class ReplicaOut(Schema):
    replica: Replica


class ReplicaListOut(Schema):
    replicas: list[Replica]


def replica(cluster: Cluster, token: ApiToken) -> dict[str, Any]:
    """A replica as the managed service's ``replica`` object (its own connection details; the
    private ones name its node's private address, the public one when the node has none)."""
    with_password = token.has_scope(Scope.VIEW_CREDENTIALS)
    connection = shapes.connection(cluster, with_password=with_password)
    return {
        "id": cluster.pk,
        "name": cluster.name,
        "region": shapes.region(cluster),
        "status": replicas.status_word_for_api(cluster),
        "size": cluster.plan_slug,
        "created_at": cluster.created_at,
        "tags": [],
        "storage_size_mib": 0,
        "connection": connection,
        "private_connection": shapes.connection(cluster, with_password=with_password, private=True),
    }


@router.get(REPLICAS, response={200: ReplicaListOut, **ERRORS}, summary="List read-only replicas")
def list_replicas(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    source, token = scoped_cluster(request, database_id, Scope.READ)
    rows = source.replicas.select_related("node").order_by("created_at", "name")
    return {"replicas": [replica(row, token) for row in rows]}


@router.post(REPLICAS, response={201: ReplicaOut, **WRITE_ERRORS}, summary="Create a read-only replica")
def create_replica(
    request: HttpRequest, database_id: uuid.UUID, payload: ReplicaCreateIn
) -> Status[dict[str, Any]]:
    source, token = scoped_cluster(request, database_id, Scope.CREATE)
    made = replicas.create_replica(source, name=payload.name, plan_slug=payload.size or None)
    return Status(201, {"replica": replica(made, token)})


@router.get(
    REPLICAS + "/{replica_name}", response={200: ReplicaOut, **ERRORS}, summary="Get a read-only replica"
)
def get_replica(request: HttpRequest, database_id: uuid.UUID, replica_name: str) -> dict[str, Any]:
    source, token = scoped_cluster(request, database_id, Scope.READ)
    return {"replica": replica(replicas.get_replica(source, replica_name), token)}


@router.delete(
    REPLICAS + "/{replica_name}", response={204: None, **WRITE_ERRORS}, summary="Destroy a read-only replica"
)
def destroy_replica(request: HttpRequest, database_id: uuid.UUID, replica_name: str) -> Status[None]:
    source, _token = scoped_cluster(request, database_id, Scope.DELETE)
    replicas.delete_replica(replicas.get_replica(source, replica_name))
    return Status(204, None)


@router.put(
    REPLICAS + "/{replica_name}/promote",
    response={204: None, **WRITE_ERRORS},
    summary="Promote a read-only replica to a primary cluster",
)
def promote_replica(request: HttpRequest, database_id: uuid.UUID, replica_name: str) -> Status[None]:
    source, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    replicas.promote_replica(replicas.get_replica(source, replica_name))
    return Status(204, None)
