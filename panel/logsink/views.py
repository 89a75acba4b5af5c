"""The log-sink card of the Logs tab (loaded into the tab by HTMX): the sinks with how their
forwarding goes, the form that adds one, and removal. Each view: ownership lookup, form, one
service call."""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from panel.clusters.face import get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import REFUSED, submit
from panel.logsink.forms import SinkForm
from panel.logsink.services import sinks


def _card(
    request: HttpRequest, cluster: Cluster, form: SinkForm | None = None, error: str = ""
) -> HttpResponse:
    context = {
        "cluster": cluster,
        "sinks": list(cluster.log_sinks.all()),
        "form": form or SinkForm(initial={"format": "rfc5424"}),
        "error": error,
    }
    return render(request, "logsink/_card.html", context)


@require_GET
def sink_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return _card(request, get_cluster_for_user(request, cluster_id))


@require_POST
def sink_add(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = SinkForm(request.POST)
    made = submit(
        form,
        lambda data: sinks.create_sink(
            cluster, name=data["sink_name"], sink_type=data["sink_type"], config=form.config()
        ),
    )
    if made is REFUSED:
        # The card again with the error next to its field (status 200, which htmx swaps).
        return _card(request, cluster, form)
    return _card(request, cluster)


@require_POST
def sink_delete(request: HttpRequest, cluster_id: uuid.UUID, sink_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        sinks.delete_sink(cluster, sink_id)
    except ServiceError as exc:
        return _card(request, cluster, error=exc.message)
    return _card(request, cluster)
