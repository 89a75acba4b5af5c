"""The cluster's Settings tab: what the cluster is (plan, version, node) and the changes a user
makes to it after creation, each section a form that calls one service function."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from panel.clusters.forms import DeleteClusterForm
from panel.clusters.models import Cluster
from panel.clusters.ownership import get_cluster_for_user


def render_settings_tab(request: HttpRequest, cluster: Cluster, **extra: Any) -> HttpResponse:
    """The Settings tab: the whole page, or one section for an HTMX swap (``section`` names the
    partial of ``clusters/settings.html`` to render)."""
    section = extra.pop("section", None)
    context = {
        "cluster": cluster,
        "active_tab": "settings",
        "plan": cluster.plan,
        "delete_form": DeleteClusterForm(),
        **extra,
    }
    template = f"clusters/settings.html#{section}" if request.htmx and section else "clusters/settings.html"
    return render(request, template, context)


@require_GET
def cluster_settings(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return render_settings_tab(request, cluster)
