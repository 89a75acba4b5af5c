"""``/v2/databases/{id}/logsink``: a cluster's log sinks, the managed service's five logsink
operations (pydo's ``list_logsink``, ``create_logsink``, ``get_logsink``, ``update_logsink``,
``delete_logsink``), through the same services as the Logs tab's card.

A sink's secrets (the TLS private key ``key``, the password in an Elasticsearch/OpenSearch
``url``) are shown only to a token with ``database:view_credentials``; without it ``key`` is left
out and the URL keeps its user name only.

As the managed service: create answers 201 with ``{"sink": …}``, get the sink object itself,
update (a full replacement of ``config``) and delete 200 with no body. Unknown fields, in the
body or in ``config``, are refused (422 with the code), so nothing is ever half understood.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from ninja.responses import Status
from pydantic import ConfigDict

from panel.api.models import ApiToken, Scope
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.logsink.lib import config as sink_config
from panel.logsink.models import LogSink
from panel.logsink.services import sinks

router = Router(tags=["databases"])


class SinkIn(Schema):
    model_config = ConfigDict(extra="forbid")

    sink_name: str
    sink_type: str
    config: dict[str, Any]


class SinkUpdateIn(Schema):
    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any]


class SinkOut(Schema):
    sink_id: str
    sink_name: str
    sink_type: str
    config: dict[str, Any]
    # This panel's additions: how forwarding goes.
    failing: bool = False
    last_error: str = ""
    sent_count: int = 0


class SinkCreatedOut(Schema):
    sink: SinkOut


class SinkListOut(Schema):
    sinks: list[SinkOut]


def _out(sink: LogSink, token: ApiToken) -> dict[str, Any]:
    """The sink as the API shows it: its secrets (the TLS private key, the password in an
    Elasticsearch URL) only to a token with database:view_credentials, as clusters' passwords."""
    config = sink.config
    if not token.has_scope(Scope.VIEW_CREDENTIALS):
        config = sink_config.without_secrets(sink.sink_type, config)
    return {
        "sink_id": str(sink.pk),
        "sink_name": sink.name,
        "sink_type": sink.sink_type,
        "config": config,
        "failing": sink.is_failing,
        "last_error": sink.error_text,
        "sent_count": sink.sent_count,
    }


@router.get("/{uuid:database_id}/logsink", response={200: SinkListOut, **ERRORS}, summary="List logsinks")
def list_logsink(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, token = scoped_cluster(request, database_id, Scope.READ)
    return {"sinks": [_out(sink, token) for sink in cluster.log_sinks.all()]}


@router.post(
    "/{uuid:database_id}/logsink", response={201: SinkCreatedOut, **WRITE_ERRORS}, summary="Create a logsink"
)
def create_logsink(request: HttpRequest, database_id: uuid.UUID, payload: SinkIn) -> Status[dict[str, Any]]:
    cluster, token = scoped_cluster(request, database_id, Scope.CREATE)
    sink = sinks.create_sink(
        cluster, name=payload.sink_name, sink_type=payload.sink_type, config=payload.config
    )
    return Status(201, {"sink": _out(sink, token)})


@router.get(
    "/{uuid:database_id}/logsink/{logsink_id}", response={200: SinkOut, **ERRORS}, summary="Get a logsink"
)
def get_logsink(request: HttpRequest, database_id: uuid.UUID, logsink_id: str) -> dict[str, Any]:
    cluster, token = scoped_cluster(request, database_id, Scope.READ)
    return _out(sinks.get_sink(cluster, logsink_id), token)


@router.put(
    "/{uuid:database_id}/logsink/{logsink_id}",
    response={200: None, **WRITE_ERRORS},
    summary="Update a logsink",
)
def update_logsink(
    request: HttpRequest, database_id: uuid.UUID, logsink_id: str, payload: SinkUpdateIn
) -> HttpResponse:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    sinks.update_sink(cluster, logsink_id, config=payload.config)
    return HttpResponse(status=200)


@router.delete(
    "/{uuid:database_id}/logsink/{logsink_id}",
    response={200: None, **WRITE_ERRORS},
    summary="Delete a logsink",
)
def delete_logsink(request: HttpRequest, database_id: uuid.UUID, logsink_id: str) -> HttpResponse:
    cluster, _token = scoped_cluster(request, database_id, Scope.DELETE)
    sinks.delete_sink(cluster, logsink_id)
    return HttpResponse(status=200)
