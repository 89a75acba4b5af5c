"""``/v2/databases/{id}/backups``, and ``POST /v2/databases`` with ``backup_restore``: a cluster's
backups and a new cluster restored from them, through the Backups tab's own services."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router

from panel.api.models import Scope
from panel.api.services.databases import ENGINE
from panel.api.v2.common import ERRORS, scoped_cluster
from panel.api.v2.errors import ApiError
from panel.api.v2.schemas import BackupListOut, DatabaseCreateIn
from panel.backups.services import backups, restore
from panel.clusters.face import clusters_for
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError

router = Router(tags=["backups"])


@router.get("/{uuid:database_id}/backups", response={200: BackupListOut, **ERRORS}, summary="List backups")
def list_backups(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    if not cluster.is_local or not cluster.is_serving:
        return {"backups": []}
    page = backups.page(cluster)
    if page.problem:
        raise page.problem_error()
    return {
        "backups": [
            # A backup can be restored from the moment it ended: that is its created_at here.
            {"created_at": b.stopped_at, "size_gigabytes": round(b.size / 1024**3, 6)}
            for b in reversed(page.backups)
            if not b.error
        ]
    }


def restore_database(user: Any, payload: DatabaseCreateIn) -> Cluster:
    """``backup_restore``: the named cluster of the caller's restored into a new one."""
    spec = payload.backup_restore
    assert spec is not None
    if payload.engine != ENGINE:
        raise ServiceError(f"Only the engine {ENGINE!r} (PostgreSQL) is offered here.", field="engine")
    source = clusters_for(user).filter(name=spec.database_name).select_related("node").first()
    if source is None:
        raise ApiError(404, f"No database cluster named {spec.database_name!r} to restore from.")
    return restore.request_restore(
        source, source.owner, name=payload.name, target_time=spec.backup_created_at, plan_slug=payload.size
    )
