"""The Overview's "Read-only replicas" card: a source's replicas (status, lag, connection) with
the form that adds one, or, on a replica's own page, what it follows and its Promote button.
Each view fetches the cluster through its ownership helper and calls one service."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from panel.clusters.forms import ReplicaForm
from panel.clusters.models import Cluster
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.replicas.services import replicas
from panel.core.errors import ServiceError
from panel.core.web import add_service_error, go_to


def _card(request: HttpRequest, cluster: Cluster, **extra: Any) -> HttpResponse:
    source = cluster.replica_of if cluster.is_replica else cluster
    assert source is not None
    rows = replicas.list_replicas(source) if source.is_local else []
    if cluster.is_replica:
        rows = [row for row in rows if row.replica.pk == cluster.pk]
    form = extra.pop("form", None) or ReplicaForm(initial={"plan": cluster.plan_slug})
    context = {
        "cluster": cluster,
        "rows": rows,
        "form": form,
        "forking": any(row.replica.status == "creating" for row in rows),
        **extra,
    }
    return render(request, "clusters/_replicas.html", context)


@require_GET
def replicas_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return _card(request, get_cluster_for_user(request, cluster_id))


@require_POST
def replica_add(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = ReplicaForm(request.POST)
    if form.is_valid():
        name, plan = form.cleaned_data["name"], form.cleaned_data["plan"]
        try:
            made = replicas.create_replica(cluster, name=name, plan_slug=plan)
        except ServiceError as exc:
            add_service_error(form, exc)
            # The other refusals too: a plan too small used to hide a bad name.
            for problem in replicas.request_problems(cluster, name, plan):
                if problem.code != exc.code:
                    add_service_error(form, problem)
        else:
            return _card(request, cluster, added=made)
    # An invalid form re-renders with status 200 (htmx 2 swaps no 4xx).
    return _card(request, cluster, form=form)


@require_POST
def replica_promote(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        replicas.promote_replica(cluster, confirm_name=request.POST.get("confirm_name", ""))
    except ServiceError as exc:
        return _card(request, cluster, problem=exc.message)
    messages.success(
        request, _("“%(name)s” is now a cluster of its own; it accepts writes.") % {"name": cluster.name}
    )
    return go_to(request, reverse("clusters:detail", args=[cluster.pk]))
