"""``/v2/databases``: clusters, through the same ownership rule and services as the pages."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.responses import Status

from panel.api import services
from panel.api.models import ApiToken, Scope
from panel.api.services import cluster_object, resources
from panel.api.v2 import backups as backups_api
from panel.api.v2.auth import caller
from panel.api.v2.common import ERRORS, WRITE_ERRORS, Pagination, listed, page_of, scoped_cluster
from panel.api.v2.schemas import (
    CaOut,
    DatabaseCreateIn,
    DatabaseListOut,
    DatabaseOut,
    EventListOut,
    OptionsOut,
)
from panel.clusters.face import clusters_for
from panel.clusters.face import services as cluster_services
from panel.clusters.models import Cluster
from panel.managed.face import tags

router = Router(tags=["databases"])


def _shown(request: HttpRequest, cluster: Cluster, token: ApiToken) -> dict[str, Any]:
    """The complete cluster object; the metrics endpoint is the address this call came to."""
    return cluster_object.full(
        cluster,
        with_password=token.has_scope(Scope.VIEW_CREDENTIALS),
        base_url=request.build_absolute_uri("/"),
    )


@router.get("/options", response={200: OptionsOut, **ERRORS}, summary="List database options")
def options(request: HttpRequest) -> dict[str, Any]:
    caller(request, Scope.READ)
    return services.options()


@router.get("", response={200: DatabaseListOut, **ERRORS}, summary="List database clusters")
def list_databases(
    request: HttpRequest, pagination: Query[Pagination], tag_name: str | None = None
) -> dict[str, Any]:
    user, token = caller(request, Scope.READ)
    clusters = cluster_object.listed(clusters_for(user)).order_by("created_at", "id")
    if tag_name is not None:
        clusters = tags.tagged(clusters, tag_name)
    page = page_of(request, clusters, pagination)
    return listed("databases", page, lambda cluster: _shown(request, cluster, token))


@router.post("", response={201: DatabaseOut, **WRITE_ERRORS}, summary="Create a new database cluster")
def create_database(request: HttpRequest, payload: DatabaseCreateIn) -> Status[dict[str, Any]]:
    user, token = caller(request, Scope.CREATE)
    if payload.backup_restore is not None:
        cluster = backups_api.restore_database(user, payload)
        return Status(201, {"database": _shown(request, cluster, token)})
    cluster = cluster_object.create(user, payload)
    return Status(201, {"database": _shown(request, cluster, token)})


@router.get("/{uuid:database_id}", response={200: DatabaseOut, **ERRORS}, summary="Get a database cluster")
def get_database(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, token = scoped_cluster(request, database_id, Scope.READ)
    return {"database": _shown(request, cluster, token)}


@router.delete(
    "/{uuid:database_id}", response={204: None, **WRITE_ERRORS}, summary="Destroy a database cluster"
)
def destroy_database(request: HttpRequest, database_id: uuid.UUID) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.DELETE)
    # The API has no confirmation step: the call itself is the confirmation, as on the managed
    # service; the cluster is marked deleting and its node's worker tears it down.
    cluster_services.request_delete(cluster, confirm_name=cluster.name)
    return Status(204, None)


@router.get(
    "/{uuid:database_id}/ca", response={200: CaOut, **ERRORS}, summary="Retrieve the public certificate"
)
def get_ca(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    return {"ca": resources.ca(cluster)}


@router.get(
    "/{uuid:database_id}/events", response={200: EventListOut, **ERRORS}, summary="List the cluster's events"
)
def list_events(
    request: HttpRequest, database_id: uuid.UUID, pagination: Query[Pagination]
) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    page = page_of(request, cluster.events.select_related("cluster"), pagination)
    return listed("events", page, resources.event)
