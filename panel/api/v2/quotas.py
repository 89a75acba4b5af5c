"""``/v2/databases/{uuid}/quotas``: storage quotas (an extension of the managed service's API:
it has none), through the Quotas tab's own services. Sizes in bytes; ``setquota``'s forms
(``100M``, ``2G``) are accepted on the way in."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.responses import Status

from panel.api.models import Scope
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.api.v2.errors import ApiError
from panel.clusters.models import Cluster
from panel.quotas import services as quota_services
from panel.quotas.models import Quota, QuotaKind

router = Router(tags=["quotas"])
QUOTAS = "/{uuid:database_id}/quotas"


class LimitOut(Schema):
    used: int | None
    soft: int
    hard: int
    grace: str


class QuotaOut(Schema):
    kind: str
    name: str
    flags: str
    state: str
    reason: str
    space: LimitOut
    relations: LimitOut
    over_since: str | None
    writes_allowed_until: str | None
    measured_at: str | None


class GraceOut(Schema):
    space_seconds: int
    relations_seconds: int


class DiskOut(Schema):
    used_bytes: int | None
    size_bytes: int | None
    full: bool
    measured_at: str | None


class QuotaListOut(Schema):
    quotas: list[QuotaOut]
    grace: GraceOut
    disk: DiskOut


class QuotaOne(Schema):
    quota: QuotaOut


class QuotaIn(Schema):
    """Limits as bytes or setquota's sizes; relations as counts (or 10k); 0 = no limit."""

    space_soft: int | str = 0
    space_hard: int | str = 0
    relations_soft: int | str = 0
    relations_hard: int | str = 0


class GraceIn(Schema):
    space_seconds: int
    relations_seconds: int | None = None


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def _shown(row: quota_services.Row) -> dict[str, Any]:
    quota = row.quota
    return {
        "kind": quota.kind,
        "name": quota.name,
        "flags": row.flags,
        "state": quota.state,
        "reason": quota.reason,
        "space": {
            "used": quota.space_used,
            "soft": quota.space_soft,
            "hard": quota.space_hard,
            "grace": row.space_grace,
        },
        "relations": {
            "used": quota.files_used,
            "soft": quota.files_soft,
            "hard": quota.files_hard,
            "grace": row.files_grace,
        },
        "over_since": _iso(quota.over_since),
        "writes_allowed_until": _iso(quota.writes_allowed_until),
        "measured_at": _iso(quota.measured_at),
    }


def _kind(kind: str) -> str:
    if kind not in QuotaKind.values:
        raise ApiError(404, f"No quota kind {kind!r}: use database or role.")
    return kind


def _quota(cluster: Cluster, kind: str, name: str) -> Quota:
    found = cluster.quotas.filter(kind=_kind(kind), name=name).first()
    if found is None:
        raise ApiError(404, f"No quota on {kind} {name!r}.")
    return found


@router.get(QUOTAS, response={200: QuotaListOut, **ERRORS}, summary="List storage quotas (repquota)")
def list_quotas(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    storage = quota_services.storage_of(cluster)
    plan = cluster.plan
    return {
        "quotas": [_shown(row) for row in quota_services.rows(cluster, storage=storage)],
        "grace": {
            "space_seconds": storage.space_grace_seconds,
            "relations_seconds": storage.files_grace_seconds,
        },
        "disk": {
            "used_bytes": storage.data_dir_bytes,
            "size_bytes": plan.disk_bytes if plan else None,
            "full": storage.disk_full_since is not None,
            "measured_at": _iso(storage.measured_at),
        },
    }


@router.put(
    QUOTAS + "/{kind}/{name}", response={200: QuotaOne, **WRITE_ERRORS}, summary="Set a storage quota"
)
def set_quota(request: HttpRequest, database_id: uuid.UUID, kind: str, name: str, payload: QuotaIn) -> Any:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    quota = quota_services.set_quota(
        cluster,
        _kind(kind),
        name,
        space_soft=payload.space_soft,
        space_hard=payload.space_hard,
        files_soft=payload.relations_soft,
        files_hard=payload.relations_hard,
    )
    if quota is None:
        raise ApiError(422, "Every limit is 0: that is no quota. DELETE the quota to remove it.")
    return {"quota": _shown(quota_services.row_of(quota))}


@router.delete(
    QUOTAS + "/{kind}/{name}", response={204: None, **WRITE_ERRORS}, summary="Remove a storage quota"
)
def remove_quota(request: HttpRequest, database_id: uuid.UUID, kind: str, name: str) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    _quota(cluster, kind, name)
    quota_services.remove_quota(cluster, kind, name)
    return Status(204, None)


@router.post(
    QUOTAS + "/{kind}/{name}/allow_writes",
    response={200: QuotaOne, **WRITE_ERRORS},
    summary="Allow writes for 15 minutes (once per grace period)",
)
def allow_writes(request: HttpRequest, database_id: uuid.UUID, kind: str, name: str) -> Any:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    quota = quota_services.allow_writes(_quota(cluster, kind, name))
    return {"quota": _shown(quota_services.row_of(quota))}


@router.put(
    "/{uuid:database_id}/quota_grace", response={204: None, **WRITE_ERRORS}, summary="Set the grace periods"
)
def set_grace(request: HttpRequest, database_id: uuid.UUID, payload: GraceIn) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    quota_services.set_grace(cluster, payload.space_seconds, payload.relations_seconds)
    return Status(204, None)
