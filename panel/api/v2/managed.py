"""The managed service's extras: ``PUT …/maintenance`` and ``…/install_update``,
``GET/PUT …/autoscale``, and the account's ``GET/PUT /v2/databases/metrics/credentials``, through
panel.managed's services (the same the Settings tab and the node's periodic round use)."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router
from ninja.responses import Status

from panel.api.models import Scope
from panel.api.v2.auth import caller
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.api.v2.managed_schemas import (
    AutoscaleIn,
    AutoscaleOut,
    MaintenanceWindowIn,
    MetricsCredentialsIn,
    MetricsCredentialsOut,
)
from panel.managed.face import autoscale, maintenance, metrics

router = Router(tags=["databases"])


@router.get(
    "/metrics/credentials",
    response={200: MetricsCredentialsOut, **ERRORS},
    summary="Retrieve database clusters' metrics endpoint credentials",
)
def get_metrics_credentials(request: HttpRequest) -> dict[str, Any]:
    user, _token = caller(request, Scope.VIEW_CREDENTIALS)
    row = metrics.credentials_of(user)
    auth = {"basic_auth_username": row.username, "basic_auth_password": row.password}
    return {"credentials": {"credentials": auth}}


@router.put(
    "/metrics/credentials",
    response={204: None, **WRITE_ERRORS},
    summary="Update database clusters' metrics endpoint credentials",
)
def update_metrics_credentials(request: HttpRequest, payload: MetricsCredentialsIn) -> Status[None]:
    user, _token = caller(request, Scope.UPDATE)
    given = payload.credentials
    metrics.set_credentials(user, given.basic_auth_username, given.basic_auth_password)
    return Status(204, None)


@router.put(
    "/{uuid:database_id}/maintenance",
    response={204: None, **WRITE_ERRORS},
    summary="Configure a database cluster's maintenance window",
)
def update_maintenance_window(
    request: HttpRequest, database_id: uuid.UUID, payload: MaintenanceWindowIn
) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    maintenance.set_window(cluster, payload.day, payload.hour)
    return Status(204, None)


@router.put(
    "/{uuid:database_id}/install_update",
    response={204: None, **WRITE_ERRORS},
    summary="Start database maintenance (install the pending updates now)",
)
def install_update(request: HttpRequest, database_id: uuid.UUID) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    maintenance.install_update(cluster)
    return Status(204, None)


@router.get(
    "/{uuid:database_id}/autoscale",
    response={200: AutoscaleOut, **ERRORS},
    summary="Retrieve autoscale configuration for a database cluster",
)
def get_autoscale(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    row = autoscale.autoscale_of(cluster)
    storage = {
        "enabled": row.enabled,
        "threshold_percent": row.threshold_percent,
        "increment_gib": row.increment_gib,
    }
    return {"autoscale": {"storage": storage}}


@router.put(
    "/{uuid:database_id}/autoscale",
    response={204: None, **WRITE_ERRORS},
    summary="Configure autoscale settings for a database cluster",
)
def update_autoscale(request: HttpRequest, database_id: uuid.UUID, payload: AutoscaleIn) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    storage = payload.storage
    autoscale.set_autoscale(
        cluster,
        enabled=storage.enabled,
        threshold_percent=storage.threshold_percent,
        increment_gib=storage.increment_gib,
    )
    return Status(204, None)
