"""``/v2/databases/{id}/firewall``: a cluster's trusted sources, in the managed service's shape.

The official client calls these ``list_firewall_rules`` and ``update_firewall_rules``. A PUT is a
full replacement and goes through the same service as the Settings tab and ``manage.py firewall``;
the managed service also knows rules naming a Droplet, a Kubernetes cluster, a tag or an app,
which mean nothing here, so only ``ip_addr`` rules are taken. Every rule is checked before
anything changes: one bad rule refuses the whole request.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.responses import Status

from panel.api.models import Scope
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.api.v2.errors import ApiError
from panel.clusters.face import firewall as firewall_services
from panel.clusters.models import Cluster

router = Router(tags=["databases"])

IP_ADDR = "ip_addr"


class FirewallRuleOut(Schema):
    uuid: str
    cluster_uuid: str
    type: str
    value: str
    created_at: str


class FirewallRulesOut(Schema):
    rules: list[FirewallRuleOut]


class FirewallRuleIn(Schema):
    # What GET answered may be sent back as it is: uuid, cluster_uuid and created_at are ignored.
    type: str
    value: str


class FirewallRulesIn(Schema):
    rules: list[FirewallRuleIn]


def _rules(cluster: Cluster) -> list[dict[str, Any]]:
    return [
        {
            "uuid": str(source.pk),
            "cluster_uuid": str(cluster.pk),
            "type": IP_ADDR,
            "value": source.value,
            "created_at": source.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for source in cluster.trusted_sources.order_by("created_at", "value")
    ]


@router.get(
    "/{uuid:database_id}/firewall",
    response={200: FirewallRulesOut, **ERRORS},
    summary="List firewall rules (trusted sources) for a database cluster",
)
def list_firewall_rules(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    return {"rules": _rules(cluster)}


@router.put(
    "/{uuid:database_id}/firewall",
    response={204: None, **WRITE_ERRORS},
    summary="Update firewall rules (trusted sources) for a database cluster",
)
def update_firewall_rules(
    request: HttpRequest, database_id: uuid.UUID, payload: FirewallRulesIn
) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    for index, rule in enumerate(payload.rules):
        if rule.type != IP_ADDR:
            raise ApiError(
                422,
                f"rules.{index}: the type {rule.type!r} is not supported here: only IP addresses and "
                f"CIDR ranges (type '{IP_ADDR}') can be trusted sources of this panel's clusters.",
            )
    # A ServiceError (a value that is no address or range, too many rules) is a 422 naming it.
    firewall_services.set_trusted_sources(cluster, [rule.value for rule in payload.rules])
    return Status(204, None)
