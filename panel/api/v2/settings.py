"""``/v2/databases/{id}/resize`` and ``/v2/databases/{id}/config``: a cluster's plan and its
PostgreSQL settings, through the same services as the Settings tab (``resize``, ``config``)."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.responses import Status

from panel.api.models import Scope
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.clusters.face import config, resize

router = Router(tags=["databases"])


class ResizeIn(Schema):
    """The managed service's resize call: a plan slug as ``size`` and the number of nodes."""

    size: str
    num_nodes: int | None = None


class ConfigBody(Schema):
    """The settings by name (see ``panel/clusters/lib/tunables.py`` for names, types and ranges)."""

    config: dict[str, Any]


@router.put(
    "/{uuid:database_id}/resize",
    response={202: None, **WRITE_ERRORS},
    summary="Resize a database cluster",
)
def resize_database(request: HttpRequest, database_id: uuid.UUID, payload: ResizeIn) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    # Accepted: the cluster is "resizing" until its node has restarted it on the new plan, or
    # added or removed its standbys (``num_nodes``; the size may stay the same).
    resize.resize_cluster(cluster, payload.size, num_nodes=payload.num_nodes)
    return Status(202, None)


@router.get(
    "/{uuid:database_id}/config",
    response={200: ConfigBody, **ERRORS},
    summary="Retrieve an existing database cluster's configuration",
)
def get_config(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    return {"config": config.current_config(cluster)}


@router.patch(
    "/{uuid:database_id}/config",
    response={200: ConfigBody, **WRITE_ERRORS},
    summary="Update the database configuration for an existing database",
)
def patch_config(request: HttpRequest, database_id: uuid.UUID, payload: ConfigBody) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    return {"config": config.update_config(cluster, payload.config)}
