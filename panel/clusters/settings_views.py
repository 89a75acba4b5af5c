"""The cluster's Settings tab: what the cluster is (plan, version, node) and the changes a user
makes to it after creation, each section a form that calls one service function."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from panel.clusters.forms import DeleteClusterForm, TrustedSourceForm
from panel.clusters.lib import firewall
from panel.clusters.models import Cluster
from panel.clusters.ownership import get_cluster_for_user
from panel.lockout import client_address

# Where the panel's own benchmarks connect from (benchmarks.services.targets): a firewall without
# it stops them, which the section says.
PANEL_CLIENT_ADDRESS = "127.0.0.1"


def render_settings_tab(request: HttpRequest, cluster: Cluster, **extra: Any) -> HttpResponse:
    """The Settings tab: the whole page, or one section for an HTMX swap (``section`` names the
    partial of ``clusters/settings.html`` to render)."""
    section = extra.pop("section", None)
    sources = cluster.trusted_source_values()
    context = {
        "cluster": cluster,
        "active_tab": "settings",
        "plan": cluster.plan,
        "delete_form": DeleteClusterForm(),
        "trusted_sources": sources,
        "source_form": TrustedSourceForm(),
        "benchmarks_shut_out": cluster.is_local and not firewall.allows(sources, PANEL_CLIENT_ADDRESS),
        "panel_client_address": PANEL_CLIENT_ADDRESS,
        "my_address": _my_address(request, sources),
        **extra,
    }
    template = f"clusters/settings.html#{section}" if request.htmx and section else "clusters/settings.html"
    return render(request, template, context)


def _my_address(request: HttpRequest, sources: list[str]) -> str | None:
    """The address the browser comes from, offered as a source when it is one and not yet trusted.
    It is where the page is read from, not necessarily where the database clients run."""
    address = client_address(request)
    try:
        shown = firewall.display(firewall.parse_source(address))
    except firewall.InvalidSource:
        return None
    return None if sources and firewall.allows(sources, shown) else shown


@require_GET
def cluster_settings(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return render_settings_tab(request, cluster)
