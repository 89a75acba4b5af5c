"""``/v2/databases/{id}/members`` and ``/v2/databases/{id}/switchover``: the panel's own calls
for a cluster with standbys (the managed service has no switchover), through the same services
as ``manage.py cluster members|switchover`` and the Overview."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema

from panel.api.models import Scope
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.clusters.face import members
from panel.clusters.face import switchover as switchover_service

router = Router(tags=["databases"])


class MemberOut(Schema):
    name: str
    role: str
    node: str
    port: int
    pid: int | None
    state: str
    lag_bytes: int | None
    timeline: int | None


class MembersOut(Schema):
    members: list[MemberOut]


class SwitchoverIn(Schema):
    """The standby to promote; none: the synchronous one."""

    to: str | None = None


class SwitchoverOut(Schema):
    primary: str


@router.get("/{uuid:database_id}/members", response={200: MembersOut, **ERRORS}, summary="List members")
def list_members(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    return {"members": [dataclasses.asdict(m) for m in members.list_members(cluster)]}


@router.post(
    "/{uuid:database_id}/switchover",
    response={200: SwitchoverOut, **WRITE_ERRORS},
    summary="Switch the primary over to a standby",
)
def switchover(request: HttpRequest, database_id: uuid.UUID, payload: SwitchoverIn) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    return {"primary": switchover_service.switchover(cluster, payload.to)}
